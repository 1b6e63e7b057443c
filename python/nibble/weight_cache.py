"""Quantize each weight once per optimizer step, not once per micro-batch (gradient accumulation).

    with nibble.torch.weight_cache(model):
        for micro in micro_batches:
            loss_fn(model(micro)).backward()
    opt.step(); opt.zero_grad()

Transformer Engine's is_first_microbatch in PyTorch terms: inside the context, a nibble layer on the
CUDA backend keeps the quantized copies of its weight (the row-wise copy for fprop and the column-wise
copy for dgrad) from the first pass that makes them and reuses them while the weight is the same
tensor (data_ptr) at the same version: every in-place write (the optimizer's update, copy_, load_state_dict)
bumps torch's version counter, so a changed weight is quantized again. Quantization is deterministic
for weights (round to nearest; fp8-delayed's weight scale comes from its history, which a reused copy
does not add to, as Transformer Engine skips the weight's amax update after the first micro-batch), so
a cached copy equals a fresh one bit for bit whenever the weight's own values decide it. Leaving the
context drops the copies (their memory: about one byte per weight element per copy for FP8).
What each CUDA recipe keeps:
  fp8-current, fp8-delayed, fp8-block  the FP8 copies of W (row-wise, and W^T for dgrad)
  mxfp4                                the MXFP4 planes of W and W^T (their E4M3 re-encodings still run per pass:
                                       they decide the GEMM path with the pass's violation counts)
  mxfp8, nvfp4                         the quantized copies of W and W^T and their exact BF16 decodes (the
                                       GEMM operands: 2 bytes per element each, beside the codes)
  quartet                              W's fused forward (MXFP4 planes, trust mask, E4M3 row re-encoding and its
                                       violation counts) and, per backward seed, Wq^T's planes
Other layers and backends ignore it.
"""
import contextlib


@contextlib.contextmanager
def weight_cache(model):
    """Cache every nibble layer's quantized weight copies of `model` for the duration of the context."""
    layers = [m for m in model.modules() if hasattr(m, "_weight_copies")]
    for m in layers:
        m._weight_copies = {}
    try:
        yield model
    finally:
        for m in layers:
            m._weight_copies = None


def cached(layer, key, make):
    """(value, hit): make() (a tuple of the quantized copies) once per weight version while the layer's
    cache is on (weight_cache), else every call. `key` names what make() depends on besides the weight."""
    store = getattr(layer, "_weight_copies", None)
    if store is None:
        return make(), False
    w = layer.weight
    stamp = (w.data_ptr(), w._version, w.dtype)
    hit = store.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1], True
    value = make()
    for k in [k for k, (s, _) in store.items() if s != stamp]:
        del store[k]  # copies of an older version of the weight
    store[key] = (stamp, value)
    return value, False


def derived(layer, key, source, make):
    """(value, hit): make() once per weight version for a value derived from `source`, a tensor made from the
    weight (a cached copy, or the copy a forward saved for backward), while the layer's cache is on; else every
    call. The entry keeps `source` alive, so its memory cannot be taken by another tensor while the entry lives
    and the data_ptr in the key names this source alone."""
    if getattr(layer, "_weight_copies", None) is None:
        return make(), False
    (_, value), hit = cached(layer, (key, source.data_ptr()), lambda: (source, make()))
    return value, hit
