"""gpuscope, installed from its Python wheel.

The wheel carries the compiled `gpuscope` program as a script (pip puts it
in the environment's bin/), and the allocator probe as the module
`gpuscope_probe`. This package only finds the program, so that
`python -m gpuscope ...` works where bin/ is not on PATH.
"""

import os
import sys
import sysconfig

__all__ = ["find_gpuscope_bin"]


def _candidates():
    name = "gpuscope" + (sysconfig.get_config_var("EXE") or "")
    # The scheme pip installed into: the environment's own, a user install,
    # or a `pip install --target DIR` layout (DIR/bin beside the package).
    schemes = [sysconfig.get_default_scheme()] if hasattr(sysconfig, "get_default_scheme") else []
    schemes.append("posix_user" if os.name == "posix" else "nt_user")
    for scheme in schemes:
        try:
            yield os.path.join(sysconfig.get_path("scripts", scheme), name)
        except KeyError:
            continue
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    yield os.path.join(here, "bin", name)
    yield os.path.join(os.path.dirname(sys.executable), name)


def find_gpuscope_bin():
    """The path of the gpuscope program this wheel installed."""
    for path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("the gpuscope program is not where pip installs it; reinstall the wheel")
