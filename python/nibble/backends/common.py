"""The tails every CUDA autograd function of nibble.backends shares: finishing forward and backward
(paths, bias, finiteness checks, dtypes), the token-block check of the wgrad GEMM, and the cuBLASLt GEMM
call with its BF16-output fallback."""
import torch


def finish_forward(layer, x, weight, bias, y, path, keep_dtype=False):
    """The tail every CUDA autograd forward shares: record the path, add the bias, check the output is
    finite, and return y in x's dtype (keep_dtype: as the GEMM wrote it)."""
    layer.last_path = path
    if bias is not None:
        y = y + bias.to(y.dtype)
    layer._require_finite(dict(input=x, weight=weight, bias=bias), {"forward output": y})
    return y if keep_dtype else y.to(x.dtype)


def finish_backward(ctx, layer, dy, dx, dw, dtypes, step):
    """The tail every CUDA autograd backward shares: dX, dW and dB in the input's, weight's and bias's
    dtypes, checked finite (naming the step)."""
    x_dtype, w_dtype, b_dtype = dtypes
    dx = None if dx is None else dx.to(x_dtype)
    dw = None if dw is None else dw.to(w_dtype)
    results = {k: v for k, v in (("input gradient", dx), ("weight gradient", dw)) if v is not None}
    layer._require_finite({"incoming gradient": dy}, results, step)
    db = dy.sum(0).to(b_dtype) if ctx.needs_input_grad[2] else None
    return dx, dw, db


def require_whole_token_blocks(layer, tokens, block):
    """The weight gradient's inner dimension is the tokens: a layer that needs it must see whole 1 x block
    groups of them."""
    if tokens % block:
        raise ValueError(f"layer '{layer.layer_name or 'Linear'}': {tokens} tokens is not a multiple of {block}, the "
                         f"block size of the wgrad GEMM's inner dimension (the weight gradient needs X^T in 1x{block} "
                         "blocks); pad the batch, or run without the weight's gradient")


_NO_FP32_OUTPUT = set()  # scale modes for which cuBLASLt found no FP32-output algorithm (per process)


def gemm_into(ext, args, out, kw, key):
    """ext.gemm_cuda(*args, out, **kw); returns "path [description]". An FP32 `out` for which cuBLASLt has
    no FP32-output algorithm (remembered per process under `key`, the scale modes) gets a BF16 output
    copied into it, and the label says so."""
    if out.dtype == torch.float32 and key not in _NO_FP32_OUTPUT:
        try:
            path, desc = ext.gemm_cuda(*args, out, **kw)
            return f"{path} [{desc}]"
        except RuntimeError as e:
            if "has no" not in str(e):
                raise
            _NO_FP32_OUTPUT.add(key)  # no FP32-output algorithm for these scale modes: BF16 from now on
    if out.dtype == torch.float32:
        tmp = torch.empty(out.shape, dtype=torch.bfloat16, device=out.device)
        path, desc = ext.gemm_cuda(*args, tmp, **kw)
        out.copy_(tmp)
        return f"{path} [{desc}; cuBLASLt has no FP32 output here: BF16 output]"
    path, desc = ext.gemm_cuda(*args, out, **kw)
    return f"{path} [{desc}]"
