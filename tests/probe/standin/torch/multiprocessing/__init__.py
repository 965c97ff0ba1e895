"""Stand-in torch.multiprocessing: the sharing strategy
(torch/multiprocessing/__init__.py keeps it in a module global;
"file_descriptor" is Linux's default)."""

_sharing_strategy = "file_descriptor"


def get_sharing_strategy():
    return _sharing_strategy


def set_sharing_strategy(new_strategy):
    global _sharing_strategy
    if new_strategy not in ("file_descriptor", "file_system"):
        raise ValueError("unknown strategy %r" % new_strategy)
    _sharing_strategy = new_strategy
