//! Symbols of the simulator itself, not part of NVML.

use crate::timing;

/// Nanoseconds spent inside the exported NVML functions since load, not
/// counting `call_delay_ms`, so a benchmark can subtract the simulator's
/// own cost from what it measured.
#[unsafe(no_mangle)]
pub extern "C" fn gpuscope_sim_busy_ns() -> u64 {
    timing::busy_ns()
}
