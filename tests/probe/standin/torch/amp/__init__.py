"""Stand-in torch.amp: autocast and GradScaler."""

from . import autocast_mode, grad_scaler  # noqa: F401
from .autocast_mode import autocast  # noqa: F401
