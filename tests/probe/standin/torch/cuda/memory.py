"""Stand-in of torch.cuda.memory: the run-time settings call NeMo and vLLM
make (torch.cuda.memory._set_allocator_settings, from 2.1)."""

from .. import _C
from .. import _standin


def _set_allocator_settings_impl(env):
    # torch/cuda/memory.py: a thin wrapper over the C++ binding.
    return _C._cuda_cudaCachingAllocator_set_allocator_settings(env)


def __getattr__(name):
    if name == "_set_allocator_settings" and _standin.has(_standin.script(), "set_allocator_settings"):
        return _set_allocator_settings_impl
    raise AttributeError("module 'torch.cuda.memory' has no attribute %r" % name)
