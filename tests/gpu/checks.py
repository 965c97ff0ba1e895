"""What the real-GPU checks share: their command line (the gpuscope binary,
--config, and the hidden --job that runs the framework side under
`gpuscope run`) and the tally over configurations."""

import argparse
import os
import subprocess
import sys
import tempfile


def arguments(configs, more=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("gpuscope", nargs="?", default="target/release/gpuscope")
    ap.add_argument("--config", default=",".join(configs))
    ap.add_argument("--job", help=argparse.SUPPRESS)
    if more is not None:
        more(ap)
    return ap.parse_args()


def main(configs, run_config, job, more=None):
    """A check's entry point: its framework side where --job names a work
    folder (`job(args)`), else every chosen configuration."""
    args = arguments(configs, more)
    if args.job:
        job(args)
        return 0
    return each_config(args, run_config)


def each_config(args, run_config):
    """Runs every chosen configuration; the exit status for all of them."""
    failures = 0
    for config in args.config.split(","):
        failures += run_config(args, config)
    print("FAILED: %d check(s)" % failures if failures else "all checks passed")
    return 1 if failures else 0


def start_job(args, script, configs, config, extra=()):
    """The script's framework side (--job WORKDIR) under `gpuscope run`, in
    the configuration's environment (every variable any configuration sets
    cleared first), the probe sampling every 0.2 s. Returns (the child,
    its work folder, the environment gpuscope is to see)."""
    workdir = tempfile.mkdtemp(prefix="gpuscope-gpu-check-")
    env = dict(os.environ, GPUSCOPE_PROBE_INTERVAL="0.2")
    for var in {v for c in configs.values() for v in c} | {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}:
        env.pop(var, None)
    env.update(configs[config])
    command = [args.gpuscope, "run", "--", sys.executable, os.path.abspath(script), "--job", workdir]
    child = subprocess.Popen(command + list(extra), env=env)
    return child, workdir, env
