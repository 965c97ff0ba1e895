"""gpuscope's nvidia-smi query mode against the real nvidia-smi. Not part of CI.

For every field `gpuscope --help-query-gpu` lists, asks both tools for it
alone (csv,noheader and csv,noheader,nounits) and prints the two answers
side by side. Fields that move on their own (time, power, temperature,
clocks, utilisation) are compared by shape only: the same unit, or both
"[N/A]"-like; the rest must be equal. Then the same for
--query-compute-apps while a CUDA process runs (started here with PyTorch).

Usage: python3 tests/gpu/smi_compare.py [path/to/gpuscope]
"""

import re
import subprocess
import sys
import time

MOVING = re.compile(r"timestamp|power\.draw|power\.instant|temperature|clocks\.(current|sm|gr|mem|video)$|"
                    r"utilization|fan|pstate|clocks_event_reasons|clocks_throttle_reasons|energy|pcie\.link|"
                    r"used_memory|memory\.(used|free)")


def fields(gpuscope, flag):
    text = subprocess.run([gpuscope, flag], capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r'^"([^"]+)"', text, re.M)]


def ask(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return (p.stdout.strip() or p.stderr.strip()).replace("\n", " | "), p.returncode


def shape(text):
    return re.sub(r"[0-9]+(\.[0-9]+)?", "9", text)


def compare(gpuscope, flag, names):
    bad = 0
    for name in names:
        for fmt in ("csv,noheader", "csv,noheader,nounits"):
            ours, our_rc = ask([gpuscope, "%s=%s" % (flag, name), "--format=" + fmt])
            theirs, their_rc = ask(["nvidia-smi", "%s=%s" % (flag, name), "--format=" + fmt])
            if their_rc != 0:
                verdict = "nvidia-smi refuses"
            elif MOVING.search(name):
                verdict = "same shape" if shape(ours) == shape(theirs) else "SHAPE DIFFERS"
            else:
                verdict = "equal" if ours == theirs else "DIFFERS"
            bad += verdict in ("SHAPE DIFFERS", "DIFFERS") or (our_rc != 0 and their_rc == 0)
            print("%-34s %-22s | %-40s | %-40s %s" % (name, fmt, ours[:40], theirs[:40], verdict))
    return bad


def main():
    gpuscope = sys.argv[1] if len(sys.argv) > 1 else "target/release/gpuscope"
    print("== nvidia-smi -L\n" + ask(["nvidia-smi", "-L"])[0])
    print("\n== --query-gpu, field by field (gpuscope | nvidia-smi)")
    bad = compare(gpuscope, "--query-gpu", fields(gpuscope, "--help-query-gpu"))
    job = subprocess.Popen([sys.executable, "-c",
                            "import torch,time; x=torch.empty(1<<30,dtype=torch.uint8,device='cuda'); "
                            "torch.cuda.synchronize(); print('ready', flush=True); time.sleep(60)"],
                           stdout=subprocess.PIPE, text=True)
    try:
        job.stdout.readline()
        time.sleep(0.5)
        print("\n== --query-compute-apps with a PyTorch process holding 1 GiB (pid %d)" % job.pid)
        bad += compare(gpuscope, "--query-compute-apps", fields(gpuscope, "--help-query-compute-apps"))
        for cmd in ([gpuscope, "--query-compute-apps=pid,process_name,used_memory", "--format=csv"],
                    ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"]):
            print("\n$ %s\n%s" % (" ".join(cmd), subprocess.run(cmd, capture_output=True, text=True).stdout))
    finally:
        job.kill()
        job.wait()
    print("%d field answer(s) differ" % bad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
