//! The PCIe byte counters among the field values, the count of calls by
//! name, the call log, and the realistic-cost switch.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::ffi::{CString, c_uint};
use std::ptr;
use std::time::Duration;

use gpuscope_nvml_sim::*;
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlFieldValue_t, nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED as NOT_SUPPORTED,
    nvmlReturn_enum_NVML_SUCCESS as OK, nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT as UI,
};
use support::scenario_test;

const PCIE: &str = "[[gpu]]\npcie_tx_kib_s = 1000\npcie_rx_kib_s = 3000\n\
                    [[gpu]]\npcie_tx_kib_s = 1000\nunsupported = [\"pcie_counters\"]\n\
                    [[gpu]]\nunsupported = [\"pcie\"]\n";

fn handle(index: c_uint) -> nvmlDevice_t {
    let mut dev = ptr::null_mut();
    // SAFETY: a live local the library writes one handle to.
    assert_eq!(unsafe { nvmlDeviceGetHandleByIndex_v2(index, &mut dev) }, OK);
    dev
}

/// The PCIe TX and RX counters and one field the simulator lacks.
fn fields(dev: nvmlDevice_t) -> Vec<nvmlFieldValue_t> {
    let mut values: Vec<nvmlFieldValue_t> = [FI_PCIE_TX_BYTES, FI_PCIE_RX_BYTES, 1]
        .iter()
        .map(|&id| {
            // SAFETY: plain old data; all-zero is valid for every field.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = id;
            v
        })
        .collect();
    // SAFETY: `values` holds the three entries the count says.
    assert_eq!(unsafe { nvmlDeviceGetFieldValues(dev, 3, values.as_mut_ptr()) }, OK);
    values
}

/// A counter as a real driver answers it (an H100, driver 580.159.04):
/// an unsigned int, 32 bits that wrap.
fn bytes(v: &nvmlFieldValue_t) -> u64 {
    assert_eq!((v.nvmlReturn, v.valueType), (OK, UI));
    // SAFETY: the value type says the union holds an unsigned int.
    u64::from(unsafe { v.value.uiVal })
}

#[test]
fn pcie_counters_add_up_the_scenario_rate() {
    scenario_test("pcie_counters_add_up_the_scenario_rate", Some(PCIE), |_| {
        // SAFETY: init takes no arguments.
        assert_eq!(unsafe { nvmlInit_v2() }, OK);
        let first = fields(handle(0));
        std::thread::sleep(Duration::from_millis(20));
        let second = fields(handle(0));
        // Stamped as nvml.h says, in microseconds since 1970 (after 2020).
        assert!(first[0].timestamp > 1_577_836_800_000_000, "{}", first[0].timestamp);
        // Between two readings the counters grow by the rate (KiB/s) times
        // the time between their stamps, each stamp within a microsecond
        // below the moment the counters were read at.
        let secs = (second[0].timestamp - first[0].timestamp) as f64 / 1e6;
        for (field, kib_s) in [(0, 1000.0), (1, 3000.0)] {
            let grew = bytes(&second[field]).wrapping_sub(bytes(&first[field])) & u64::from(u32::MAX);
            let (want, per_us) = (kib_s * 1024.0 * secs, kib_s * 1024.0 / 1e6);
            assert!((grew as f64 - want).abs() <= 2.0 * per_us + 1.0, "{grew} vs {want}");
        }
        for v in [&first, &second] {
            assert_eq!(v[1].timestamp, v[0].timestamp, "one moment for the call's fields");
            assert_eq!(v[2].nvmlReturn, NOT_SUPPORTED, "a field the simulator lacks");
        }
        assert!(bytes(&second[0]) > bytes(&first[0]) && bytes(&second[1]) > bytes(&first[1]));
        // A board without the counters still answers the call, field by field.
        for gpu in [1, 2] {
            let v = fields(handle(gpu));
            assert_eq!([v[0].nvmlReturn, v[1].nvmlReturn], [NOT_SUPPORTED; 2], "gpu {gpu}");
        }
        // Without counters the sampled throughput is still there; without PCIe figures, neither.
        let mut kib: c_uint = 0;
        // SAFETY: handles from the library and a live local.
        unsafe {
            assert_eq!(nvmlDeviceGetPcieThroughput(handle(1), 0, &mut kib), OK);
            assert_eq!(kib, 1000);
            assert_eq!(nvmlDeviceGetPcieThroughput(handle(2), 0, &mut kib), NOT_SUPPORTED);
            assert_eq!(nvmlShutdown(), OK);
        }
    });
}

fn calls_of(name: &str) -> u64 {
    let name = CString::new(name).unwrap();
    // SAFETY: a NUL-terminated string.
    unsafe { gpuscope_sim_call_count(name.as_ptr()) }
}

#[test]
fn calls_are_counted_by_name_and_logged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let scenario = format!("call_log = {:?}\n[[gpu]]\n", log.to_str().unwrap());
    let parent = scenario_test("calls_are_counted_by_name_and_logged", Some(&scenario), |sim| {
        // SAFETY: init and shutdown take no arguments; the rest get a
        // handle from the library and live locals.
        unsafe {
            assert_eq!(nvmlInit_v2(), OK);
            let mut count: c_uint = 0;
            for _ in 0..3 {
                assert_eq!(nvmlDeviceGetCount_v2(&mut count), OK);
            }
            let mut kib: c_uint = 0;
            assert_eq!(nvmlDeviceGetPcieThroughput(handle(0), 1, &mut kib), OK);
            assert_eq!(nvmlShutdown(), OK);
        }
        assert_eq!(calls_of("nvmlDeviceGetCount_v2"), 3);
        assert_eq!(calls_of("nvmlDeviceGetPcieThroughput"), 1);
        assert_eq!(calls_of("nvmlDeviceGetFieldValues"), 0);
        // SAFETY: null asks for every call.
        assert_eq!(unsafe { gpuscope_sim_call_count(ptr::null()) }, 7, "init, 3 counts, a handle, PCIe, shutdown");
        // Another copy of the library counts its own calls only.
        let raw = sim.raw();
        assert_eq!(raw.call0("nvmlInit_v2"), OK);
        assert_eq!(raw.call_count("nvmlInit_v2"), 1);
        assert_eq!(raw.call_count("nvmlDeviceGetCount_v2"), 0);
        assert_eq!(raw.call0("nvmlShutdown"), OK);
    });
    if parent.is_none() {
        return; // The child: the log is the parent's to read.
    }
    let lines = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.iter().filter(|l| **l == "nvmlDeviceGetCount_v2").count(), 3, "{lines:?}");
    assert_eq!(lines.first(), Some(&"nvmlInit_v2"));
    assert!(lines.contains(&"nvmlDeviceGetPcieThroughput"), "{lines:?}");
}

#[test]
fn a_fast_pcie_counter_wraps_at_32_bits() {
    // 50 GB/s into the device, as a pinned copy on an H100 moves: the
    // counter passes 2^32 every 86 ms.
    let scenario = "[[gpu]]\npcie_rx_kib_s = 48828125\n";
    scenario_test("a_fast_pcie_counter_wraps_at_32_bits", Some(scenario), |_| {
        // SAFETY: init takes no arguments.
        assert_eq!(unsafe { nvmlInit_v2() }, OK);
        let first = fields(handle(0));
        std::thread::sleep(Duration::from_millis(200));
        let v = fields(handle(0));
        let total = 50e9 * (v[1].timestamp - first[1].timestamp) as f64 / 1e6;
        assert!(total > 2.0 * 4_294_967_296.0, "wrapped at least twice in between");
        let expected = (bytes(&first[1]) + (total % 4_294_967_296.0) as u64) & u64::from(u32::MAX);
        // Within the microsecond each stamp rounds to (50 KB), modulo 2^32.
        let off = bytes(&v[1]).wrapping_sub(expected) & u64::from(u32::MAX);
        assert!(off <= 110_000 || off >= (1 << 32) - 110_000, "{} vs {expected}", bytes(&v[1]));
        // SAFETY: shutdown takes no arguments.
        assert_eq!(unsafe { nvmlShutdown() }, OK);
    });
}
