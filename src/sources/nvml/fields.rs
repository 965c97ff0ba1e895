//! `nvmlDeviceGetFieldValues` through the library's own symbol:
//! nvml-wrapper's `field_values_for` cannot set `scopeId`, which NVLink's
//! per-link counters need. One call answers many fields, each with its
//! own return code (nvml.h, `nvmlFieldValue_t.nvmlReturn`).

use std::ffi::c_int;

use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper_sys::bindings::{
    nvmlFieldValue_t, nvmlReturn_enum_NVML_SUCCESS, nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT as UI,
    nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG as ULL,
};

/// One field's unsigned value and the width the driver keeps it in: a
/// counter NVML returns as `UNSIGNED_INT` wraps at 2^32 (the PCIe byte
/// counters on an H100, driver 580.159.04: nvml.h says "Value can be
/// wrapped").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsigned {
    pub value: u64,
    pub wraps_at_32_bits: bool,
    /// When the driver read it, by its own stamp (nvml.h: "CPU Timestamp
    /// of this value in microseconds since 1970"); 0 where it gave none.
    pub stamp_us: i64,
}

/// The values of `wanted` (field id, scope id), in order: `Some` where
/// NVML answered with an unsigned 32- or 64-bit value, `None` where that
/// field failed on its own (NOT_SUPPORTED, most often).
pub fn read(dev: &Device<'_>, wanted: &[(u32, u32)]) -> Result<Vec<Option<Unsigned>>, NvmlError> {
    let Ok(f) = dev.nvml().lib().nvmlDeviceGetFieldValues.as_ref() else { return Err(NvmlError::FunctionNotFound) };
    let mut values: Vec<nvmlFieldValue_t> = wanted
        .iter()
        .map(|&(id, scope)| {
            // SAFETY: nvmlFieldValue_t is plain old data; all-zero is a
            // valid value for every field, the union included.
            let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
            v.fieldId = id;
            v.scopeId = scope;
            v
        })
        .collect();
    let count = c_int::try_from(values.len()).map_err(|_| NvmlError::InvalidArg)?;
    // SAFETY: the handle is NVML's own, and `values` holds `count`
    // initialised entries NVML fills in place.
    nvml_try(unsafe { f(dev.handle(), count, values.as_mut_ptr()) })?;
    Ok(values
        .iter()
        .map(|v| {
            if v.nvmlReturn != nvmlReturn_enum_NVML_SUCCESS {
                return None;
            }
            let (value, wraps_at_32_bits) = match v.valueType {
                // SAFETY: valueType says the union holds an unsigned long long.
                ULL => (unsafe { v.value.ullVal }, false),
                // SAFETY: valueType says the union holds an unsigned int.
                UI => (u64::from(unsafe { v.value.uiVal }), true),
                _ => return None,
            };
            Some(Unsigned { value, wraps_at_32_bits, stamp_us: v.timestamp })
        })
        .collect())
}

/// Bytes per second between two readings of a 32-bit counter that may
/// have wrapped once in between: right only while `secs` is too short for
/// the counter to wrap twice (see `pcie::WRAP_SAFE`).
pub fn rate_32(before: u64, after: u64, secs: f64) -> Option<u64> {
    let delta = after.wrapping_sub(before) & u64::from(u32::MAX);
    (secs > 0.0).then(|| (delta as f64 / secs).round() as u64)
}

/// Bytes per second between two readings of a cumulative counter; `None`
/// when the counter went backwards (a driver reload, a GPU reset, or a
/// counter that wrapped) or no time passed.
pub fn rate(before: u64, after: u64, secs: f64) -> Option<u64> {
    let delta = after.checked_sub(before)?;
    (secs > 0.0).then(|| (delta as f64 / secs).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::{rate, rate_32};

    #[test]
    fn rates_need_time_and_a_counter_that_did_not_go_back() {
        assert_eq!(rate(1000, 3000, 2.0), Some(1000));
        assert_eq!(rate(3000, 1000, 2.0), None, "a reset");
        assert_eq!(rate(1000, 3000, 0.0), None);
    }

    #[test]
    fn a_32_bit_counter_that_wrapped_once_still_gives_the_bytes_moved() {
        // Two readings 5.6 ms apart on a real H100 during a 53 GB/s copy.
        let (before, after) = (4_158_928_184u64, 193_032_660u64);
        let moved = (1u64 << 32) - before + after;
        assert_eq!(rate_32(before, after, 0.0056), Some((moved as f64 / 0.0056).round() as u64));
        assert_eq!(rate_32(1000, 3000, 2.0), Some(1000));
        assert_eq!(rate_32(1000, 3000, 0.0), None);
    }
}
