"""nibble.distributed: what nibble's layers need under torch DistributedDataParallel (DDP).

    nibble.torch.convert(model, "fp8-delayed")
    ddp = DistributedDataParallel(model, device_ids=[local_rank], broadcast_buffers=False)
    nibble.distributed.seed_per_rank(model)    # AFTER wrapping: DDP's constructor copies rank 0's buffers
    for x, y in my_shard_of_each_global_batch:
        loss_fn(ddp(x), y).backward()          # DDP averages the gradients over the ranks
        opt.step(); opt.zero_grad()
        nibble.distributed.sync_amax(model)    # identical delayed scales on every rank

A nibble.torch.Linear carries five buffers; under DDP they fall into two kinds.
- `seed_buffer` (the backward's random signs and stochastic-rounding bits) must DIFFER across ranks.
  A random-sign Hadamard rotation and stochastic rounding are unbiased in expectation over their
  random bits; with an independent seed per rank every rank's gradient is an unbiased estimate on its
  own, the DDP average of them is unbiased, and its quantization noise (variance) shrinks with the
  number of ranks. With one seed everywhere all ranks would rotate with the same signs and round with
  the same bits, so their errors would be correlated and would not average out. `seed_per_rank` gives
  every layer a distinct, reproducible seed per rank, `rank_seed(layer seed, rank)`.
- `amax_history` / `amax_filled` (fp8-delayed's scale state) must be IDENTICAL across ranks: every rank
  sees a different shard of the batch, so each would record different activation and gradient amaxes
  and derive different scales, and the ranks would quantize with different FP8 grids. `sync_amax`
  all-reduces them with MAX after each optimizer step (Transformer Engine's amax reduction does the
  same over the data-parallel group), so the next step's scales cover every rank's tensors. `scale`
  (fp8-delayed's s_enc per role) needs no collective: each step first updates it from the all-reduced
  history (or keeps it where that history's max is 0 or non-finite), the same on every rank.
  `step` needs nothing: every rank runs the same number of training forwards.

Why DistributedDataParallel(..., broadcast_buffers=False): with the default True, DDP copies rank 0's
buffers to every rank before each forward. That overwrites the per-rank seeds (every rank back to
rank 0's signs and rounding bits, the correlated noise above). The amax histories would survive it
(after sync_amax they are equal on all ranks already), but the copy is one more collective per
forward for nothing; and without sync_amax it would silently give every rank rank 0's scales, taken
from rank 0's shard alone. DDP's constructor copies rank 0's buffers once whatever that flag says
(torch 1.13 does; so may later versions), which is why `seed_per_rank` runs after wrapping. Loading a
checkpoint saved by rank 0 also puts rank 0's seeds everywhere: call `seed_per_rank` again after it.

Collectives run on the group's device: CUDA tensors with nccl (the model's buffers are already on the
GPU), CPU tensors with gloo.
"""
import torch
import torch.distributed as dist

from . import torch as nt

_M64 = 0xFFFFFFFFFFFFFFFF


def rank_seed(seed, rank):
    """The seed of a layer whose single-process seed is `seed` on data-parallel rank `rank`: a
    splitmix64-style mix of both: reproducible, distinct per (seed, rank); rank 0 is mixed too (every
    rank alike, none keeps the single-process seed). In [0, 2^63), so it fits the int64 buffer."""
    z = (int(seed) + 0x9E3779B97F4A7C15 * (int(rank) + 1) + 0xD1B54A32D192ED03) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return (z ^ (z >> 31)) & 0x7FFFFFFFFFFFFFFF


def nibble_layers(model):
    """(qualified name, layer) of every nibble.torch.Linear in `model`, in module order."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, nt.Linear)]


def _rank(group=None):
    return dist.get_rank(group) if dist.is_available() and dist.is_initialized() else 0


def seed_per_rank(model, rank=None):
    """Set every nibble layer's `seed_buffer` to rank_seed(its own seed, rank) (rank: this process's
    rank in the default group; 0 without one). The layer's seed before the first call is kept on the
    layer (`rank_seed_base`), so calling it again gives the same seeds, not a seed of a seed. Call it
    after wrapping the model in DDP (see the module docstring). Returns {layer name: new seed}."""
    rank = _rank() if rank is None else int(rank)
    seeds = {}
    for name, m in nibble_layers(model):
        if getattr(m, "rank_seed_base", None) is None:
            m.rank_seed_base = m.seed
        s = rank_seed(m.rank_seed_base, rank)
        with torch.no_grad():
            m.seed_buffer.fill_(s)
        seeds[name] = s
    return seeds


def _collective_device(group=None):
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def sync_amax(model, group=None):
    """All-reduce (MAX) every nibble layer's `amax_history` [3, window] and `amax_filled` [3] over
    `group` (default: the whole world), in place; call it after each optimizer step on every rank. Two
    collectives for the whole model (the buffers are packed into one tensor of each dtype). Older slots
    are already equal on all ranks, so MAX changes only the newest amaxes. Layers whose recipe keeps no
    history (all but fp8-delayed) hold zeros, which MAX leaves alone. No-op without an initialised
    process group or with one rank. Returns the number of layers reduced."""
    layers = [m for _, m in nibble_layers(model)]
    if not layers or not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return 0
    dev = _collective_device(group)
    for name in ("amax_history", "amax_filled"):
        bufs = [getattr(m, name) for m in layers]
        flat = torch.cat([b.reshape(-1) for b in bufs]).to(dev)
        dist.all_reduce(flat, op=dist.ReduceOp.MAX, group=group)
        with torch.no_grad():
            for b, chunk in zip(bufs, flat.split([b.numel() for b in bufs])):
                b.copy_(chunk.view_as(b))
    return len(layers)


def any_rank(flag, group=None):
    """True on every rank when `flag` is true on at least one: a collective, so every rank must call it
    at the same point (use it for decisions that must agree, e.g. stop now, time budget spent)."""
    t = torch.tensor([1.0 if flag else 0.0], device=_collective_device(group))
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return bool(t.item() > 0)
