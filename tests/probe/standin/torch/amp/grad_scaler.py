"""Stand-in torch.amp.grad_scaler: GradScaler from 2.3 (torch.amp.GradScaler
in the releases modelled from 2.5; absent before, where torch.cuda.amp has
its own)."""

from .. import _standin


class _GradScaler(object):
    def __init__(self, device="cuda", init_scale=65536.0, enabled=True):
        self._device = device
        self._enabled = bool(enabled)
        self._init_scale = init_scale


_GradScaler.__name__ = _GradScaler.__qualname__ = "GradScaler"
_standin.GATED_CLASSES[__name__] = {"GradScaler": [("amp_grad_scaler", _GradScaler)]}


def __getattr__(name):
    return _standin.gated_class(__name__, name)
