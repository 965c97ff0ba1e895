"""Log gpuscope's GPU and allocator figures to Weights & Biases with the
training step.

    run = wandb.init(project="exp")
    for step, batch in enumerate(loader):
        ...
        if step % 50 == 0:
            log_gpuscope(run, step)

W&B's own system metrics see NVML's memory only; these add the
allocator's allocated / cached split and fragmentation per GPU.
`--dry-run` prints what would be logged, from simulated GPUs, without wandb.
"""

import json
import os
import sys

import gpuscope

try:
    import wandb  # noqa: F401  (the caller's run comes from wandb.init)
except ImportError:
    wandb = None


def log_gpuscope(run, step, pid=None, demo=False):
    try:
        snap = gpuscope.snapshot(demo=demo)
    except gpuscope.Error as err:
        print("gpuscope: %s" % err, file=sys.stderr)
        return
    run.log({"gpuscope/" + k: v for k, v in snap.figures(pid=pid or os.getpid()).items()}, step=step)


def _dry_run():
    class Run:
        def log(self, values, step=None):
            print(json.dumps(values))

    pid = next(p.pid for p in gpuscope.snapshot(demo=True).processes if p.allocator)
    log_gpuscope(Run(), 0, pid=pid, demo=True)


if __name__ == "__main__" and "--dry-run" in sys.argv:
    _dry_run()
