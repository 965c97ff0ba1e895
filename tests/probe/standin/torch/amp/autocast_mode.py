"""Stand-in torch.amp.autocast_mode.autocast (torch/amp/autocast_mode.py):
the attributes the probe reads (device, fast_dtype, _enabled) and a
per-thread state, as PyTorch keeps it (is_autocast_enabled() is per
thread)."""

import threading

from .. import _tensor

_state = threading.local()


def is_autocast_enabled():
    return getattr(_state, "depth", 0) > 0


class autocast(object):
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = device_type
        self.fast_dtype = dtype or (_tensor.float16 if device_type == "cuda" else _tensor.bfloat16)
        self._enabled = bool(enabled)

    def __enter__(self):
        if self._enabled:
            _state.depth = getattr(_state, "depth", 0) + 1
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self._enabled:
            _state.depth -= 1
        return False
