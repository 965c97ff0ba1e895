"""Stand-in torch.cuda.amp.grad_scaler.GradScaler: before 2.3 a class of its
own; from 2.3 a deprecated subclass of torch.amp's that calls its __init__
(torch/cuda/amp/grad_scaler.py)."""

from ... import _standin
from ...amp import grad_scaler as _amp


class _OwnGradScaler(object):
    def __init__(self, init_scale=65536.0, enabled=True):
        self._enabled = bool(enabled)
        self._init_scale = init_scale


class _SubclassGradScaler(_amp._GradScaler):
    def __init__(self, init_scale=65536.0, enabled=True):
        super().__init__("cuda", init_scale=init_scale, enabled=enabled)


for _cls in (_OwnGradScaler, _SubclassGradScaler):
    _cls.__name__ = _cls.__qualname__ = "GradScaler"
del _cls

# The subclass where torch.amp has the class, else the old one.
_standin.GATED_CLASSES[__name__] = {"GradScaler": [("amp_grad_scaler", _SubclassGradScaler),
                                                   (None, _OwnGradScaler)]}


def __getattr__(name):
    return _standin.gated_class(__name__, name)
