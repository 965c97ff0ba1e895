"""Key-to-screen latency in a tmux pane, for benches/ssh_latency.sh.

Talks to the tmux server as one control-mode client (`tmux -C`), so that a
send-keys and each look at the screen (capture-pane) cost a line on a pipe
rather than a new tmux process. A trial sends a key, then captures the pane
about every 5 ms until the expected change is on screen; its latency is the
time from just before the send-keys to the capture that shows it.

  echo:      the pane runs a remote `cat` in raw mode behind ssh: the time
             for a typed letter to come back (what a key's echo costs).
  dashboard: the pane runs gpuscope behind ssh: `?` (until the help box's
             text shows), Esc (until it is gone) and `s` (until the process
             table's title names another sort column).

Prints one line per kind: median, max, n (and with --echo-ms, the median
and max minus that echo median, against the frame of --frame-ms).
Run: python3 benches/pane_latency.py SOCKET TARGET echo|dashboard
       [--trials 20] [--echo-ms MS] [--frame-ms 100] [--json FILE]
"""

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import time

POLL = 0.005
HELP_TEXT = "select the next / previous process"  # a line of the help box only
SORT_TITLE = re.compile(r" Processes \d+ \S* sort (.+?) \S ")


class Control:
    """One tmux control-mode client; `run` sends a command and returns its
    output lines."""

    def __init__(self, socket_path, session):
        self.p = subprocess.Popen(
            ["tmux", "-S", socket_path, "-C", "attach-session", "-t", session],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.read_block("attach-session")  # the reply to the command line's command
        # No %output notifications: the pane's bytes are not needed here.
        self.run("refresh-client -f no-output")

    def run(self, command):
        self.p.stdin.write(command.encode() + b"\n")
        self.p.stdin.flush()
        return self.read_block(command)

    def read_block(self, command):
        out, inside = [], False
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("pane_latency.py: tmux control client ended")
            line = line.rstrip(b"\n")
            if not inside:
                inside = line.startswith(b"%begin ")
                continue
            if line.startswith(b"%end ") or line.startswith(b"%error "):
                if line.startswith(b"%error "):
                    raise SystemExit(f"pane_latency.py: tmux: {command}: {out}")
                return out
            out.append(line.decode("utf-8", "replace"))

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait(timeout=5)


def trial(ctl, pane, key, done, timeout=5.0):
    """Seconds from sending KEY until done(screen lines) holds."""
    t0 = time.monotonic()
    ctl.run(f"send-keys -t {pane} {key}")
    deadline, tick = t0 + timeout, t0
    while True:
        screen = ctl.run(f"capture-pane -p -t {pane}")
        now = time.monotonic()
        if done(screen):
            return now - t0
        if now > deadline:
            raise SystemExit(f"pane_latency.py: {key!r} showed no change in {timeout} s")
        tick += POLL
        time.sleep(max(0.0, tick - time.monotonic()))


def wait_for(ctl, pane, done, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done(ctl.run(f"capture-pane -p -t {pane}")):
            return
        time.sleep(0.05)
    raise SystemExit("pane_latency.py: the pane never got ready")


def has_help(screen):
    return any(HELP_TEXT in line for line in screen)


def sort_column(screen):
    for line in screen:
        m = SORT_TITLE.search(line)
        if m:
            return m.group(1)
    return None


def summary(name, xs, echo_ms, frame_ms):
    ms = [x * 1000 for x in xs]
    med, top = statistics.median(ms), max(ms)
    s = f"{name:<14} median {med:6.1f} ms  max {top:6.1f} ms  (n={len(ms)})"
    if echo_ms is not None:
        late = sum(x - echo_ms > 10 for x in ms)
        s += f"  minus echo: median {med - echo_ms:+6.1f} ms  max {top - echo_ms:+6.1f} ms  (frame {frame_ms:.0f} ms;"
        s += f" {late} over +10 ms)"
    print(s, flush=True)
    return {"median_ms": med, "max_ms": top, "n": len(ms), "all_ms": ms}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("socket", help="the tmux server's socket path (tmux -S)")
    p.add_argument("target", help="the tmux session")
    p.add_argument("mode", choices=["echo", "dashboard"])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--echo-ms", type=float)
    p.add_argument("--frame-ms", type=float, default=100.0)
    p.add_argument("--json")
    a = p.parse_args()
    ctl = Control(a.socket, a.target)
    pane = ctl.run(f"display-message -p -t {a.target} '#{{pane_id}}'")[0]
    size = lambda: ctl.run(f"display-message -p -t {pane} '#{{pane_width}}x#{{pane_height}}'")[0]
    if size() != "200x50":
        raise SystemExit(f"pane_latency.py: the pane is {size()}, not 200x50")
    results = {}
    # Keys at random moments, so that they fall anywhere in the dashboard's
    # one-second data cycle (and its frame period).
    rest = lambda: time.sleep(random.uniform(0.2, 0.7))
    if a.mode == "echo":
        wait_for(ctl, pane, lambda s: any("READY" in line for line in s), 30)
        xs = []
        for i in range(a.trials):
            letter = "abcdefghijklmnopqrstuvwxyz"[i % 26]
            before = "\n".join(ctl.run(f"capture-pane -p -t {pane}"))
            xs.append(trial(ctl, pane, letter, lambda s, b=before: "\n".join(s) != b))
            rest()
        results["echo"] = summary("echo", xs, None, a.frame_ms)
    else:
        wait_for(ctl, pane, lambda s: sort_column(s) is not None, 60)
        time.sleep(3)  # the first snapshots, the charts' first points
        opened, closed, sorted_ = [], [], []
        for _ in range(a.trials):
            opened.append(trial(ctl, pane, "?", has_help))
            rest()
            closed.append(trial(ctl, pane, "Escape", lambda s: not has_help(s)))
            rest()
            before = sort_column(ctl.run(f"capture-pane -p -t {pane}"))
            sorted_.append(trial(ctl, pane, "s", lambda s, b=before: sort_column(s) not in (None, b)))
            rest()
        results["help_open"] = summary("? (help)", opened, a.echo_ms, a.frame_ms)
        results["help_close"] = summary("Esc (close)", closed, a.echo_ms, a.frame_ms)
        results["sort"] = summary("s (sort)", sorted_, a.echo_ms, a.frame_ms)
        results["all_keys"] = summary("all keys", opened + closed + sorted_, a.echo_ms, a.frame_ms)
    if size() != "200x50":
        raise SystemExit(f"pane_latency.py: the pane became {size()}, not 200x50")
    ctl.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    sys.exit(main())
