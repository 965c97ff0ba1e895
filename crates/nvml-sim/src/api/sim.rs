//! Symbols of the simulator itself, not part of NVML.

use std::ffi::{CStr, c_char};

use crate::{cost, timing};

/// Nanoseconds spent inside the exported NVML functions since load, not
/// counting `call_delay_ms` or `realistic_costs`, so a benchmark can
/// subtract the simulator's own cost from what it measured.
#[unsafe(no_mangle)]
pub extern "C" fn gpuscope_sim_busy_ns() -> u64 {
    timing::busy_ns()
}

/// How many times this copy of the library has been called at `function`
/// (an NVML function's name) since it was loaded; null: all functions.
/// Calls refused (uninitialised, hidden, failed) count too: the caller
/// made them.
///
/// # Safety
/// `function` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuscope_sim_call_count(function: *const c_char) -> u64 {
    if function.is_null() {
        return cost::count(None);
    }
    // SAFETY: non-null, and NUL-terminated by the caller's contract.
    let name = unsafe { CStr::from_ptr(function) };
    name.to_str().map_or(0, |n| cost::count(Some(n)))
}
