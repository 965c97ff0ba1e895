"""What NVML calls cost on a real driver. Not part of CI.

The simulated NVML's realistic-cost scenario (crates/nvml-sim) models an
ordinary call at about 20 us, a field-values call at about 0.3 ms and
nvmlDeviceGetPcieThroughput's documented 20 ms sampling. This times the
calls gpuscope makes, through NVIDIA's own Python binding (nvidia-ml-py), on
GPU 0, and says which of the field ids gpuscope asks for the driver answers.

Usage: python3 tests/gpu/nvml_costs.py [--repeat N]
"""

import argparse
import statistics
import time

import pynvml as n


def timed(fn, repeat):
    """Wall time of each call in microseconds, the CPU time all of them
    took together (is the driver working on this process's CPU, or
    waiting?), the last result and the last error."""
    samples = []
    result = error = None
    cpu0 = time.process_time()
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            result = fn()
        except n.NVMLError as exc:
            error = str(exc)
        samples.append((time.perf_counter() - start) * 1e6)
    timed.cpu_us = (time.process_time() - cpu0) * 1e6 / repeat
    return samples, result, error


def field_ids():
    names = [
        "NVML_FI_DEV_PCIE_COUNT_TX_BYTES",
        "NVML_FI_DEV_PCIE_COUNT_RX_BYTES",
        "NVML_FI_DEV_POWER_INSTANT",
        "NVML_FI_DEV_POWER_AVERAGE",
        "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "NVML_FI_DEV_MEMORY_TEMP",
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX",
        "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
        "NVML_FI_DEV_ECC_CURRENT",
        "NVML_FI_DEV_PCIE_REPLAY_COUNTER",
        "NVML_FI_DEV_RETIRED_PENDING",
        "NVML_FI_DEV_REMAPPED_COR",
        "NVML_FI_DEV_REMAPPED_UNC",
        "NVML_FI_DEV_REMAPPED_PENDING",
        "NVML_FI_DEV_REMAPPED_FAILURE",
    ]
    return [(name, getattr(n, name)) for name in names if hasattr(n, name)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    start = time.perf_counter()
    n.nvmlInit()
    print("nvmlInit: %.1f ms" % ((time.perf_counter() - start) * 1e3))
    print("driver %s, NVML %s" % (n.nvmlSystemGetDriverVersion(), n.nvmlSystemGetNVMLVersion()))
    h = n.nvmlDeviceGetHandleByIndex(0)
    ids = field_ids()
    calls = [
        ("GetMemoryInfo(v2)", lambda: n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)),
        ("GetUtilizationRates", lambda: n.nvmlDeviceGetUtilizationRates(h)),
        ("GetTemperature", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
        ("GetPowerUsage", lambda: n.nvmlDeviceGetPowerUsage(h)),
        ("GetEnforcedPowerLimit", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h)),
        ("GetClockInfo(SM)", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
        ("GetMaxClockInfo(SM)", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
        ("GetMaxClockInfo(MEM)", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)),
        ("GetMaxClockInfo(GRAPHICS)", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_GRAPHICS)),
        ("GetMaxClockInfo(VIDEO)", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_VIDEO)),
        ("GetVbiosVersion", lambda: n.nvmlDeviceGetVbiosVersion(h)),
        ("GetFanSpeed", lambda: n.nvmlDeviceGetFanSpeed(h)),
        ("GetPerformanceState", lambda: n.nvmlDeviceGetPerformanceState(h)),
        ("GetCurrentClocksEventReasons", lambda: n.nvmlDeviceGetCurrentClocksThrottleReasons(h)),
        ("GetComputeRunningProcesses", lambda: n.nvmlDeviceGetComputeRunningProcesses(h)),
        ("GetGraphicsRunningProcesses", lambda: n.nvmlDeviceGetGraphicsRunningProcesses(h)),
        ("GetProcessUtilization", lambda: n.nvmlDeviceGetProcessUtilization(h, 0)),
        ("GetMigMode", lambda: n.nvmlDeviceGetMigMode(h)),
        ("GetEccMode", lambda: n.nvmlDeviceGetEccMode(h)),
        ("GetRemappedRows", lambda: n.nvmlDeviceGetRemappedRows(h)),
        ("GetNvLinkState(0)", lambda: n.nvmlDeviceGetNvLinkState(h, 0)),
        ("GetCurrPcieLinkGeneration", lambda: n.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        ("GetCurrPcieLinkWidth", lambda: n.nvmlDeviceGetCurrPcieLinkWidth(h)),
        ("GetMaxPcieLinkGeneration", lambda: n.nvmlDeviceGetMaxPcieLinkGeneration(h)),
        ("GetPcieReplayCounter", lambda: n.nvmlDeviceGetPcieReplayCounter(h)),
        ("GetUUID", lambda: n.nvmlDeviceGetUUID(h)),
        ("GetPciInfo", lambda: n.nvmlDeviceGetPciInfo(h)),
        ("GetFieldValues(PCIe TX+RX)", lambda: n.nvmlDeviceGetFieldValues(h, [ids[0][1], ids[1][1]])),
        ("GetFieldValues(all %d)" % len(ids), lambda: n.nvmlDeviceGetFieldValues(h, [i for _, i in ids])),
    ]
    print("\n%-32s %10s %10s %10s %10s  %s" % ("call", "median us", "p90 us", "max us", "CPU us", "result"))
    for name, fn in calls:
        samples, result, error = timed(fn, args.repeat)
        q = statistics.quantiles(samples, n=10)
        shown = error if error else repr(result)[:60]
        print("%-32s %10.1f %10.1f %10.1f %10.1f  %s" % (
            name, statistics.median(samples), q[8], max(samples), timed.cpu_us, shown))
    for name, fn in [("GetPcieThroughput(TX)", lambda: n.nvmlDeviceGetPcieThroughput(h, n.NVML_PCIE_UTIL_TX_BYTES))]:
        samples, result, error = timed(fn, 5)
        print("%-32s %10.1f %10s %10.1f %10.1f  %s" % (
            name, statistics.median(samples), "", max(samples), timed.cpu_us, error or result))
    gpm_costs(h, args.repeat)
    print("\nfield values, one by one:")
    for name, fid in ids:
        values = n.nvmlDeviceGetFieldValues(h, [fid])
        v = values[0]
        print("  %-40s id %4d  ret %3d  type %d  %s" % (name, fid, v.nvmlReturn, v.valueType, _value(v)))
    n.nvmlShutdown()


def gpm_costs(h, repeat):
    """What gpuscope's activity reading costs a tick: one sample and one
    comparison of 14 metrics per GPU (src/sources/nvml/gpm.rs)."""
    try:
        if not n.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
            print("\nGPM: not supported on this GPU")
            return
        ids = [2, 3, 5, 7, 9, 6, 10, 11, 12, 13, 20, 21, 61, 60]
        samples = [n.nvmlGpmSampleAlloc(), n.nvmlGpmSampleAlloc()]
        n.nvmlGpmSampleGet(h, samples[0])
        time.sleep(0.11)
        n.nvmlGpmSampleGet(h, samples[1])

        def metrics():
            get = n.c_nvmlGpmMetricsGet_t()
            get.version = n.NVML_GPM_METRICS_GET_VERSION
            get.numMetrics = len(ids)
            get.sample1, get.sample2 = samples
            for i, metric in enumerate(ids):
                get.metrics[i].metricId = metric
            return [round(m.value, 1) for m in n.nvmlGpmMetricsGet(get).metrics[: len(ids)]]

        for name, fn in [("GpmSampleGet", lambda: n.nvmlGpmSampleGet(h, samples[1])),
                         ("GpmMetricsGet(14 metrics)", metrics)]:
            got, result, error = timed(fn, repeat)
            print("%-32s %10.1f %10s %10.1f %10.1f  %s" % (
                name, statistics.median(got), "", max(got), timed.cpu_us, error or repr(result)[:60]))
        for s in samples:
            n.nvmlGpmSampleFree(s)
    except (n.NVMLError, AttributeError) as exc:
        print("\nGPM:", exc)


def _value(v):
    if v.nvmlReturn != 0:
        return "-"
    kind = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}.get(v.valueType, "ullVal")
    return getattr(v.value, kind, None)


if __name__ == "__main__":
    main()
