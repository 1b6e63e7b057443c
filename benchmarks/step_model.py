"""The transformer the step benchmarks time, in plain torch: a block of RMSNorm, fused QKV projection, rotary
position embedding (optional), scaled_dot_product_attention with grouped-query heads, output projection,
RMSNorm and an MLP (gated SwiGLU or plain GELU); and a Llama-style language model of N such blocks between
a token embedding and a final RMSNorm + LM head, whose forward returns the cross-entropy loss.

Every block has four nn.Linear layers (qkv, proj, up, down), the layers nibble.torch.convert and torchao's
convert_to_float8_training replace; the embedding and the LM head (named lm_head, which convert's default
skip list keeps) stay BF16.
"""
import contextlib

import torch
import torch.nn.functional as F
from torch import nn


class _RMSNorm(nn.Module):  # torch < 2.4 (the CPU smoke test on Debian's torch 1.13); the GPU uses nn.RMSNorm
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.weight


def rms_norm(dim):
    return getattr(nn, "RMSNorm", _RMSNorm)(dim)


def attention(q, k, v, causal=True):
    """Attention over [batch, heads, tokens, head_dim]; GQA by repeating K/V heads, so the fused (flash)
    kernels apply whatever the torch version's enable_gqa support."""
    if k.shape[1] != q.shape[1]:
        k, v = (t.repeat_interleave(q.shape[1] // k.shape[1], dim=1) for t in (k, v))
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    s = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)  # torch 1.13 CPU smoke test only
    if causal:
        t = q.shape[-2]
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return s.softmax(-1) @ v


def rope_tables(seq_len, head_dim, base=500000.0):
    """cos and sin of the rotary angles, [seq_len, head_dim] (rotate-half layout), in float32.
    base 500000: Llama 3's rope_theta."""
    if head_dim % 2:
        raise ValueError(f"head_dim {head_dim} is odd; rotary embeddings rotate pairs of channels")
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    ang = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    """x [batch, heads, tokens, head_dim] rotated by the tables of its token positions."""
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rot * sin


class Block(nn.Module):
    def __init__(self, hidden, ffn, heads, kv_heads, gated, causal=True):
        super().__init__()
        if hidden % heads or heads % kv_heads:
            raise ValueError(f"hidden {hidden} must be a multiple of heads {heads}, and heads a multiple of "
                             f"kv_heads {kv_heads}")
        self.heads, self.kv_heads, self.hd, self.gated, self.causal = heads, kv_heads, hidden // heads, gated, causal
        self.n1, self.n2 = rms_norm(hidden), rms_norm(hidden)
        self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.hd, bias=False)
        self.proj = nn.Linear(heads * self.hd, hidden, bias=False)
        self.up = nn.Linear(hidden, (2 if gated else 1) * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, rope=None):
        b, t, h = x.shape
        q, k, v = self.qkv(self.n1(x)).split([self.heads * self.hd, self.kv_heads * self.hd,
                                             self.kv_heads * self.hd], dim=-1)
        q = q.view(b, t, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        if rope is not None:
            cos, sin = rope[0][:t], rope[1][:t]
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a = attention(q, k, v, self.causal)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        u = self.up(self.n2(x))
        if self.gated:
            g, u = u.chunk(2, -1)
            u = F.silu(g) * u
        else:
            u = F.gelu(u)
        return x + self.down(u)


class LanguageModel(nn.Module):
    """Token embedding, `blocks` Blocks with rotary positions, final RMSNorm, LM head; forward(tokens,
    targets) -> mean cross-entropy (logits in float32, as training code computes the loss)."""

    def __init__(self, vocab, hidden, ffn, heads, kv_heads, gated, blocks, seq_len, causal=True):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, ffn, heads, kv_heads, gated, causal) for _ in range(blocks))
        self.norm = rms_norm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        cos, sin = rope_tables(seq_len, hidden // heads)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        rope = (self.rope_cos.to(x.dtype), self.rope_sin.to(x.dtype))
        for blk in self.blocks:
            x = blk(x, rope)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def on_device(device):
    """Initialise parameters on the device itself where torch allows it (torch >= 2.0): a 5B-class block
    has ~200 M parameters, slow to initialise on the host."""
    return torch.device(device) if hasattr(torch.device, "__enter__") else contextlib.nullcontext()
