//! `nvmlDeviceGetFieldValues` through the library's own symbol:
//! nvml-wrapper's `field_values_for` cannot set `scopeId`, which NVLink's
//! per-link counters need. One call answers many fields, each with its
//! own return code (nvml.h, `nvmlFieldValue_t.nvmlReturn`).

use std::ffi::c_int;

use nvml_wrapper::Device;
use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper_sys::bindings::{
    nvmlFieldValue_t, nvmlReturn_enum_NVML_SUCCESS, nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG as ULL,
};

/// The values of `wanted` (field id, scope id), in order: `Some` where
/// NVML answered with an unsigned 64-bit value, `None` where that field
/// failed on its own (NOT_SUPPORTED, most often).
pub fn read(dev: &Device<'_>, wanted: &[(u32, u32)]) -> Result<Vec<Option<u64>>, NvmlError> {
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
            if v.nvmlReturn != nvmlReturn_enum_NVML_SUCCESS || v.valueType != ULL {
                return None;
            }
            // SAFETY: valueType says the union holds an unsigned long long.
            Some(unsafe { v.value.ullVal })
        })
        .collect())
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
    use super::rate;

    #[test]
    fn rates_need_time_and_a_counter_that_did_not_go_back() {
        assert_eq!(rate(1000, 3000, 2.0), Some(1000));
        assert_eq!(rate(3000, 1000, 2.0), None, "a reset");
        assert_eq!(rate(1000, 3000, 0.0), None);
    }
}
