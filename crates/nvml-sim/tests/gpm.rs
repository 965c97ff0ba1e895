//! GPM and the versioned per-process utilisation, driven the way a client
//! drives them: through nvml-wrapper 0.13, and through its `NvmlLib` (the
//! same loaded library) for what the wrapper cannot get wrong, such as a
//! struct version.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::thread::sleep;
use std::time::Duration;

use nvml_wrapper::Device;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{GpmSample, gpm_metrics_get};
use nvml_wrapper_sys::bindings::{
    NVML_GPM_METRICS_GET_VERSION, NVML_GPM_SUPPORT_VERSION, nvmlGpmMetricsGet_t, nvmlGpmSupport_t,
    nvmlProcessUtilizationInfo_v1_t, nvmlProcessesUtilizationInfo_t,
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH as MISMATCH,
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE as SHORT, nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID,
    nvmlReturn_enum_NVML_ERROR_NOT_FOUND as NOT_FOUND, nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED as UNSUPPORTED,
    nvmlReturn_enum_NVML_SUCCESS as OK,
};
use support::scenario_test;

/// More than nvml.h's 100 ms between two samples, with room to spare.
const APART: Duration = Duration::from_millis(250);

const H100_AND_A100: &str = r#"
[[gpu]]
name = "NVIDIA H100 80GB HBM3"
[gpu.gpm]
graphics_util = 100
sm_util = 7
pcie_tx_per_sec = 1500

[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
"#;

/// Two samples of the whole device, far enough apart to measure.
fn two_samples<'n>(d: &Device<'n>) -> (GpmSample<'n>, GpmSample<'n>) {
    let first = d.gpm_sample().unwrap();
    sleep(APART);
    (first, d.gpm_sample().unwrap())
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() < 1e-6 * want.abs().max(1.0)
}

#[test]
fn support_is_yes_on_hopper_and_no_before() {
    scenario_test("support_is_yes_on_hopper_and_no_before", Some(H100_AND_A100), |sim| {
        let nvml = sim.nvml().unwrap();
        let (h100, a100) = (nvml.device_by_index(0).unwrap(), nvml.device_by_index(1).unwrap());
        assert!(h100.gpm_support().unwrap());
        assert!(!a100.gpm_support().unwrap());
        assert!(matches!(a100.gpm_sample(), Err(NvmlError::NotSupported)));
        assert!(matches!(a100.gpm_mig_sample(1), Err(NvmlError::NotSupported)));
    });
}

#[test]
fn two_samples_give_each_metric_over_the_interval() {
    scenario_test("two_samples_give_each_metric_over_the_interval", Some(H100_AND_A100), |sim| {
        let nvml = sim.nvml().unwrap();
        let d = nvml.device_by_index(0).unwrap();
        let (first, second) = two_samples(&d);
        let ids = [GpmMetricId::GraphicsUtil, GpmMetricId::SmUtil, GpmMetricId::PcieTxPerSec, GpmMetricId::Fp64Util];
        let got = gpm_metrics_get(&nvml, &first, &second, &ids).unwrap();
        let value = |i: usize| got[i].as_ref().unwrap().value;
        // The alert's case: a kernel always running, few SMs busy.
        assert!(close(value(0), 100.0), "{got:?}");
        assert!(close(value(1), 7.0), "{got:?}");
        assert!(close(value(2), 1500.0), "{got:?}");
        assert_eq!(got[1].as_ref().unwrap().metric_id, GpmMetricId::SmUtil);
        // A metric the scenario leaves out: that one fails, not the call.
        assert!(matches!(got[3], Err(NvmlError::NotSupported)), "{got:?}");
        first.free().unwrap();
        second.free().unwrap();
    });
}

#[test]
fn sampling_turns_to_no_permission_at_the_scripted_time() {
    let scenario = "[[gpu]]\ngpm_no_permission_after_s = 0.5\n[gpu.gpm]\nsm_util = 40\n";
    scenario_test("sampling_turns_to_no_permission_at_the_scripted_time", Some(scenario), |sim| {
        let nvml = sim.nvml().unwrap();
        let d = nvml.device_by_index(0).unwrap();
        let before = d.gpm_sample().unwrap();
        sleep(Duration::from_millis(600));
        assert!(matches!(d.gpm_sample(), Err(NvmlError::NoPermission)));
        assert!(matches!(d.gpm_mig_sample(1), Err(NvmlError::NoPermission)));
        // The board still has GPM; it is the sampling that is refused.
        assert!(d.gpm_support().unwrap());
        drop(before);
    });
}

const MIG: &str = r#"
[[gpu]]
name = "NVIDIA H100 80GB HBM3"
mig_current = true
[gpu.gpm]
sm_util = 40

[[gpu.mig]]
profile = "3g.40gb"
memory_total_mib = 40192
gpu_instance_id = 1
[gpu.mig.gpm]
sm_util = 71
dram_bw_util = 12

[[gpu.mig]]
profile = "3g.40gb"
memory_total_mib = 40192
gpu_instance_id = 2
"#;

#[test]
fn mig_samples_measure_one_gpu_instance() {
    scenario_test("mig_samples_measure_one_gpu_instance", Some(MIG), |sim| {
        let nvml = sim.nvml().unwrap();
        let gpu = nvml.device_by_index(0).unwrap();
        let first = gpu.gpm_mig_sample(1).unwrap();
        let whole = gpu.gpm_sample().unwrap();
        sleep(APART);
        let second = gpu.gpm_mig_sample(1).unwrap();
        let ids = [GpmMetricId::SmUtil, GpmMetricId::DramBwUtil, GpmMetricId::GraphicsUtil];
        let got = gpm_metrics_get(&nvml, &first, &second, &ids).unwrap();
        assert!(close(got[0].as_ref().unwrap().value, 71.0), "{got:?}");
        assert!(close(got[1].as_ref().unwrap().value, 12.0), "{got:?}");
        assert!(matches!(got[2], Err(NvmlError::NotSupported)));
        // Samples of the GPU and of one of its instances do not pair.
        assert!(matches!(gpm_metrics_get(&nvml, &whole, &second, &ids), Err(NvmlError::InvalidArg)));
        // The MIG device handle samples its own GPU instance.
        let mig = gpu.mig_device_by_index(0).unwrap();
        assert!(mig.gpm_support().unwrap());
        let third = mig.gpm_sample().unwrap();
        let got = gpm_metrics_get(&nvml, &first, &third, &[GpmMetricId::SmUtil]).unwrap();
        assert!(close(got[0].as_ref().unwrap().value, 71.0), "{got:?}");
        // An instance without a gpm table reports nothing; one that does
        // not exist is refused.
        let other = gpu.gpm_mig_sample(2).unwrap();
        sleep(APART);
        let later = gpu.gpm_mig_sample(2).unwrap();
        let got = gpm_metrics_get(&nvml, &other, &later, &[GpmMetricId::SmUtil]).unwrap();
        assert!(matches!(got[0], Err(NvmlError::NotSupported)));
        assert!(matches!(gpu.gpm_mig_sample(5), Err(NvmlError::InvalidArg)));
        // The MIG variant takes the GPU's handle, not a MIG device's.
        assert!(matches!(mig.gpm_mig_sample(1), Err(NvmlError::NotSupported)));
    });
}

#[test]
fn struct_versions_and_metric_counts_are_checked() {
    scenario_test("struct_versions_and_metric_counts_are_checked", Some(H100_AND_A100), |sim| {
        let nvml = sim.nvml().unwrap();
        let d = nvml.device_by_index(0).unwrap();
        let (first, second) = two_samples(&d);
        let lib = nvml.lib();
        // SAFETY: every pointer passed is to a live local; the handles come
        // from this library.
        unsafe {
            let device = d.handle();
            let mut support = nvmlGpmSupport_t { version: NVML_GPM_SUPPORT_VERSION, isSupportedDevice: 7 };
            assert_eq!(lib.nvmlGpmQueryDeviceSupport(device, &mut support), OK);
            assert_eq!(support.isSupportedDevice, 1);
            // The struct-size form go-nvml once sent (go-nvml issue 168).
            support.version = (size_of::<nvmlGpmSupport_t>() as u32) | (1 << 24);
            assert_eq!(lib.nvmlGpmQueryDeviceSupport(device, &mut support), MISMATCH);

            let mut request: Box<nvmlGpmMetricsGet_t> = Box::new(std::mem::zeroed());
            request.version = NVML_GPM_METRICS_GET_VERSION;
            request.sample1 = first.handle();
            request.sample2 = second.handle();
            request.numMetrics = 3;
            request.metrics[0].metricId = 2; // SM_UTIL
            request.metrics[1].metricId = 8; // DMMA: not in this header
            request.metrics[2].metricId = 100; // C2C: not on this board
            assert_eq!(lib.nvmlGpmMetricsGet(&mut *request), OK);
            assert_eq!(request.metrics[0].nvmlReturn, OK);
            assert!(close(request.metrics[0].value, 7.0));
            assert_eq!(request.metrics[1].nvmlReturn, INVALID);
            assert_eq!(request.metrics[2].nvmlReturn, UNSUPPORTED);

            request.version = 2;
            assert_eq!(lib.nvmlGpmMetricsGet(&mut *request), MISMATCH);
            request.version = NVML_GPM_METRICS_GET_VERSION;
            request.numMetrics = 211;
            assert_eq!(lib.nvmlGpmMetricsGet(&mut *request), INVALID);
            request.numMetrics = 1;
            request.sample2 = std::ptr::null_mut();
            assert_eq!(lib.nvmlGpmMetricsGet(&mut *request), INVALID);
            // A freed sample is no sample.
            assert_eq!(lib.nvmlGpmSampleFree(second.into_handle()), OK);
            assert_eq!(lib.nvmlGpmSampleFree(request.sample1), OK);
            std::mem::forget(first);
            request.sample2 = request.sample1;
            assert_eq!(lib.nvmlGpmMetricsGet(&mut *request), INVALID);
            assert_eq!(lib.nvmlGpmSampleFree(request.sample1), INVALID);
        }
    });
}

#[test]
fn gpm_needs_a_driver_from_r520() {
    let scenario = "driver_version = \"515.105.01\"\n[[gpu]]\n[gpu.gpm]\n";
    scenario_test("gpm_needs_a_driver_from_r520", Some(scenario), |sim| {
        let nvml = sim.nvml().unwrap();
        let d = nvml.device_by_index(0).unwrap();
        assert!(matches!(d.gpm_support(), Err(NvmlError::FunctionNotFound)));
    });
}

const PROCESSES: &str = r#"
[[gpu]]
name = "NVIDIA B200"
process_utilization_reads_zero = true

[[gpu.process]]
pid = 1111
sm_util = 60
mem_util = 20
jpg_util = 5

[[gpu.process]]
pid = 2222
sm_util = 3
ofa_util = 9

[[gpu.process]]
pid = 3333
"#;

fn info(
    version: u32,
    count: u32,
    array: *mut nvmlProcessUtilizationInfo_v1_t,
    last_seen: u64,
) -> nvmlProcessesUtilizationInfo_t {
    nvmlProcessesUtilizationInfo_t {
        version,
        processSamplesCount: count,
        lastSeenTimeStamp: last_seen,
        procUtilArray: array,
    }
}

#[test]
fn per_process_info_lists_busy_processes_newer_than_last_seen() {
    scenario_test("per_process_info_lists_busy_processes_newer_than_last_seen", Some(PROCESSES), |sim| {
        let nvml = sim.nvml().unwrap();
        let d = nvml.device_by_index(0).unwrap();
        let lib = nvml.lib();
        let v1 = (size_of::<nvmlProcessesUtilizationInfo_t>() as u32) | (1 << 24);
        assert_eq!(v1, 0x0100_0018);
        // SAFETY: every pointer passed is to a live local, arrays as long
        // as the count says.
        unsafe {
            let device = d.handle();
            // Asking the size: the two processes with some utilisation.
            let mut ask = info(v1, 0, std::ptr::null_mut(), 0);
            assert_eq!(lib.nvmlDeviceGetProcessesUtilizationInfo(device, &mut ask), SHORT);
            assert_eq!(ask.processSamplesCount, 2);
            let mut one = [std::mem::zeroed::<nvmlProcessUtilizationInfo_v1_t>(); 1];
            let mut short = info(v1, 1, one.as_mut_ptr(), 0);
            assert_eq!(lib.nvmlDeviceGetProcessesUtilizationInfo(device, &mut short), SHORT);
            assert_eq!(short.processSamplesCount, 2);

            let mut array = [std::mem::zeroed::<nvmlProcessUtilizationInfo_v1_t>(); 4];
            let mut full = info(v1, 4, array.as_mut_ptr(), 0);
            assert_eq!(lib.nvmlDeviceGetProcessesUtilizationInfo(device, &mut full), OK);
            assert_eq!(full.processSamplesCount, 2);
            let (a, b) = (array[0], array[1]);
            assert_eq!((a.pid, a.smUtil, a.memUtil, a.jpgUtil, a.ofaUtil), (1111, 60, 20, 5, 0));
            assert_eq!((b.pid, b.smUtil, b.ofaUtil), (2222, 3, 9));
            assert!(a.timeStamp > 1_600_000_000_000_000, "microseconds since 1970");

            // Nothing newer than what was just read.
            let mut again = info(v1, 4, array.as_mut_ptr(), a.timeStamp);
            assert_eq!(lib.nvmlDeviceGetProcessesUtilizationInfo(device, &mut again), NOT_FOUND);
            assert_eq!(again.processSamplesCount, 0);

            let mut wrong = info(1, 4, array.as_mut_ptr(), 0);
            assert_eq!(lib.nvmlDeviceGetProcessesUtilizationInfo(device, &mut wrong), MISMATCH);
        }
        // The older call reads 0 for every process on this board.
        let old = d.process_utilization_stats(None).unwrap();
        assert_eq!(old.len(), 3);
        assert!(old.iter().all(|s| (s.sm_util, s.mem_util, s.enc_util, s.dec_util) == (0, 0, 0, 0)), "{old:?}");
    });
}

#[test]
fn neither_per_process_call_works_with_mig() {
    scenario_test("neither_per_process_call_works_with_mig", Some(MIG), |sim| {
        let nvml = sim.nvml().unwrap();
        let gpu = nvml.device_by_index(0).unwrap();
        let mig = gpu.mig_device_by_index(0).unwrap();
        let lib = nvml.lib();
        let v1 = (size_of::<nvmlProcessesUtilizationInfo_t>() as u32) | (1 << 24);
        for d in [&gpu, &mig] {
            assert!(matches!(d.process_utilization_stats(None), Err(NvmlError::NotSupported)));
            let mut ask = info(v1, 0, std::ptr::null_mut(), 0);
            // SAFETY: a live local; the handle comes from this library.
            assert_eq!(unsafe { lib.nvmlDeviceGetProcessesUtilizationInfo(d.handle(), &mut ask) }, UNSUPPORTED);
        }
    });
}
