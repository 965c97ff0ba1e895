"""Log gpuscope's GPU and allocator figures from a Hugging Face Trainer.

    trainer = Trainer(..., callbacks=[GpuscopeCallback(every_n_steps=50)])

The figures go into the Trainer's own logs (`on_log`), so they reach every
integration it reports to (TensorBoard, W&B, MLflow). `--dry-run` shows
what would be logged, from simulated GPUs, without transformers installed.
"""

import json
import os
import sys

import gpuscope

try:
    from transformers import TrainerCallback
except ImportError:
    TrainerCallback = object  # --dry-run without transformers


class GpuscopeCallback(TrainerCallback):
    def __init__(self, every_n_steps=50, demo=False, pid=None):
        self.every_n_steps = every_n_steps
        self.demo = demo
        self.pid = pid

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None or state.global_step % self.every_n_steps != 0:
            return
        try:
            snap = gpuscope.snapshot(demo=self.demo)
        except gpuscope.Error as err:
            print("gpuscope: %s" % err, file=sys.stderr)
            return
        # Only the main process logs; each rank's own figures are in
        # snap.figures(pid=...) of its PID.
        if getattr(state, "is_world_process_zero", True):
            logs.update({"gpuscope/" + k: v for k, v in snap.figures(pid=self.pid or os.getpid()).items()})


def _dry_run():
    class State:
        global_step = 0
        is_world_process_zero = True

    pid = next(p.pid for p in gpuscope.snapshot(demo=True).processes if p.allocator)
    logs = {"loss": 1.0}
    GpuscopeCallback(every_n_steps=1, demo=True, pid=pid).on_log(None, State(), None, logs=logs)
    print(json.dumps(logs))


if __name__ == "__main__" and "--dry-run" in sys.argv:
    _dry_run()
