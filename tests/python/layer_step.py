"""One forward and backward pass of a layer, as the layer tests compare them."""


def forward_backward(layer, x, gy):
    """Runs `layer` on a fresh leaf copy of x and back-propagates gy, with the parameter gradients cleared
    first (so nothing accumulates across calls). Returns (y, dX, dW, dbias), dbias None without a bias;
    the gradients are copies, safe to keep across later calls."""
    x = x.clone().requires_grad_(True)
    bias = getattr(layer, "bias", None)
    layer.weight.grad = None
    if bias is not None:
        bias.grad = None
    y = layer(x)
    y.backward(gy)
    return y.detach(), x.grad, layer.weight.grad.clone(), None if bias is None else bias.grad.clone()
