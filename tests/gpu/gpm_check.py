"""The activity counters (GPM) on a real Hopper GPU. Not part of CI.

Two loads on GPU 0, each for a few seconds, read by `gpuscope --json
--activity` and by `nvidia-smi dmon --gpm-metrics` side by side:
  * one-block kernels (`torch.cuda._sleep`, one thread spinning): the
    utilisation NVML reports reads near 100 % while SM activity stays near
    1 / (number of SMs);
  * a bf16 GEMM loop: the HMMA tensor pipe is busy.
Then GPM read by a user other than root (setpriv), and each process's
share through both per-process calls (gpuscope's JSON uses the newer one
where the driver has it; pynvml's nvmlDeviceGetProcessUtilization is the
older).

Usage: python3 tests/gpu/gpm_check.py path/to/gpuscope
Exit status: 0 when every check holds, 1 otherwise.
"""

import json
import os
import shutil
import subprocess
import sys
import time

SPIN = (
    "import torch,time\n"
    "torch.cuda.init(); end=time.time()+{secs}\n"
    "while time.time()<end:\n"
    "    torch.cuda._sleep(50_000_000); torch.cuda.synchronize()\n"
)
GEMM = (
    "import torch,time\n"
    "a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); b=torch.randn_like(a)\n"
    "end=time.time()+{secs}\n"
    "while time.time()<end:\n"
    "    [a@b for _ in range(20)]; torch.cuda.synchronize()\n"
)

failures = []


def check(what, ok, detail):
    print("%-60s %s  %s" % (what, "ok" if ok else "FAILED", detail))
    if not ok:
        failures.append(what)


def gpuscope_gpu0(g, *prefix):
    out = subprocess.run([*prefix, g, "--json", "--activity"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        print(out.stderr)
        return None
    return json.loads(out.stdout)["gpus"][0]


def dmon():
    """nvidia-smi's own reading of the same counters (SM 2, tensor 5, HMMA 7, DRAM 10)."""
    if not shutil.which("nvidia-smi"):
        return "no nvidia-smi"
    out = subprocess.run(
        ["nvidia-smi", "dmon", "-i", "0", "--gpm-metrics", "2,5,7,10", "-c", "3"],
        capture_output=True, text=True, timeout=30,
    )
    return (out.stdout + out.stderr).strip()


def under_load(g, script, name):
    job = subprocess.Popen([sys.executable, "-c", script.format(secs=20)])
    try:
        time.sleep(6)
        gpu = gpuscope_gpu0(g)
        print("\n== %s ==\n%s" % (name, dmon()))
        return gpu
    finally:
        job.kill()
        job.wait()


def main():
    g = sys.argv[1]
    spin = under_load(g, SPIN, "one-block kernels")
    if spin is None or spin["activity"] is None:
        check("one-block kernels: activity read", False, spin and spin["activity_unavailable"])
    else:
        a = spin["activity"]
        print(json.dumps({"utilization": spin["utilization"], "activity": a}, indent=1))
        check("one-block kernels: utilisation >= 90 %", (spin["utilization"]["gpu"] or 0) >= 90, spin["utilization"])
        check("one-block kernels: SM activity < 5 %", a["sm_active"] is not None and a["sm_active"] < 5, a["sm_active"])

    gemm = under_load(g, GEMM, "bf16 GEMM")
    if gemm is None or gemm["activity"] is None:
        check("bf16 GEMM: activity read", False, gemm and gemm["activity_unavailable"])
    else:
        a = gemm["activity"]
        print(json.dumps({"utilization": gemm["utilization"], "activity": a}, indent=1))
        check("bf16 GEMM: SM activity > 50 %", (a["sm_active"] or 0) > 50, a["sm_active"])
        check("bf16 GEMM: HMMA > 20 %", (a["tensor_hmma"] or 0) > 20, a["tensor_hmma"])
        shares = gemm["process_utilization"]
        print("per-process (gpuscope, newer call where the driver has it):", shares)
        try:
            import pynvml as n

            n.nvmlInit()
            h = n.nvmlDeviceGetHandleByIndex(0)
            print("per-process (nvmlDeviceGetProcessUtilization):",
                  [(s.pid, s.smUtil, s.memUtil) for s in n.nvmlDeviceGetProcessUtilization(h, 0)])
            n.nvmlShutdown()
        except Exception as exc:  # noqa: BLE001 - a report, not a check
            print("pynvml per-process call:", exc)

    if os.geteuid() == 0 and shutil.which("setpriv"):
        user = gpuscope_gpu0(g, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
        print("\nas uid 65534:", user and {"activity": user["activity"], "why": user["activity_unavailable"]})
        check("GPM as a user other than root answers or says why", user is not None and
              (user["activity"] is not None or user["activity_unavailable"] is not None), "")
    print("\n%s" % ("checks passed" if not failures else "FAILED: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
