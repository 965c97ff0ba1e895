//! The frame every exported function runs in: artificial delay, the init
//! gate, handle checks, panic containment and busy-time accounting.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::time::Instant;

use nvml_wrapper_sys::bindings::{nvmlDevice_st, nvmlDevice_t};

use crate::code::{GPU_IS_LOST, INVALID_ARGUMENT, NOT_SUPPORTED, Outcome, UNKNOWN, nvmlReturn_t, to_return};
use crate::scenario::{Gpu, Reading};
use crate::state::{self, Ctx};
use crate::timing;

/// Handles are tagged indices rather than small integers so that a zeroed
/// or stale pointer is unlikely to pass for a valid device.
const HANDLE_BASE: usize = 0x6770_0000;

/// A device call's view of its GPU.
pub(crate) struct Dev<'a> {
    pub index: u32,
    pub gpu: &'a Gpu,
    pub t: f64,
}

/// The handle of the GPU at `position` among the scenario's `[[gpu]]`.
pub(crate) fn handle_for(position: usize) -> nvmlDevice_t {
    ptr::without_provenance_mut::<nvmlDevice_st>(HANDLE_BASE + position)
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
    let position = handle.addr().checked_sub(HANDLE_BASE).ok_or(INVALID_ARGUMENT)?;
    let gpu = ctx.scenario.gpus.get(position).ok_or(INVALID_ARGUMENT)?;
    // The handle of a GPU that has gone away names nothing any more.
    let index = ctx.scenario.visible(ctx.t).iter().position(|&p| p == position).ok_or(INVALID_ARGUMENT)?;
    Ok(Dev { index: index as u32, gpu, t: ctx.t })
}
