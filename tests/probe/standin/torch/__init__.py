"""A stand-in for torch, for gpuscope's allocator-probe tests (no GPU, no torch).

Only what the probe may touch is modelled, driven by the JSON script named by
STANDIN_TORCH_SCRIPT (see torch/_standin.py for its format). Every call the
probe must never make raises AssertionError and appends a line to the file
named by STANDIN_TORCH_VIOLATIONS, so a test sees it even when it happened on
the probe's own thread.

Put the directory above this package first on sys.path / PYTHONPATH.
"""

import os as _os

from . import _standin
from . import _C
from . import cuda
from .cuda import memory as _cuda_memory  # noqa: F401  (torch.cuda.memory, as real torch loads it)

# What real torch also loads with itself (torch/__init__.py): the version
# module, multiprocessing, amp (torch.cuda's own amp too) and
# torch.utils.data, so the probe finds them without importing anything.
from . import version  # noqa: F401
from . import multiprocessing  # noqa: F401
from . import amp  # noqa: F401
from .cuda import amp as _cuda_amp  # noqa: F401
from . import utils  # noqa: F401
from .utils import data as _utils_data  # noqa: F401
from ._tensor import Tensor, bfloat16, dtype, float16, float32  # noqa: F401
from .amp import autocast  # noqa: F401



def __getattr__(name):
    # torch.__version__ follows the script, so one test process can model
    # several releases in turn.
    if name == "__version__":
        current = _standin.raw_script()
        generation = _standin.GENERATIONS.get(str(current.get("generation")))
        default = generation["version"] if generation else "2.5.1"
        return str(current.get("version", default))
    raise AttributeError("module 'torch' has no attribute %r" % name)


def _after_fork_in_child():
    # Real torch marks a child forked after CUDA initialisation as a "bad
    # fork": is_initialized() is False there and CUDA calls fail.
    try:
        current = _standin.script()
        if _standin.initialized(current) and current.get("model_bad_fork", True):
            _standin.state["bad_fork"] = True
    except Exception:
        pass


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_in_child)
