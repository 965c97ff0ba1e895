//! What nvidia-smi users query beside the live readings: serial number,
//! persistence and compute modes, the limits software set, maximum clocks,
//! ECC and BAR1. Each reading on its own: one the board does not have is
//! `None`, never 0.

use nvml_wrapper::Device;
use nvml_wrapper::enum_wrappers::device::{Clock, ComputeMode as NvmlComputeMode, EccCounter, MemoryError};

use super::device::Reader;
use std::ffi::c_uint;

use nvml_wrapper::error::{NvmlError, nvml_try};

use crate::model::{AccountedProcess, Accounting, Bar1Memory, ComputeMode, Ecc, Gpu, MaxClocks, RemappedRows};

pub fn read(r: &mut Reader<'_>, dev: &Device<'_>, gpu: &mut Gpu) {
    gpu.serial = r.take("serial", || dev.serial());
    gpu.persistence_mode = r.take("persistence mode", || dev.is_in_persistent_mode());
    gpu.compute_mode = r.take("compute mode", || dev.compute_mode()).map(compute_mode);
    gpu.power_management_limit_w =
        r.take("power management limit", || dev.power_management_limit()).map(|mw| f64::from(mw) / 1000.0);
    gpu.clocks.graphics_mhz = r.take("graphics clock", || dev.clock_info(Clock::Graphics));
    gpu.clocks.video_mhz = r.take("video clock", || dev.clock_info(Clock::Video));
    gpu.max_clocks = MaxClocks {
        sm_mhz: r.take("max SM clock", || dev.max_clock_info(Clock::SM)),
        memory_mhz: r.take("max memory clock", || dev.max_clock_info(Clock::Memory)),
        graphics_mhz: r.take("max graphics clock", || dev.max_clock_info(Clock::Graphics)),
        video_mhz: r.take("max video clock", || dev.max_clock_info(Clock::Video)),
    };
    gpu.ecc = ecc(r, dev);
    gpu.remapped_rows = r.take("remapped rows", || remapped_rows(dev)).unwrap_or_default();
    gpu.accounting = accounting(r, dev);
    gpu.bar1_memory = r.take("BAR1 memory", || dev.bar1_memory_info()).map_or_else(Bar1Memory::default, |b| {
        Bar1Memory { total: Some(b.total), used: Some(b.used), free: Some(b.free) }
    });
}

fn ecc(r: &mut Reader<'_>, dev: &Device<'_>) -> Ecc {
    let mode = r.take("ECC mode", || dev.is_ecc_enabled());
    let mut count = |what, error, counter| r.take(what, || dev.total_ecc_errors(error, counter));
    Ecc {
        mode_current: mode.as_ref().map(|m| m.currently_enabled),
        mode_pending: mode.as_ref().map(|m| m.pending_enabled),
        corrected_volatile: count("ECC errors", MemoryError::Corrected, EccCounter::Volatile),
        uncorrected_volatile: count("ECC errors", MemoryError::Uncorrected, EccCounter::Volatile),
        corrected_aggregate: count("ECC errors", MemoryError::Corrected, EccCounter::Aggregate),
        uncorrected_aggregate: count("ECC errors", MemoryError::Uncorrected, EccCounter::Aggregate),
        retired_pages_pending: r.take("retired pages", || dev.are_pages_pending_retired()),
    }
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

fn accounting(r: &mut Reader<'_>, dev: &Device<'_>) -> Option<Accounting> {
    let enabled = r.take("accounting mode", || dev.is_accounting_enabled())?;
    let buffer_size = r.take("accounting buffer size", || dev.accounting_buffer_size());
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
    Some(Accounting { enabled, buffer_size, processes })
}

fn compute_mode(m: NvmlComputeMode) -> ComputeMode {
    match m {
        NvmlComputeMode::Default => ComputeMode::Default,
        NvmlComputeMode::ExclusiveThread => ComputeMode::ExclusiveThread,
        NvmlComputeMode::Prohibited => ComputeMode::Prohibited,
        NvmlComputeMode::ExclusiveProcess => ComputeMode::ExclusiveProcess,
    }
}
