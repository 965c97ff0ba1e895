//! What nvidia-smi users query beside the live readings: ECC errors,
//! remapped rows, accounting and BAR1 (the settings, read less often, are
//! in `slow.rs`). Each reading on its own:
//! one the board does not have is `None`, never 0.

use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};

use super::device::Reader;
use std::ffi::c_uint;

use nvml_wrapper::error::{NvmlError, nvml_try};

use crate::model::{AccountedProcess, Accounting, Bar1Memory, Ecc, Gpu, RemappedRows};

/// The accounted processes, each tick; the settings are in `slow.rs`.
/// `accounting`: whether accounting is on, and its buffer size (`None`
/// where not asked).
pub fn read(r: &mut Reader<'_>, dev: &Device<'_>, gpu: &mut Gpu, accounting: Option<(bool, Option<u32>)>) {
    gpu.accounting = accounting.map(|(enabled, buffer_size)| accounted(r, dev, enabled, buffer_size));
}

/// The board's health counters (ECC errors, pages pending retirement,
/// remapped rows) and BAR1: seven calls a GPU that `slow.rs` makes at its
/// own pace, since they move on a failing board's timescale, not a tick's.
pub fn health(r: &mut Reader<'_>, dev: &Device<'_>) -> (Ecc, RemappedRows, Bar1Memory) {
    let mut ecc = Ecc::default();
    ecc_counts(r, dev, &mut ecc);
    let remapped = r.take("remapped rows", || remapped_rows(dev)).unwrap_or_default();
    let bar1 = r.take("BAR1 memory", || dev.bar1_memory_info()).map_or_else(Bar1Memory::default, |b| Bar1Memory {
        total: Some(b.total),
        used: Some(b.used),
        free: Some(b.free),
    });
    (ecc, remapped, bar1)
}

fn ecc_counts(r: &mut Reader<'_>, dev: &Device<'_>, ecc: &mut Ecc) {
    let mut count = |what, error, counter| r.take(what, || dev.total_ecc_errors(error, counter));
    ecc.corrected_volatile = count("ECC errors", MemoryError::Corrected, EccCounter::Volatile);
    ecc.uncorrected_volatile = count("ECC errors", MemoryError::Uncorrected, EccCounter::Volatile);
    ecc.corrected_aggregate = count("ECC errors", MemoryError::Corrected, EccCounter::Aggregate);
    ecc.uncorrected_aggregate = count("ECC errors", MemoryError::Uncorrected, EccCounter::Aggregate);
    ecc.retired_pages_pending = r.take("retired pages", || dev.are_pages_pending_retired());
}

/// nvml-wrapper has no call for it: the library's own symbol
/// (nvmlDeviceGetRemappedRows, Ampere and later; NOT_SUPPORTED before).
fn remapped_rows(dev: &Device<'_>) -> Result<RemappedRows, NvmlError> {
    let Ok(f) = dev.nvml().lib().nvmlDeviceGetRemappedRows.as_ref() else {
        return Err(NvmlError::FunctionNotFound);
    };
    let (mut corr, mut unc, mut pending, mut failure): (c_uint, c_uint, c_uint, c_uint) = (0, 0, 0, 0);
    // SAFETY: the handle is NVML's own, and each pointer is a live local
    // NVML writes one unsigned int to.
    nvml_try(unsafe { f(dev.handle(), &mut corr, &mut unc, &mut pending, &mut failure) })?;
    Ok(RemappedRows {
        correctable: Some(corr),
        uncorrectable: Some(unc),
        pending: Some(pending != 0),
        failure: Some(failure != 0),
    })
}

/// The newest processes of the accounting buffer; each costs a call, so a
/// tick reads no more than this many.
const MAX_ACCOUNTED: usize = 32;

fn accounted(r: &mut Reader<'_>, dev: &Device<'_>, enabled: bool, buffer_size: Option<u32>) -> Accounting {
    let pids =
        if enabled { r.take("accounting PIDs", || dev.accounting_pids()).unwrap_or_default() } else { Vec::new() };
    let newest = &pids[pids.len().saturating_sub(MAX_ACCOUNTED)..];
    let processes = newest
        .iter()
        .filter_map(|&pid| {
            let s = r.take("accounting stats", || dev.accounting_stats_for(pid))?;
            Some(AccountedProcess {
                pid,
                gpu_utilization: s.gpu_utilization,
                memory_utilization: s.memory_utilization,
                max_memory: s.max_memory_usage,
                time_ms: s.time,
                start_time_unix_us: s.start_time,
                running: s.is_running,
            })
        })
        .collect();
    Accounting { enabled, buffer_size, processes }
}
