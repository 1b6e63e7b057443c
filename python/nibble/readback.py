"""Device-side flags that the host reads without stalling the GPU.

A training step should never wait for the GPU. What a layer must know on the host but need not know at
once (whether a pass met NaN/inf, whether a GEMM operand was not exactly re-encodable) lives in a small
int64 tensor on the layer's device, written by device ops. `publish()` copies it to pinned host memory
behind the work already queued and records an event; `poll()` hands the copy back once that event has
completed (event.query(): no host sync), typically at the layer's next pass, one step late. `read()` is
the synchronous read (one host sync) for an explicit check such as nibble.torch.check_finite(model).

The flags accumulate on the device (bit-or, sums, first step), so a copy that is skipped while the
previous one is still in flight loses nothing: the next copy carries it. Under CUDA graph capture no
copy is started (an event recorded inside a capture cannot be queried outside it); the flags still
accumulate and read() sees them.
"""
import torch


def capturing():
    """Whether the current CUDA stream is being captured into a CUDA graph."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class DeviceFlags:
    """`n` int64 values on one device, initialised to `init` (a tuple of n ints)."""

    def __init__(self, init):
        self.init = tuple(init)
        self.values = None  # the device tensor, made on first use on the device of the layer's tensors
        self._host = self._event = None
        self._pending = False

    def on(self, device):
        """The device tensor (created on `device`, or moved there when the layer moved)."""
        if self.values is None or self.values.device != torch.device(device):
            self.values = torch.tensor(self.init, dtype=torch.int64, device=device)
            self._host, self._pending = None, False
        return self.values

    def publish(self):
        """Start copying the values to the host (no host sync); a copy still in flight is left to finish."""
        if self.values is None or self._pending or capturing():
            return
        if self.values.is_cuda:
            if self._host is None:
                self._host = torch.empty(self.values.shape, dtype=torch.int64, pin_memory=True)
            self._host.copy_(self.values, non_blocking=True)
            self._event = torch.cuda.Event()
            self._event.record()
        else:
            self._host, self._event = self.values.clone(), None
        self._pending = True

    def poll(self):
        """The values of the last finished copy as a list (no host sync), or None while it is in flight or
        when none was started."""
        if not self._pending or (self._event is not None and not self._event.query()):
            return None
        self._pending = False
        return self._host.tolist()

    def read(self):
        """The current values (one host sync on a GPU)."""
        return list(self.init) if self.values is None else self.values.tolist()

    def reset(self):
        if self.values is not None:
            self.values.copy_(torch.tensor(self.init, dtype=torch.int64))
        self._pending = False
