"""Log gpuscope's GPU and allocator figures from a PyTorch Lightning run.

    trainer = L.Trainer(callbacks=[GpuscopeCallback(every_n_steps=50)])

Each snapshot runs `gpuscope --json` (about 40 ms on an H100 node,
BENCHMARKS.md): every 50 steps is cheap. `--dry-run` shows what would be
logged, from simulated GPUs, without Lightning installed.
"""

import json
import os
import sys

import gpuscope

try:
    from lightning.pytorch import Callback
except ImportError:
    try:
        from pytorch_lightning import Callback
    except ImportError:
        Callback = object  # --dry-run without Lightning


class GpuscopeCallback(Callback):
    def __init__(self, every_n_steps=50, demo=False, pid=None):
        super().__init__()
        self.every_n_steps = every_n_steps
        self.demo = demo
        self.pid = pid

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step % self.every_n_steps != 0:
            return
        try:
            snap = gpuscope.snapshot(demo=self.demo)
        except gpuscope.Error as err:
            print("gpuscope: %s" % err, file=sys.stderr)
            return
        # This process's allocator figures (its probe: `gpuscope run`, or
        # `import gpuscope_probe; gpuscope_probe.start()`), and each GPU's.
        figures = snap.figures(pid=self.pid or os.getpid())
        pl_module.log_dict({"gpuscope/" + k: float(v) for k, v in figures.items()}, on_step=True)


def _dry_run():
    class Module:
        def log_dict(self, values, **_):
            print(json.dumps(values))

    class Trainer:
        global_step = 0

    # The demo's first probed trainer stands in for this process.
    pid = next(p.pid for p in gpuscope.snapshot(demo=True).processes if p.allocator)
    GpuscopeCallback(every_n_steps=1, demo=True, pid=pid).on_train_batch_end(Trainer(), Module(), None, None, 0)


if __name__ == "__main__" and "--dry-run" in sys.argv:
    _dry_run()
