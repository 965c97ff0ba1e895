"""Write gpuscope's GPU and allocator figures to TensorBoard, from a
thread beside the training loop (one snapshot every `interval` seconds).

    stop = log_to_tensorboard(SummaryWriter("runs/exp1"), interval=10)
    train()
    stop()

`--dry-run` prints what would be written, from simulated GPUs, without
TensorBoard or PyTorch installed.
"""

import json
import os
import sys
import threading

import gpuscope


def log_to_tensorboard(writer, interval=10.0, pid=None, demo=False, count=None):
    """Starts the logging thread; returns a function that stops it."""
    pid = pid or os.getpid()
    stream = gpuscope.watch(interval=interval, demo=demo, count=count)
    stopped = threading.Event()

    def run():
        try:
            for step, snap in enumerate(stream):
                for name, value in snap.figures(pid=pid).items():
                    writer.add_scalar("gpuscope/" + name, value, global_step=step,
                                      walltime=snap.time_unix_ms / 1000.0)
                writer.flush()
                if stopped.is_set():
                    break
        except gpuscope.Error as err:
            print("gpuscope: %s" % err, file=sys.stderr)
        finally:
            # Ends gpuscope (the generator's cleanup), in the thread that reads it.
            stream.close()

    thread = threading.Thread(target=run, name="gpuscope-tensorboard", daemon=True)
    thread.start()

    def stop():
        stopped.set()
        thread.join(timeout=float(interval) + 5)

    return stop


def _dry_run():
    class Writer:
        def __init__(self):
            self.row = {}

        def add_scalar(self, tag, value, global_step=None, walltime=None):
            self.row[tag] = value

        def flush(self):
            print(json.dumps(self.row))
            self.row = {}

    pid = next(p.pid for p in gpuscope.snapshot(demo=True).processes if p.allocator)
    log_to_tensorboard(Writer(), interval=0.1, pid=pid, demo=True, count=2)()


if __name__ == "__main__" and "--dry-run" in sys.argv:
    _dry_run()
