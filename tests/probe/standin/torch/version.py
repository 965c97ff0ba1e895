"""Stand-in torch.version: the CUDA (or HIP) version the wheel was built
with, from the script ("cuda_version", "hip_version")."""

from . import _standin


def __getattr__(name):
    if name == "cuda":
        return _standin.script().get("cuda_version", "12.1")
    if name == "hip":
        return _standin.script().get("hip_version")
    raise AttributeError("module 'torch.version' has no attribute %r" % name)
