//! The driver's events (Xid critical errors, ECC errors), heard on a
//! thread of its own that waits on an NVML event set: never the poller's
//! tick, never the UI's task. Each wait (`nvmlEventSetWait_v2`) gives up
//! after `WAIT_MS`, so the thread sees within that long that gpuscope
//! wants it to stop, and frees its set and its session itself.
//!
//! The thread opens an NVML session of its own from the same library
//! spec rather than share the source's. nvml-wrapper's `EventSet` borrows
//! the `Nvml` it came from, and the source keeps its `Nvml` in a box it
//! takes out and puts back every tick and drops and loads again after a
//! failure (`NvmlSource::read`, `drop_session`): a set on another thread
//! could borrow it only if the two shared it (an `Arc`) and the source
//! gave up reloading while the set lives. A second session is sound by
//! construction: the same library file is mapped once (`dlopen` of a
//! loaded path gives the loaded object), and nvml.h's `nvmlInit_v2`
//! counts its callers ("reference counting"), so both sessions talk to the
//! same driver and each shuts its own down. The built-in simulator is a
//! fresh copy per load, with its own clock: its scripted events count
//! from the listener's start, milliseconds after the poller's.
//!
//! Registration and the wait go through the library's own symbols:
//! nvml-wrapper's `Device::register_events` frees the set on any error,
//! where nvml.h says after NOT_SUPPORTED "event set can still be used",
//! so one GPU without events would cost the others theirs; and its
//! `EventSet::wait` (nvmlEventSetWait_v2 too) drops the event's GPU and
//! compute instance, which say which MIG instance an Xid hit.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper::{Device, EventSet, Nvml};
use nvml_wrapper_sys::bindings::nvmlEventData_t;

use super::library::{self, LibrarySpec};
use super::xid;
use crate::model::{
    DriverEvent, DriverEventKind, EventsStatus, Gpu, MAX_DRIVER_EVENTS, MAX_XID_COUNTS, Severity, Timestamp, XidCount,
};

/// How long one wait lasts: how soon the thread notices it should stop.
pub const WAIT_MS: u32 = 500;
/// The events gpuscope listens for (nvml.h's `nvmlEventType*`).
const WANTED: EventTypes =
    EventTypes::CRITICAL_XID_ERROR.union(EventTypes::SINGLE_BIT_ECC_ERROR).union(EventTypes::DOUBLE_BIT_ECC_ERROR);
/// Events heard and not yet taken by a tick; more (a storm of corrected
/// ECC errors between two ticks) are counted and dropped.
const MAX_PENDING: usize = 1024;
/// Failed waits in a row (other than a timeout or a lost GPU) after which
/// the thread gives up rather than ask again and again.
const MAX_FAILURES: u32 = 5;
/// The thread's own stack: loading NVML happens on a thread of its own
/// (`library::load_aside`); waiting needs little.
const STACK: usize = 256 << 10;
/// nvml.h, `nvmlEventData_t`: "set to 0xFFFFFFFF otherwise".
const NO_INSTANCE: u32 = 0xFFFF_FFFF;

/// The thread, as the source holds it. Dropping it asks the thread to
/// stop (it does within `WAIT_MS`) without waiting for it.
pub struct Listener {
    shared: Arc<Shared>,
    /// The UUIDs it was started for.
    watched: Vec<String>,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    inbox: Mutex<Inbox>,
}

#[derive(Default)]
struct Inbox {
    /// `None` until the thread has registered (or given up).
    status: Option<EventsStatus>,
    heard: Vec<Heard>,
    dropped: u64,
}

/// One event as the thread heard it.
#[derive(Debug, Clone, PartialEq)]
pub struct Heard {
    /// The GPU it was registered for, by UUID (index where none).
    pub key: String,
    pub types: u64,
    pub data: u64,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    pub at: SystemTime,
}

impl Listener {
    /// Starts listening on the GPUs `watched` names; what cannot be
    /// started is said in the status, once.
    pub fn start(spec: &LibrarySpec, watched: Vec<String>) -> Self {
        let shared = Arc::new(Shared::default());
        let (spec, their, only) = (spec.clone(), Arc::clone(&shared), watched.clone());
        let started = std::thread::Builder::new()
            .name("gpuscope-events".into())
            .stack_size(STACK)
            .spawn(move || run(&spec, &only, &their));
        if let Err(e) = started {
            shared.give_up(format!("no thread to listen on: {e}"), watched.clone());
        }
        Self { shared, watched }
    }

    /// Whether it was started for these GPUs (compared without copying:
    /// this is asked every tick).
    pub fn watches<'a>(&self, watched: impl Iterator<Item = &'a str>) -> bool {
        self.watched.iter().map(String::as_str).eq(watched)
    }

    /// What was heard since the last call, and the status.
    pub fn take(&self) -> (Vec<Heard>, EventsStatus) {
        let mut inbox = self.shared.inbox();
        let heard = std::mem::take(&mut inbox.heard);
        let mut status = inbox.status.clone().unwrap_or_else(|| EventsStatus {
            listening: false,
            unavailable: Some("starting to listen".into()),
            not_on: self.watched.clone(),
        });
        if inbox.dropped > 0 {
            let dropped = format!("{} events dropped: more came between two ticks than gpuscope keeps", inbox.dropped);
            status.unavailable = Some(match status.unavailable {
                Some(why) => format!("{why}; {dropped}"),
                None => dropped,
            });
        }
        (heard, status)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

impl Shared {
    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        // Plain values, each change a single assignment or push.
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn give_up(&self, why: String, not_on: Vec<String>) {
        self.inbox().status = Some(EventsStatus { listening: false, unavailable: Some(why), not_on });
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

fn run(spec: &LibrarySpec, watched: &[String], shared: &Shared) {
    let nvml = match library::load_aside(spec) {
        Ok(nvml) => nvml,
        Err(e) => return shared.give_up(format!("NVML could not be opened to listen: {e}"), watched.to_vec()),
    };
    listen(&nvml, watched, shared);
    // The set is freed inside `listen`, before this session shuts down.
}

fn listen(nvml: &Nvml, watched: &[String], shared: &Shared) {
    let set = match nvml.create_event_set() {
        Ok(set) => set,
        Err(e) => return shared.give_up(format!("the driver has no event sets ({})", describe(&e)), watched.to_vec()),
    };
    let (registered, refused) = register(nvml, &set, watched);
    let lines: Vec<&str> = refused.iter().map(|(_, why)| why.as_str()).collect();
    let not_on: Vec<String> = refused.iter().map(|(key, _)| key.clone()).collect();
    if registered.is_empty() {
        let why = if lines.is_empty() { "no GPU to listen on".into() } else { lines.join("; ") };
        return shared.give_up(why, not_on);
    }
    let unavailable = (!lines.is_empty()).then(|| lines.join("; "));
    shared.inbox().status = Some(EventsStatus { listening: true, unavailable, not_on: not_on.clone() });
    let mut failures = 0;
    while !shared.stopping() {
        match wait(nvml, &set) {
            Ok(data) => {
                failures = 0;
                let Some(key) = registered.iter().find(|(h, _)| *h == data.device.addr()).map(|(_, k)| k.clone())
                else {
                    continue;
                };
                let mut inbox = shared.inbox();
                if inbox.heard.len() >= MAX_PENDING {
                    inbox.dropped += 1;
                    continue;
                }
                inbox.heard.push(Heard {
                    key,
                    types: data.eventType,
                    data: data.eventData,
                    gpu_instance_id: data.gpuInstanceId,
                    compute_instance_id: data.computeInstanceId,
                    at: SystemTime::now(),
                });
            }
            Err(NvmlError::Timeout) => failures = 0,
            // The lost GPU is the poller's to report; the others may still
            // speak. The pause keeps a wait that fails at once from
            // spinning.
            Err(NvmlError::GpuLost) => std::thread::sleep(Duration::from_millis(u64::from(WAIT_MS))),
            Err(e) => {
                failures += 1;
                if failures >= MAX_FAILURES || super::session_broken(&e) {
                    let keys = registered.iter().map(|(_, k)| k.clone()).chain(not_on.iter().cloned()).collect();
                    return shared.give_up(format!("stopped listening: the wait failed ({})", describe(&e)), keys);
                }
                std::thread::sleep(Duration::from_millis(u64::from(WAIT_MS)));
            }
        }
    }
}

/// A GPU that refused events: its key, and a line that says why.
type Refused = (String, String);

/// Registers the watched GPUs' wanted events on `set`: each GPU's handle
/// (as an address, to know the GPU of an event) with its key, and each
/// GPU that refused with a line that says why.
fn register(nvml: &Nvml, set: &EventSet<'_>, watched: &[String]) -> (Vec<(usize, String)>, Vec<Refused>) {
    let (mut registered, mut refused) = (Vec::new(), Vec::new());
    let count = match nvml.device_count() {
        Ok(n) => n,
        Err(e) => {
            let why = format!("the GPUs could not be listed ({})", describe(&e));
            return (registered, watched.iter().map(|k| (k.clone(), why.clone())).collect());
        }
    };
    for index in 0..count {
        let Ok(dev) = nvml.device_by_index(index) else { continue };
        let uuid = dev.uuid().ok();
        // A GPU whose UUID cannot be read is registered still.
        if let Some(uuid) = &uuid
            && !watched.contains(uuid)
        {
            continue;
        }
        let key = uuid.unwrap_or_else(|| index.to_string());
        let types = match dev.supported_event_types() {
            Ok(types) => types & WANTED,
            Err(e) => {
                refused.push((key, format!("GPU {index}: {}", describe(&e))));
                continue;
            }
        };
        if !types.contains(EventTypes::CRITICAL_XID_ERROR) {
            refused.push((key, format!("GPU {index}: the driver reports no Xid events on it")));
            continue;
        }
        // SAFETY: the address is only compared with the device an event names.
        let handle = unsafe { dev.handle() }.addr();
        match register_raw(&dev, types, set) {
            Ok(()) => registered.push((handle, key)),
            Err(e) => refused.push((key, format!("GPU {index}: {}", describe(&e)))),
        }
    }
    (registered, refused)
}

fn register_raw(dev: &Device<'_>, types: EventTypes, set: &EventSet<'_>) -> Result<(), NvmlError> {
    let Ok(f) = dev.nvml().lib().nvmlDeviceRegisterEvents.as_ref() else { return Err(NvmlError::FunctionNotFound) };
    // SAFETY: the device and the set are NVML's own, from this session.
    nvml_try(unsafe { f(dev.handle(), types.bits(), set.handle()) })
}

fn wait(nvml: &Nvml, set: &EventSet<'_>) -> Result<nvmlEventData_t, NvmlError> {
    let Ok(f) = nvml.lib().nvmlEventSetWait_v2.as_ref() else { return Err(NvmlError::FunctionNotFound) };
    // SAFETY: nvmlEventData_t is plain old data, all-zero a valid value.
    let mut data: nvmlEventData_t = unsafe { std::mem::zeroed() };
    // SAFETY: the set is NVML's own, from this session; `data` is ours.
    nvml_try(unsafe { f(set.handle(), &mut data, WAIT_MS) })?;
    Ok(data)
}

fn describe(e: &NvmlError) -> String {
    match e {
        NvmlError::NotSupported => "not supported (some virtualised GPUs do not pass events on)".into(),
        NvmlError::NoPermission => "no permission".into(),
        NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_) => "this driver's NVML has no events".into(),
        other => other.to_string(),
    }
}

/// Each GPU's events and Xid counts, kept by the source from tick to tick
/// (by the GPU's UUID, so they follow the GPU, not its index).
#[derive(Debug, Default)]
pub struct Log {
    gpus: HashMap<String, GpuLog>,
}

#[derive(Debug, Default)]
struct GpuLog {
    events: VecDeque<DriverEvent>,
    counts: Vec<XidCount>,
}

impl Log {
    pub fn add(&mut self, heard: Vec<Heard>) {
        for h in heard {
            let event = to_event(&h);
            let log = self.gpus.entry(h.key).or_default();
            if log.events.len() >= MAX_DRIVER_EVENTS {
                log.events.pop_front();
            }
            if event.kind == DriverEventKind::Xid {
                count(&mut log.counts, event.xid);
            }
            log.events.push_back(event);
        }
    }

    /// Puts each GPU's events and counts into its entry.
    pub fn apply(&self, gpus: &mut [Gpu]) {
        for gpu in gpus {
            let key = gpu.uuid.clone().unwrap_or_else(|| gpu.index.to_string());
            if let Some(log) = self.gpus.get(&key) {
                gpu.driver_events = log.events.iter().cloned().collect();
                gpu.xid_counts.clone_from(&log.counts);
            }
        }
    }
}

/// Counts `xid` apart while fewer than `MAX_XID_COUNTS` are, else under
/// `None`, so that the exporter's `xid` label stays bounded.
fn count(counts: &mut Vec<XidCount>, xid: Option<u32>) {
    let apart = counts.iter().filter(|c| c.xid.is_some()).count();
    let xid = xid.filter(|x| apart < MAX_XID_COUNTS || counts.iter().any(|c| c.xid == Some(*x)));
    match counts.iter_mut().find(|c| c.xid == xid) {
        Some(c) => c.count += 1,
        None => counts.push(XidCount { xid, count: 1 }),
    }
}

/// What an event means, from nvml.h's event type and NVIDIA's Xid
/// catalogue (`xid.rs`).
pub fn to_event(h: &Heard) -> DriverEvent {
    let instance = |id: u32| (id != NO_INSTANCE).then_some(id);
    let mut event = DriverEvent {
        time: Timestamp::from_system(h.at),
        kind: DriverEventKind::Unknown,
        xid: None,
        mnemonic: None,
        meaning: None,
        action: None,
        severity: Severity::Warning,
        gpu_instance_id: instance(h.gpu_instance_id),
        compute_instance_id: instance(h.compute_instance_id),
    };
    let types = EventTypes::from_bits_truncate(h.types);
    if types.contains(EventTypes::CRITICAL_XID_ERROR) {
        // nvml.h: eventData "Stores Xid error for the device".
        let number = u32::try_from(h.data).unwrap_or(u32::MAX);
        let (mnemonic, meaning, action) = xid::describe(number);
        event.kind = DriverEventKind::Xid;
        event.xid = Some(number);
        event.mnemonic = mnemonic.map(String::from);
        event.meaning = meaning.map(String::from);
        event.action = Some(action);
        event.severity = xid::severity(action);
    } else if types.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
        event.kind = DriverEventKind::EccDoubleBit;
        event.meaning = Some("an uncorrectable (double-bit) ECC error in device memory".into());
        event.severity = Severity::Critical;
    } else if types.contains(EventTypes::SINGLE_BIT_ECC_ERROR) {
        event.kind = DriverEventKind::EccSingleBit;
        event.meaning = Some("a corrected (single-bit) ECC error".into());
        event.severity = Severity::Info;
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::XidAction;

    fn heard(key: &str, types: EventTypes, data: u64) -> Heard {
        Heard {
            key: key.into(),
            types: types.bits(),
            data,
            gpu_instance_id: NO_INSTANCE,
            compute_instance_id: NO_INSTANCE,
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    #[test]
    fn an_xid_carries_its_meaning_and_action_from_the_catalogue() {
        let e = to_event(&heard("GPU-a", EventTypes::CRITICAL_XID_ERROR, 79));
        assert_eq!((e.kind, e.xid, e.action), (DriverEventKind::Xid, Some(79), Some(XidAction::RebootNode)));
        assert_eq!(e.mnemonic.as_deref(), Some("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"));
        assert_eq!(e.severity, Severity::Critical);
        assert_eq!(e.gpu_instance_id, None, "0xFFFFFFFF: the whole device");
        let unknown = to_event(&heard("GPU-a", EventTypes::CRITICAL_XID_ERROR, 4242));
        assert_eq!((unknown.xid, unknown.meaning, unknown.action), (Some(4242), None, Some(XidAction::Unknown)));
        let dbe = to_event(&heard("GPU-a", EventTypes::DOUBLE_BIT_ECC_ERROR, 0));
        assert_eq!((dbe.kind, dbe.severity), (DriverEventKind::EccDoubleBit, Severity::Critical));
        let mut mig = heard("GPU-a", EventTypes::CRITICAL_XID_ERROR, 13);
        (mig.gpu_instance_id, mig.compute_instance_id) = (3, 0);
        assert_eq!((to_event(&mig).gpu_instance_id, to_event(&mig).compute_instance_id), (Some(3), Some(0)));
    }

    #[test]
    fn each_gpu_keeps_its_newest_events_and_counts_few_xids_apart() {
        let mut log = Log::default();
        let many: Vec<Heard> =
            (0..40u64).map(|i| heard("GPU-a", EventTypes::CRITICAL_XID_ERROR, 100 + i % 20)).collect();
        log.add(many);
        log.add(vec![heard("GPU-b", EventTypes::SINGLE_BIT_ECC_ERROR, 0)]);
        let mut gpus = vec![Gpu::blank(0, crate::model::GpuState::Ok), Gpu::blank(1, crate::model::GpuState::Ok)];
        gpus[0].uuid = Some("GPU-a".into());
        gpus[1].uuid = Some("GPU-b".into());
        log.apply(&mut gpus);
        assert_eq!(gpus[0].driver_events.len(), MAX_DRIVER_EVENTS, "the newest kept");
        assert_eq!(gpus[0].driver_events.last().unwrap().xid, Some(119));
        let counts = &gpus[0].xid_counts;
        assert_eq!(counts.iter().filter(|c| c.xid.is_some()).count(), MAX_XID_COUNTS);
        assert_eq!(counts.iter().map(|c| c.count).sum::<u64>(), 40, "none lost");
        assert_eq!(counts.iter().find(|c| c.xid.is_none()).map(|c| c.count), Some(8), "Xids 116-119, twice each");
        assert_eq!(gpus[1].driver_events.len(), 1);
        assert!(gpus[1].xid_counts.is_empty(), "an ECC event is not an Xid");
    }

    proptest::proptest! {
        /// Whatever the driver hands over (any type bits, any data, any
        /// instance ids), an event is made without a panic, is an Xid
        /// exactly when nvml.h's Xid bit is set, and the log stays bounded.
        #[test]
        fn any_event_the_driver_delivers_is_taken_safely(
            events in proptest::collection::vec((proptest::prelude::any::<u64>(), proptest::prelude::any::<u64>(),
                proptest::prelude::any::<u32>()), 0..80),
        ) {
            let mut log = Log::default();
            let heard: Vec<Heard> = events
                .iter()
                .map(|&(types, data, gi)| Heard { gpu_instance_id: gi, ..heard("GPU-p", EventTypes::from_bits_retain(types), data) })
                .collect();
            for h in &heard {
                let e = to_event(h);
                let is_xid = h.types & EventTypes::CRITICAL_XID_ERROR.bits() != 0;
                proptest::prop_assert_eq!(e.kind == DriverEventKind::Xid, is_xid);
                proptest::prop_assert_eq!(e.gpu_instance_id, (h.gpu_instance_id != NO_INSTANCE).then_some(h.gpu_instance_id));
                if let Some(action) = e.action {
                    proptest::prop_assert_eq!(e.severity, xid::severity(action));
                }
            }
            let xids = heard.iter().filter(|h| h.types & EventTypes::CRITICAL_XID_ERROR.bits() != 0).count() as u64;
            log.add(heard);
            let mut gpus = vec![Gpu::blank(0, crate::model::GpuState::Ok)];
            gpus[0].uuid = Some("GPU-p".into());
            log.apply(&mut gpus);
            proptest::prop_assert!(gpus[0].driver_events.len() <= MAX_DRIVER_EVENTS);
            proptest::prop_assert!(gpus[0].xid_counts.len() <= MAX_XID_COUNTS + 1);
            proptest::prop_assert_eq!(gpus[0].xid_counts.iter().map(|c| c.count).sum::<u64>(), xids);
        }
    }
}
