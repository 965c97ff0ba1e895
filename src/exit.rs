//! Every exit status gpuscope can end with, in one place; the README's
//! "Exit codes" table documents the same numbers. Each mode's error type maps
//! itself onto these, and nothing else spells a number.

pub const OK: u8 = 0;
/// Something failed while running (an output error other than a closed pipe).
pub const FAILURE: u8 = 1;
/// Bad usage or config, or no usable NVML: nothing was collected.
pub const USAGE: u8 = 2;
/// The driver did not answer before the deadline (`--timeout`): a hung
/// NVML call. Above `check`'s 2, so `[ $? -ge 2 ]` counts it critical.
pub const DRIVER_SILENT: u8 = 3;
/// `check`: warnings are active.
pub const CHECK_WARNING: u8 = 1;
/// `check`: critical alerts are active.
pub const CHECK_CRITICAL: u8 = 2;
/// `run`: the command exists but could not be started (the shells' 126).
pub const CANNOT_EXECUTE: u8 = 126;
/// `run`: no such command (the shells' 127). Otherwise `run` exits with
/// its command's own status.
pub const NOT_FOUND: u8 = 127;
