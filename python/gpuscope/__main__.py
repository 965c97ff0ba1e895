"""`python -m gpuscope ARGS`: run the gpuscope program with ARGS."""

import os
import sys

from gpuscope import find_gpuscope_bin


def _main():
    path = find_gpuscope_bin()
    if sys.platform == "win32":
        import subprocess

        sys.exit(subprocess.call([path, *sys.argv[1:]]))
    # Replace this interpreter so signals, the terminal and the exit status
    # are gpuscope's own.
    os.execv(path, [path, *sys.argv[1:]])


if __name__ == "__main__":
    _main()
