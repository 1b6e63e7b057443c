"""A Llama-style decoder: RMSNorm, RoPE, fused-QKV attention through scaled_dot_product_attention,
SwiGLU MLP (fused gate+up), untied embedding and LM head. Plain nn.Linear everywhere, so
nibble.torch.convert() swaps exactly the four linear layers per block."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0 (the GPU machine)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # torch 1.13 (Debian CI): the same math, unfused.
    t = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return s.softmax(-1) @ v


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq_len, head_dim, device, base=10000.0):
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    ang = torch.outer(torch.arange(seq_len, device=device).float(), inv)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.attn_norm, self.mlp_norm = RMSNorm(hidden), RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.gate_up = nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, t, h = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a = causal_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, h))
        g, u = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Decoder(nn.Module):
    def __init__(self, vocab=256, hidden=640, layers=6, heads=10, ffn=None, seq_len=512):
        super().__init__()
        ffn = ffn or int(math.ceil(hidden * 8 / 3 / 128) * 128)
        self.config = dict(vocab=vocab, hidden=hidden, layers=layers, heads=heads, ffn=ffn, seq_len=seq_len)
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def non_embedding_params(self):
        return sum(p.numel() for n, p in self.named_parameters() if not n.startswith(("embed", "lm_head")))

    def forward(self, tokens):
        cos, sin = rope_tables(tokens.shape[1], self.blocks[0].head_dim, tokens.device)
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.lm_head(self.norm(x))
