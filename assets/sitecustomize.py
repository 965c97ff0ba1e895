"""gpuscope's sitecustomize shim, used by `gpuscope run -- CMD`.

gpuscope puts the directory holding this file and gpuscope_probe.py first on
PYTHONPATH, so every Python process of the run (the trainer, torchrun ranks,
multiprocessing spawn children, which all inherit the environment) starts
the allocator probe before any user code. The probe stays silent until CUDA
is initialised in that very process.

A sitecustomize found further down sys.path (a distribution's, a
virtualenv's, the user's) would be shadowed by this one, so it is imported
afterwards, exactly once, as Python's site module would have done.
"""

import sys


def _gpuscope_start_probe():
    try:
        import gpuscope_probe

        gpuscope_probe.start()
    except Exception:
        # A broken probe must never stop the program from starting.
        pass


def _gpuscope_chain_import():
    import importlib
    import os

    this = sys.modules.get(__name__)
    try:
        here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    except Exception:
        return

    def is_here(entry):
        try:
            return os.path.realpath(os.path.abspath(entry or os.curdir)) == here
        except Exception:
            return False

    removed = [(i, entry) for i, entry in enumerate(sys.path) if is_here(entry)]
    sys.path[:] = [entry for entry in sys.path if not is_here(entry)]
    sys.modules.pop(__name__, None)
    chained = None
    try:
        try:
            chained = importlib.import_module("sitecustomize")
        except ImportError as exc:
            if exc.name != "sitecustomize":
                raise
    except Exception as err:
        # Same report, same carrying on, as site.execsitecustomize.
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                "%s: %s\n" % (err.__class__.__name__, err)
            )
    finally:
        # Put the directory back where it was: a chained sitecustomize may
        # have edited sys.path, and its edits stay.
        for index, entry in removed:
            sys.path.insert(min(index, len(sys.path)), entry)
        if chained is None or sys.modules.get("sitecustomize") is None:
            sys.modules["sitecustomize"] = this


_gpuscope_start_probe()
_gpuscope_chain_import()
