"""CPU time and peak resident memory of GPU dashboards left alone on a real
GPU: gpuscope, and nvtop and nvitop where given, each in a 200x50
pseudo-terminal refreshing once a second, in turns, ROUNDS times, on the
same machine and GPU. A measurement, not a check: not part of CI.

Usage: python3 tests/gpu/dashboard_cpu.py GPUSCOPE [--nvtop CMD] [--nvitop CMD]
       [--seconds 30] [--rounds 2]
CMD is a command line, split on spaces (e.g. "python3 -m nvitop").
"""

import argparse
import fcntl
import os
import pty
import select
import signal
import struct
import termios
import time

TICK = os.sysconf("SC_CLK_TCK")


def run(argv, seconds):
    pid, fd = pty.fork()
    if pid == 0:
        # The size is set before the program starts, so its first frame
        # already has it.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        os.environ["TERM"] = "xterm-256color"
        os.execvp(argv[0], argv)
    written = 0
    end = time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                written += len(os.read(fd, 1 << 16))
            except OSError:
                break
    cpu, peak = usage(pid)
    os.kill(pid, signal.SIGTERM)
    try:
        while os.read(fd, 1 << 16):
            pass
    except OSError:
        pass
    os.waitpid(pid, 0)
    return cpu, peak, written


def usage(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK
    peak = None
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    return cpu, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpuscope")
    ap.add_argument("--nvtop")
    ap.add_argument("--nvitop")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    tools = [("gpuscope", [args.gpuscope, "--interval", "1s"])]
    if args.nvtop:
        tools.append(("nvtop", args.nvtop.split() + ["-d", "10"]))
    if args.nvitop:
        tools.append(("nvitop", args.nvitop.split() + ["--interval", "1"]))
    for r in range(args.rounds):
        for name, argv in tools:
            cpu, peak, written = run(argv, args.seconds)
            print("round %d %-9s CPU %.2f s over %.0f s, peak RSS %s KiB, %d bytes to the terminal"
                  % (r + 1, name, cpu, args.seconds, peak, written), flush=True)


if __name__ == "__main__":
    main()
