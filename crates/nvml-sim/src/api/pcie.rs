//! PCIe traffic.

use std::ffi::c_uint;

use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_RX_BYTES as RX_BYTES,
    nvmlPcieUtilCounter_enum_NVML_PCIE_UTIL_TX_BYTES as TX_BYTES, nvmlPcieUtilCounter_t,
};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, nvmlReturn_t};
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
