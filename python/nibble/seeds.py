"""Reproducible per-layer, per-step seeds: the one rule that nibble.torch and every backend derive their
stochastic-rounding and random-sign seeds from (so the CUDA backends round as the reference backend does)."""


def mix(seed, step, salt):
    """splitmix64-style mixing: distinct, reproducible seeds per (layer seed, step, purpose salt)."""
    z = (seed + 0x9E3779B97F4A7C15 * (step + 1) + 0xBF58476D1CE4E5B9 * salt) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & 0x7FFFFFFFFFFFFFFF


def quartet_backward_seed(seed, step):
    """The sign (and stochastic-rounding) seed of a Quartet layer's backward at `step`: one per layer per
    step, shared by the dgrad rotation (dY, Wq^T along O) and the wgrad rotation (dY^T, Xq^T along T)."""
    return mix(seed, step, 1)
