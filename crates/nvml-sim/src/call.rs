//! The frame every exported function runs in: artificial delay, the init
//! gate, handle checks, panic containment and busy-time accounting.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::time::Instant;

use nvml_wrapper_sys::bindings::{nvmlDevice_st, nvmlDevice_t};

use crate::code::{GPU_IS_LOST, INVALID_ARGUMENT, NOT_SUPPORTED, Outcome, UNKNOWN, nvmlReturn_t, to_return};
use crate::cost;
use crate::scenario::{Gpu, MAX_MIG_DEVICES, MigDevice, Reading};
use crate::state::{self, Ctx};
use crate::timing;

/// Handles are tagged indices rather than small integers so that a zeroed
/// or stale pointer is unlikely to pass for a valid device.
const HANDLE_BASE: usize = 0x6770_0000;
/// MIG device handles: a range of their own, eight slots per GPU.
const MIG_HANDLE_BASE: usize = 0x6790_0000;
const MIG_SLOTS: usize = 8;

/// The calls the driver answers on a MIG device handle; every other
/// reading (utilization, temperature, power, clocks, fans...) is the
/// parent's and returns NOT_SUPPORTED there, as on a real driver.
const MIG_CALLS: &[&str] = &[
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    // nvml.h: "This API supports the device handle and MIG device handle."
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleGet",
];

/// A device call's view of its GPU, and of the MIG device the handle
/// names, if it names one.
pub(crate) struct Dev<'a> {
    pub index: u32,
    pub position: usize,
    pub gpu: &'a Gpu,
    pub mig: Option<&'a MigDevice>,
    pub t: f64,
    pub unix_us: i64,
    /// The scenario's driver branch (560 of "560.35.03"), for readings
    /// that older drivers lack.
    pub driver_branch: Option<u32>,
}

/// The handle of the GPU at `position` among the scenario's `[[gpu]]`.
pub(crate) fn handle_for(position: usize) -> nvmlDevice_t {
    ptr::without_provenance_mut::<nvmlDevice_st>(HANDLE_BASE + position)
}

/// The handle of MIG device `slot` of the GPU at `position`.
pub(crate) fn mig_handle_for(position: usize, slot: usize) -> nvmlDevice_t {
    ptr::without_provenance_mut::<nvmlDevice_st>(MIG_HANDLE_BASE + position * MIG_SLOTS + slot)
}

/// Unwinding across `extern "C"` aborts the host, so panics become
/// NVML_ERROR_UNKNOWN here; no init gate, for init itself.
pub(crate) fn guarded(body: impl FnOnce() -> Outcome) -> nvmlReturn_t {
    let started = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or(Err(UNKNOWN));
    timing::add_busy(started);
    to_return(outcome)
}

/// A call that needs NVML initialised.
pub(crate) fn run(function: &str, body: impl FnOnce(&Ctx<'_>) -> Outcome) -> nvmlReturn_t {
    cost::enter(function);
    timing::sleep_delay();
    timing::hang_if_due();
    guarded(|| {
        let mut state = state::lock();
        let ctx = state.ready(function)?;
        body(&ctx)
    })
}

/// A call that reads `reading` from a device: lost and unsupported GPUs
/// are turned away before the body runs.
pub(crate) fn device(
    function: &str,
    handle: nvmlDevice_t,
    reading: Option<Reading>,
    body: impl FnOnce(&Dev<'_>) -> Outcome,
) -> nvmlReturn_t {
    let rc = run(function, |ctx| {
        let dev = resolve(ctx, handle)?;
        if dev.gpu.hangs_at(dev.t) {
            return Err(HANGS);
        }
        if dev.gpu.is_lost() {
            return Err(GPU_IS_LOST);
        }
        if let Some(reading) = reading
            && !dev.gpu.supports(reading)
        {
            return Err(NOT_SUPPORTED);
        }
        if dev.mig.is_some() && !MIG_CALLS.contains(&function) {
            return Err(NOT_SUPPORTED);
        }
        // NVML's docs: "On MIG-enabled GPUs, querying device utilization
        // rates is not currently supported"; per-process samples neither.
        let whole = matches!(reading, Some(Reading::Utilization | Reading::ProcessUtilization));
        if dev.mig.is_none() && dev.gpu.spec.mig_current && whole {
            return Err(NOT_SUPPORTED);
        }
        body(&dev)
    });
    // Hangs outside the state lock, so the other GPUs still answer.
    if rc == HANGS {
        timing::hang();
        return UNKNOWN;
    }
    rc
}

/// Not an NVML code: the body's way of saying "never return".
const HANGS: nvmlReturn_t = 0x7fff_0000;

pub(crate) fn resolve<'a>(ctx: &Ctx<'a>, handle: nvmlDevice_t) -> Result<Dev<'a>, nvmlReturn_t> {
    let (position, slot) = match handle.addr().checked_sub(MIG_HANDLE_BASE) {
        Some(offset) => (offset / MIG_SLOTS, Some(offset % MIG_SLOTS)),
        None => (handle.addr().checked_sub(HANDLE_BASE).ok_or(INVALID_ARGUMENT)?, None),
    };
    let gpu = ctx.scenario.gpus.get(position).ok_or(INVALID_ARGUMENT)?;
    // The handle of a GPU that has gone away names nothing any more.
    let index = ctx.scenario.visible(ctx.t).iter().position(|&p| p == position).ok_or(INVALID_ARGUMENT)?;
    // So does a MIG handle whose instance is gone (MIG off, fewer devices).
    let mig = match slot {
        Some(s) if s < MAX_MIG_DEVICES as usize && gpu.spec.mig_current => {
            Some(gpu.mig.get(s).ok_or(INVALID_ARGUMENT)?)
        }
        Some(_) => return Err(INVALID_ARGUMENT),
        None => None,
    };
    let driver_branch = ctx.scenario.driver_branch();
    Ok(Dev { index: index as u32, position, gpu, mig, t: ctx.t, unix_us: ctx.unix_us, driver_branch })
}
