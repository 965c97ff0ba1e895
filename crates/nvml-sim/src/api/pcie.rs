//! PCIe traffic.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES as RX_BYTES,
    nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_TX_BYTES as TX_BYTES, nvmlPcieUtilCounter_t,
};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_SUPPORTED, nvmlReturn_t};
use crate::scenario::Reading;
use crate::value::uint;

/// In KB/s, as NVML reports it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: nvmlDevice_t,
    counter: nvmlPcieUtilCounter_t,
    value: *mut c_uint,
) -> nvmlReturn_t {
    call::device("nvmlDeviceGetPcieThroughput", device, Some(Reading::Pcie), |dev| {
        let spec = &dev.gpu.spec;
        let rate = match counter {
            TX_BYTES => &spec.pcie_tx_kib_s,
            RX_BYTES => &spec.pcie_rx_kib_s,
            _ => return Err(INVALID_ARGUMENT),
        };
        // SAFETY: NVML's contract: `value` is null or valid for writing one value.
        unsafe { out::put(value, uint(rate.at(dev.t))) }
    })
}

/// The link's generation and width, now and at most: one function each, as
/// nvml.h declares them.
macro_rules! link_reading {
    ($name:ident, $field:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, value: *mut c_uint) -> nvmlReturn_t {
            // SAFETY: NVML's contract: `value` is null or valid for writing one value.
            call::device(stringify!($name), device, Some(Reading::Pcie), |dev| unsafe {
                out::put(value, dev.gpu.spec.$field)
            })
        }
    };
}

link_reading!(nvmlDeviceGetCurrPcieLinkGeneration, pcie_link_gen_current);
link_reading!(nvmlDeviceGetMaxPcieLinkGeneration, pcie_link_gen_max);
link_reading!(nvmlDeviceGetCurrPcieLinkWidth, pcie_link_width_current);
link_reading!(nvmlDeviceGetMaxPcieLinkWidth, pcie_link_width_max);

/// Link-level replays since init: the scenario's count at init plus what
/// its rate has added up to. nvml.h: "Kepler or newer"; a board that keeps
/// none answers NOT_SUPPORTED (`unsupported = ["pcie_replay"]`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieReplayCounter(device: nvmlDevice_t, value: *mut c_uint) -> nvmlReturn_t {
    call::device("nvmlDeviceGetPcieReplayCounter", device, Some(Reading::Pcie), |dev| {
        if !dev.gpu.supports(Reading::PcieReplay) {
            return Err(NOT_SUPPORTED);
        }
        let spec = &dev.gpu.spec;
        let grown = spec.pcie_replays_per_s.integral(dev.t).max(0.0).floor();
        let count = u64::from(spec.pcie_replay_counter).saturating_add(grown as u64);
        // SAFETY: NVML's contract: `value` is null or valid for writing one value.
        unsafe { out::put(value, u32::try_from(count).unwrap_or(u32::MAX)) }
    })
}
