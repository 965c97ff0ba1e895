"""Stand-in torch.cuda.amp.autocast: a subclass of torch.amp's whose
__enter__ calls the base class's, as PyTorch's does (torch/cuda/amp/
autocast_mode.py)."""

from ...amp import autocast_mode as _base


class autocast(_base.autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def __enter__(self):
        return super().__enter__()

    def __exit__(self, exc_type, exc_val, exc_tb):
        return super().__exit__(exc_type, exc_val, exc_tb)
