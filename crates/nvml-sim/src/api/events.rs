//! Driver events: event sets, registering a device's event types on one,
//! and the wait that delivers the scenario's `[[gpu.event]]`s as they fall
//! due, as nvml.h's `nvmlEventSetCreate`, `nvmlDeviceRegisterEvents`,
//! `nvmlDeviceGetSupportedEventTypes`, `nvmlEventSetWait_v2` and
//! `nvmlEventSetFree` describe them.
//!
//! The wait sleeps outside every lock, so the other calls (another thread
//! reading the same GPUs, as a real client's poller does) go on while a
//! client waits; its sleeps are not counted as time spent in the library.

use std::ffi::{c_uint, c_ulonglong};
use std::ptr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlEventData_t, nvmlEventSet_st, nvmlEventSet_t, nvmlEventTypeAll, nvmlEventTypeDoubleBitEccError,
    nvmlEventTypePState, nvmlEventTypeSingleBitEccError, nvmlEventTypeXidCriticalError,
};

use super::out;
use crate::call;
use crate::code::{GPU_IS_LOST, INVALID_ARGUMENT, NOT_SUPPORTED, TIMEOUT, UNKNOWN, nvmlReturn_t};
use crate::scenario::{EventKind, Gpu, Reading};
use crate::state::{self, Ctx};
use crate::{cost, timing};

/// Event set handles: a range of their own, apart from the devices'.
const SET_BASE: usize = 0x67a0_0000;
/// How long a wait sleeps at most between looks at the scenario, so that
/// an edit to it (an event added, a GPU lost) is seen while a client waits.
const LOOK_EVERY: Duration = Duration::from_millis(200);
/// nvml.h, `nvmlEventData_t.gpuInstanceId` / `computeInstanceId`: "set to
/// 0xFFFFFFFF otherwise", for an event not attributable to an instance.
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;

const XID: u64 = nvmlEventTypeXidCriticalError as u64;
const SBE: u64 = nvmlEventTypeSingleBitEccError as u64;
const DBE: u64 = nvmlEventTypeDoubleBitEccError as u64;
const PSTATE: u64 = nvmlEventTypePState as u64;
const ALL: u64 = nvmlEventTypeAll as u64;

static SETS: Mutex<Vec<Option<Set>>> = Mutex::new(Vec::new());

/// One event set: the devices registered on it, and the scripted events
/// already delivered through it.
#[derive(Debug, Default)]
struct Set {
    registered: Vec<Registration>,
    /// (GPU position, index among its `[[gpu.event]]`).
    delivered: Vec<(usize, usize)>,
}

#[derive(Debug)]
struct Registration {
    position: usize,
    mask: u64,
    /// nvml.h: "All events that occurred before this call are not
    /// recorded": seconds since init at the first registration.
    since: f64,
}

/// Taken after the state lock wherever both are held, never before.
fn sets() -> MutexGuard<'static, Vec<Option<Set>>> {
    // Plain lists, each change a single push or assignment.
    SETS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn handle_of(slot: usize) -> nvmlEventSet_t {
    ptr::without_provenance_mut::<nvmlEventSet_st>(SET_BASE + slot)
}

fn slot_of(set: nvmlEventSet_t) -> Option<usize> {
    set.addr().checked_sub(SET_BASE)
}

/// The event types `gpu` can deliver: Xid and P-state on every board;
/// ECC events (nvml.h) "only on ECC-enabled devices"; none where the
/// scenario says the GPU passes no events on.
fn supported(gpu: &Gpu) -> u64 {
    if !gpu.supports(Reading::Events) {
        return 0;
    }
    let ecc = if gpu.spec.ecc_enabled && gpu.supports(Reading::Ecc) { SBE | DBE } else { 0 };
    XID | PSTATE | ecc
}

fn bit(kind: EventKind) -> u64 {
    match kind {
        EventKind::Xid => XID,
        EventKind::EccSingleBit => SBE,
        EventKind::EccDoubleBit => DBE,
        EventKind::Pstate => PSTATE,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    call::run("nvmlEventSetCreate", |_| {
        if set.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let mut sets = sets();
        let slot = match sets.iter().position(Option::is_none) {
            Some(free) => free,
            None => {
                sets.push(None);
                sets.len() - 1
            }
        };
        sets[slot] = Some(Set::default());
        // SAFETY: NVML's contract: `set` is valid for writing one handle (checked non-null).
        unsafe { out::put(set, handle_of(slot)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    call::run("nvmlEventSetFree", |_| {
        let mut sets = sets();
        // nvml.h lists no INVALID_ARGUMENT here: a handle that names no
        // set is "any unexpected error".
        let held = slot_of(set).and_then(|s| sets.get_mut(s)).filter(|s| s.is_some()).ok_or(UNKNOWN)?;
        *held = None;
        Ok(())
    })
}

/// nvml.h lists no NOT_SUPPORTED: a GPU without events answers an empty
/// mask, as every GPU does on Windows.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    event_types: *mut c_ulonglong,
) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `event_types` is null or valid for writing one value.
    call::device("nvmlDeviceGetSupportedEventTypes", device, None, |dev| unsafe {
        out::put(event_types, supported(dev.gpu))
    })
}

/// nvml.h: "If function reports NVML_ERROR_NOT_SUPPORTED, event set can
/// still be used. None of the requested eventTypes are registered in that
/// case": so a mask with any type the GPU lacks registers nothing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    event_types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    call::device("nvmlDeviceRegisterEvents", device, Some(Reading::Events), |dev| {
        if event_types & !ALL != 0 {
            return Err(INVALID_ARGUMENT);
        }
        if event_types & !supported(dev.gpu) != 0 {
            return Err(NOT_SUPPORTED);
        }
        let mut sets = sets();
        let held = slot_of(set).and_then(|s| sets.get_mut(s)).and_then(Option::as_mut).ok_or(INVALID_ARGUMENT)?;
        match held.registered.iter_mut().find(|r| r.position == dev.position) {
            Some(r) => r.mask |= event_types,
            None => held.registered.push(Registration { position: dev.position, mask: event_types, since: dev.t }),
        }
        Ok(())
    })
}

/// Delivers the earliest scripted event due on a registered GPU, waiting
/// up to `timeoutms` for one; TIMEOUT when none came.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeoutms: c_uint,
) -> nvmlReturn_t {
    const NAME: &str = "nvmlEventSetWait_v2";
    cost::enter(NAME);
    timing::sleep_delay();
    timing::hang_if_due();
    let deadline = Instant::now() + Duration::from_millis(u64::from(timeoutms));
    loop {
        let mut due_in: Option<f64> = None;
        let rc = call::guarded(|| {
            let mut state = state::lock();
            let ctx = state.ready(NAME)?;
            if data.is_null() {
                return Err(INVALID_ARGUMENT);
            }
            let event = next_event(&ctx, set, &mut due_in)?;
            // SAFETY: NVML's contract: `data` is valid for writing one value (checked non-null).
            unsafe { out::put(data, event) }
        });
        if rc != TIMEOUT {
            return rc;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return TIMEOUT;
        }
        let until_due = due_in.map_or(LOOK_EVERY, |s| Duration::from_secs_f64(s.clamp(0.0, 1.0)));
        std::thread::sleep(left.min(LOOK_EVERY).min(until_due.max(Duration::from_millis(1))));
    }
}

/// The earliest event due and not yet delivered on the set's GPUs, marked
/// delivered; else TIMEOUT (with, in `due_in`, how soon the next falls
/// due), or GPU_IS_LOST where a registered GPU has fallen off the bus
/// (nvml.h lists it among the wait's returns).
fn next_event(ctx: &Ctx<'_>, set: nvmlEventSet_t, due_in: &mut Option<f64>) -> Result<nvmlEventData_t, nvmlReturn_t> {
    let mut sets = sets();
    let held = slot_of(set).and_then(|s| sets.get_mut(s)).and_then(Option::as_mut).ok_or(INVALID_ARGUMENT)?;
    let visible = ctx.scenario.visible(ctx.t);
    let mut best: Option<(f64, usize, usize)> = None;
    let mut lost = false;
    for r in &held.registered {
        // A GPU that has gone away delivers nothing more.
        if !visible.contains(&r.position) {
            continue;
        }
        let Some(gpu) = ctx.scenario.gpus.get(r.position) else { continue };
        lost |= gpu.is_lost();
        for (i, e) in gpu.spec.event.iter().enumerate() {
            if e.at_s < r.since || r.mask & bit(e.kind) == 0 || held.delivered.contains(&(r.position, i)) {
                continue;
            }
            if e.at_s > ctx.t {
                let wait = e.at_s - ctx.t;
                *due_in = Some(due_in.map_or(wait, |d: f64| d.min(wait)));
                continue;
            }
            if best.is_none_or(|(at, _, _)| e.at_s < at) {
                best = Some((e.at_s, r.position, i));
            }
        }
    }
    let Some((_, position, i)) = best else {
        return Err(if lost { GPU_IS_LOST } else { TIMEOUT });
    };
    held.delivered.push((position, i));
    let e = &ctx.scenario.gpus[position].spec.event[i];
    Ok(nvmlEventData_t {
        device: call::handle_for(position),
        eventType: bit(e.kind),
        // nvml.h: "eventData is 0 for any other event".
        eventData: e.xid.unwrap_or(0),
        gpuInstanceId: e.gpu_instance_id.unwrap_or(NO_INSTANCE),
        computeInstanceId: e.compute_instance_id.unwrap_or(NO_INSTANCE),
    })
}
