//! GPUs through NVML (nvml-wrapper). NVML is initialised once and kept;
//! static facts are read once per device; after a failure the library is
//! loaded again with backoff, while the rest of the snapshot goes on.

mod backoff;
mod boards;
mod calls;
mod device;
mod events;
mod fields;
mod gpm;
mod library;
mod link;
mod mig;
mod nvlink;
mod pcie;
mod process_util;
mod processes;
mod settings;
mod sized;
mod slow;
mod wanted;
mod xid;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::{GpuIdentity, GpuProcess, GpuSample, GpuSource, OnScreen};
use crate::model::{
    ActivityUnavailable, DeviceIds, Driver, Gpu, GpuSelector, GpuState, MigDevice, SourceStatus, select_gpus,
    select_migs,
};
use crate::util::spread::on_threads;
use backoff::Backoff;
use boards::Boards;
pub use calls::{Call, Calls};
use device::{DeviceStatic, read_gpu};
pub use library::{DEFAULT_LIBRARY, InitError, LibrarySpec};
use mig::MigStatics;
use nvlink::Links;
use process_util::ProcessUtil;
use processes::ProcessMerger;
pub use wanted::Wanted;

pub struct NvmlSource {
    spec: LibrarySpec,
    selectors: Vec<GpuSelector>,
    /// The GPUs the selectors chose, by UUID, once they have been applied:
    /// `--gpus 0` keeps meaning the GPU that was 0 at start when GPUs come
    /// and go. `None` until then, and when every GPU is watched.
    chosen: Option<Chosen>,
    /// Boxed: nvml-wrapper keeps every NVML function it knows in one
    /// struct of several kilobytes, which would otherwise be copied through
    /// the frames that move this source.
    nvml: Option<Box<Nvml>>,
    /// Every device NVML lists, by index; `watched` are the selected ones.
    all: Vec<DeviceStatic>,
    watched: Vec<DeviceStatic>,
    /// Set when a reading failed: the next tick checks, two calls per
    /// device, that each index still holds the GPU it held.
    suspect: bool,
    driver: Driver,
    backoff: Backoff,
    last_error: Option<String>,
    /// How long the last tick that read the slow readings took: where it
    /// was quick, the next such tick is not spread over threads.
    slow_tick: Option<Duration>,
    /// Whether such ticks may be spread over threads at all.
    spread: bool,
    /// NVML's process names, kept per PID while the PID stays on a GPU.
    names: HashMap<u32, Option<String>>,
    /// MIG devices' statics, by MIG UUID.
    mig: MigStatics,
    calls: Calls,
    /// The newest per-process utilisation samples per device.
    process_util: ProcessUtil,
    /// Folds the devices' process lists into one entry per PID.
    merger: ProcessMerger,
    /// Every device's identity as the last tick gave it.
    identities: Arc<[GpuIdentity]>,
    /// NVLink counters at the last tick, for rates.
    links: Links,
    /// How long the last tick's per-process samples took on one thread:
    /// once they take a PCIe window's length, the window spans them.
    samples_took: Option<Duration>,
    /// The boot's kept maximum clocks (`boards.rs`): `None` until a GPU
    /// first wants them after NVML (re)starts, then whether they can be.
    boards: Option<Option<Boards>>,
    /// Counts ticks: which watched GPU's handle this tick asks NVML for.
    handle_turn: usize,
    /// What the output shows, and so asks of the driver (`asking`).
    wanted: Wanted,
    /// What the dashboard has on screen of the readings it asks only
    /// while shown (`GpuSource::show`): asked on top of `wanted`.
    shown: OnScreen,
    /// The activity counters' kept samples (`gpm.rs`).
    gpm: gpm::Gpm,
    /// The thread that hears the driver's events (`events.rs`), started
    /// once the source knows its GPUs, where `wanted` asks for them.
    events: Option<events::Listener>,
    /// Each GPU's events and Xid counts so far.
    event_log: events::Log,
}

/// Selected GPUs: by UUID, or by index where the UUID could not be read.
#[derive(Debug, Clone)]
struct Chosen {
    uuids: Vec<String>,
    indices: Vec<u32>,
    /// GPUs chosen only for MIG devices named by `--gpus MIG-…`: the
    /// parent's UUID and those MIG devices' UUIDs, the only ones shown.
    migs: HashMap<String, Vec<String>>,
}

impl Chosen {
    /// Adds the parents of the MIG devices the selectors name; a parent
    /// not chosen by itself shows only those MIG devices.
    fn add_migs(
        &mut self,
        selectors: &[GpuSelector],
        migs: &[(u32, Option<String>)],
        all: &[DeviceStatic],
    ) -> Result<(), crate::model::SelectError> {
        let ids: Vec<(u32, Option<&str>)> = migs.iter().map(|(i, u)| (*i, u.as_deref())).collect();
        for pos in select_migs(selectors, &ids)? {
            let (parent, Some(mig)) = &migs[pos] else { continue };
            let Some(parent_uuid) = all.iter().find(|d| d.index == *parent).and_then(|d| d.uuid.clone()) else {
                continue;
            };
            if self.uuids.contains(&parent_uuid) && !self.migs.contains_key(&parent_uuid) {
                continue;
            }
            if !self.uuids.contains(&parent_uuid) {
                self.uuids.push(parent_uuid.clone());
            }
            self.migs.entry(parent_uuid).or_default().push(mig.clone());
        }
        Ok(())
    }

    /// The MIG devices to show of the GPU `uuid`; `None`: all of them.
    fn migs_of(&self, uuid: Option<&str>) -> Option<&[String]> {
        uuid.and_then(|u| self.migs.get(u)).map(Vec::as_slice)
    }

    fn keeps(&self, d: &DeviceStatic) -> bool {
        match &d.uuid {
            Some(u) => self.uuids.contains(u),
            None => self.indices.contains(&d.index),
        }
    }
}

impl NvmlSource {
    /// Loads and initialises NVML now, so that a missing driver or a
    /// selector matching no GPU is reported before any output starts.
    pub fn open(spec: LibrarySpec, selectors: Vec<GpuSelector>) -> Result<Self, InitError> {
        Self::open_tracked(spec, selectors, Calls::default())
    }

    /// `open`, saying through `calls` which NVML call is in progress.
    pub fn open_tracked(spec: LibrarySpec, selectors: Vec<GpuSelector>, calls: Calls) -> Result<Self, InitError> {
        let mut source = Self::unopened(spec, selectors);
        source.calls = calls;
        source.init()?;
        Ok(source)
    }

    /// A source that has not tried NVML yet: its first sample does, and a
    /// failure becomes part of that snapshot.
    pub fn unopened(spec: LibrarySpec, selectors: Vec<GpuSelector>) -> Self {
        Self {
            driver: Driver { library: Some(spec.describe()), ..Driver::default() },
            spec,
            selectors,
            chosen: None,
            nvml: None,
            all: Vec::new(),
            watched: Vec::new(),
            suspect: false,
            backoff: Backoff::default(),
            last_error: None,
            slow_tick: None,
            spread: true,
            names: HashMap::new(),
            mig: MigStatics::default(),
            calls: Calls::default(),
            process_util: ProcessUtil::default(),
            merger: ProcessMerger::default(),
            identities: Arc::default(),
            links: Links::default(),
            samples_took: None,
            boards: None,
            handle_turn: 0,
            wanted: Wanted::ALL,
            shown: OnScreen::NONE,
            gpm: gpm::Gpm::default(),
            events: None,
            event_log: events::Log::default(),
        }
    }

    /// Keeps every reading on the caller's thread. For the dashboard: it
    /// shows its first tick whenever it comes, and glibc keeps each ended
    /// thread's descriptor and TLS pages for reuse, 64 KiB resident for the
    /// eight threads of an 8-GPU node.
    pub fn on_one_thread(mut self) -> Self {
        self.spread = false;
        self
    }

    /// Asks the driver only for what the output shows (`wanted.rs`); the
    /// rest stays unknown. Without the maximum clocks, for instance, an
    /// 8-GPU node's first tick after boot costs 45 ms less of the driver's
    /// CPU, and without the per-process samples every tick of a busy one
    /// 20 ms less.
    pub fn asking(mut self, wanted: Wanted) -> Self {
        self.wanted = wanted;
        // Devices already listed (a source opened before this) are set
        // again, as `set_devices` prepares them for what is asked.
        let all = std::mem::take(&mut self.all);
        self.set_devices(all);
        self
    }

    fn init(&mut self) -> Result<(), InitError> {
        let nvml = self.calls.track("nvmlInit_v2", None, || library::load_aside(&self.spec))?;
        let all = device::enumerate(&nvml, &self.calls, &self.all).map_err(InitError::Devices)?;
        if self.chosen.is_none() && !self.selectors.is_empty() {
            let identities: Vec<_> = all.iter().map(DeviceStatic::identity).collect();
            let ids: Vec<DeviceIds<'_>> =
                identities.iter().map(|d| (d.index, d.uuid.as_deref(), d.pci_bus_id.as_deref())).collect();
            let picked: Vec<&DeviceStatic> = select_gpus(&self.selectors, &ids)?.into_iter().map(|p| &all[p]).collect();
            let mut chosen = Chosen {
                uuids: picked.iter().filter_map(|d| d.uuid.clone()).collect(),
                indices: picked.iter().filter(|d| d.uuid.is_none()).map(|d| d.index).collect(),
                migs: HashMap::new(),
            };
            if self.selectors.iter().any(|s| matches!(s, GpuSelector::MigPrefix(_))) {
                let indices: Vec<u32> = all.iter().map(|d| d.index).collect();
                chosen.add_migs(&self.selectors, &mig::all_uuids(&nvml, &indices, &self.calls), &all)?;
            }
            self.chosen = Some(chosen);
        }
        self.driver = self.calls.track("nvmlSystemGetDriverVersion", None, || library::read_driver(&nvml, &self.spec));
        self.set_devices(all);
        self.boards = None;
        self.nvml = Some(nvml);
        self.backoff.reset();
        self.last_error = None;
        Ok(())
    }

    fn set_devices(&mut self, mut all: Vec<DeviceStatic>) {
        if !self.wanted.max_clocks {
            all.iter_mut().for_each(DeviceStatic::forgo_max_clocks);
        }
        self.watched = all.iter().filter(|d| self.chosen.as_ref().is_none_or(|c| c.keeps(d))).cloned().collect();
        self.all = all;
        self.suspect = false;
    }

    /// Gives up a session the driver has turned against (unloaded, or
    /// upgraded under us): the next samples load NVML again, with backoff.
    fn drop_session(&mut self, error: &NvmlError) {
        if let Some(nvml) = self.nvml.take() {
            self.gpm.free_all(&nvml);
        }
        // Its session likely failed too: a new one starts with the next.
        self.events = None;
        self.last_error = Some(format!("NVML stopped answering ({error}); retrying"));
        self.backoff.failed();
    }

    fn ensure_open(&mut self) {
        if self.nvml.is_some() || !self.backoff.due() {
            return;
        }
        if let Err(e) = self.init() {
            self.last_error = Some(e.to_string());
            self.backoff.failed();
        }
    }

    /// GPUs come and go (a reset, hot-plug, a driver reload): the count is
    /// read every tick; when it differs, or a reading failed last tick, or
    /// (see `read`) NVML hands out another handle for the index asked, the
    /// UUIDs are read, and a change re-enumerates. Readings go through each
    /// GPU's own handle, so a UUID is never shown with another GPU's
    /// readings, and a GPU that arrives is shown from its first tick.
    fn follow_devices(&mut self) {
        let Some(nvml) = self.nvml.as_deref() else { return };
        let count = self.calls.track("nvmlDeviceGetCount", None, || nvml.device_count());
        let count = match count {
            Ok(n) => n,
            // Cheap, and the one call that fails when the session as a
            // whole has gone bad, even on a machine with no GPUs to query.
            Err(e) if session_broken(&e) => return self.drop_session(&e),
            Err(_) => return,
        };
        let changed = u32::try_from(self.all.len()).ok() != Some(count)
            || (self.suspect && !device::same_devices(nvml, &self.calls, &self.all));
        self.suspect = false;
        if changed {
            match device::enumerate(nvml, &self.calls, &self.all) {
                Ok(all) => self.set_devices(all),
                Err(e) if session_broken(&e) => self.drop_session(&e),
                Err(_) => self.suspect = true,
            }
        }
    }

    /// The watched GPUs' readings and processes; `None` when the index
    /// asked this tick has another handle than it had, unless
    /// `adopt_handles` (every index asked) and the device behind it still
    /// has the UUID it had, or when a kept handle names no device now.
    /// The tick is planned first (`plan`), then run (`run`).
    fn read(&mut self, adopt_handles: bool) -> Option<(Vec<Gpu>, Vec<GpuProcess>)> {
        // Out of `self` for the tick, so that the handles, which borrow
        // it, can live beside the calls that change the rest of `self`.
        let nvml = self.nvml.take()?;
        let read = self.plan(&nvml, adopt_handles).and_then(|plan| self.run(&nvml, &plan));
        self.nvml = Some(nvml);
        read
    }

    /// What this tick does, decided before any GPU is read: each watched
    /// GPU's handle (`handles`), whether the slow readings are due, whether
    /// they are spread over threads, and whether the per-process samples
    /// fill the PCIe window. `None` where a handle moved.
    fn plan<'n>(&mut self, nvml: &'n Nvml, adopt_handles: bool) -> Option<TickPlan<'n>> {
        let (handles, kept) = self.handles(nvml, adopt_handles)?;
        let slow = self.watched.iter().any(DeviceStatic::slow_due);
        let heavy =
            self.spread && slow && self.watched.len() > 1 && self.slow_tick.is_none_or(|took| took >= SPREAD_FROM);
        // Per-process samples that take a window's length anyway are read
        // inside it, and the wait is gone; other ticks wait first, and so
        // do those that read the slow readings, whose maximum clocks alone
        // (45 ms on 8 GPUs) would stretch a window past `WRAP_SAFE`.
        let spans_samples = !slow && self.samples_took.is_some_and(|took| took >= pcie::WINDOW);
        Some(TickPlan { handles, kept, slow, heavy, spans_samples })
    }

    /// Every handle first: one that moved ends the read (`None`) before any
    /// GPU is asked anything. Each tick asks NVML for one index's handle,
    /// in turn, and reads the others through the handles they had: a GPU
    /// that left or came changes the count, read first (`follow_devices`),
    /// and one that is lost says so through its own handle; GPUs that only
    /// swapped places are found within as many ticks as there are GPUs,
    /// each shown meanwhile with its own readings under its old index.
    /// With each handle, whether it was kept from an earlier tick.
    fn handles<'n>(&mut self, nvml: &'n Nvml, adopt_handles: bool) -> Option<(Vec<Handle<'n>>, Vec<bool>)> {
        let calls = &self.calls;
        let asked = self.handle_turn % self.watched.len().max(1);
        self.handle_turn = self.handle_turn.wrapping_add(1);
        let mut handles = Vec::with_capacity(self.watched.len());
        let mut kept = Vec::with_capacity(self.watched.len());
        for (at, st) in self.watched.iter().enumerate() {
            let held = st.kept(nvml).filter(|_| at != asked && !adopt_handles);
            let asked_now = held.is_none();
            kept.push(!asked_now);
            let dev = held.map_or_else(
                || calls.track("nvmlDeviceGetHandleByIndex", Some(st.index), || nvml.device_by_index(st.index)),
                Ok,
            );
            // Only a handle just asked for can differ from the one kept.
            if asked_now
                && let Ok(dev) = &dev
                && st.moved(dev)
                && !(adopt_handles && st.same_uuid(dev, calls))
            {
                return None;
            }
            handles.push(dev);
        }
        Some((handles, kept))
    }

    /// Reads the GPUs as `plan` says: the PCIe windows, each GPU's own
    /// readings (`first_pass`), the maximum clocks kept for the boot, the
    /// lists (`read_lists`), the per-process samples (`read_samples`).
    /// `None` where a handle kept from an earlier tick names no device now.
    fn run(&mut self, nvml: &Nvml, plan: &TickPlan<'_>) -> Option<(Vec<Gpu>, Vec<GpuProcess>)> {
        let window = self.pcie_window(plan);
        let started = Instant::now();
        if self.boards.is_none() && self.watched.iter().any(DeviceStatic::needs_max_clocks) {
            let file = library::loaded_file(&self.spec);
            self.boards = Some(file.and_then(|f| Boards::open(&f, self.driver.driver_version.as_deref())));
        }
        let asked = self.asked();
        let firsts = first_pass(
            &mut self.watched,
            &plan.handles,
            &plan.kept,
            &self.calls,
            plan.heavy,
            self.boards.as_ref().and_then(Option::as_ref),
            asked,
        )?;
        // Only a tick that read the slow readings can have asked the driver
        // for maximum clocks.
        if plan.slow
            && let Some(Some(boards)) = &mut self.boards
        {
            self.watched.iter_mut().for_each(|st| st.keep_max_clocks(boards));
            boards.save();
        }
        let (mut gpus, sampled) = self.read_lists(nvml, &plan.handles, firsts);
        self.read_samples(sampled, window, plan, &mut gpus);
        if plan.slow {
            self.slow_tick = Some(started.elapsed());
        }
        let keys: Vec<String> =
            self.watched.iter().map(|st| st.uuid.clone().unwrap_or_else(|| st.index.to_string())).collect();
        self.process_util.retain(&keys);
        self.links.retain(&keys);
        self.gpm.retain(nvml, &keys);
        if self.wanted.activity_wait {
            self.second_activity_sample(nvml, &plan.handles, &mut gpus);
        }
        Some((gpus, self.merger.finish(&mut self.names)))
    }

    /// Opens the PCIe windows (`open_windows`) and, unless the per-process
    /// samples are to fill them, waits them out and closes them now. When
    /// the windows opened, where they are left open for the samples. None
    /// where the rates are not asked this tick.
    fn pcie_window(&mut self, plan: &TickPlan<'_>) -> Option<Instant> {
        if !self.asked().pcie {
            return None;
        }
        let window = open_windows(&self.calls, &plan.handles, &mut self.watched);
        if !plan.spans_samples
            && let Some(opened) = window
        {
            std::thread::sleep(pcie::WINDOW.saturating_sub(opened.elapsed()));
            close_windows(&self.calls, &plan.handles, &mut self.watched);
        }
        window.filter(|_| plan.spans_samples)
    }

    /// What each GPU that answered lists: its MIG devices, its processes
    /// (folded by the merger), its NVLink states; and, where they are
    /// wanted, its per-process samples to read, for `read_samples`.
    fn read_lists<'d, 'n>(
        &mut self,
        nvml: &Nvml,
        handles: &'d [Handle<'n>],
        firsts: Vec<Gpu>,
    ) -> (Vec<Gpu>, Vec<Sampled<'d, 'n>>) {
        let calls = &self.calls;
        let mut gpus = Vec::with_capacity(self.watched.len());
        let mut sampled = Vec::new();
        self.merger.begin();
        for ((st, dev), mut gpu) in self.watched.iter_mut().zip(handles).zip(firsts) {
            if let Ok(dev) = dev
                && gpu.state == GpuState::Ok
            {
                let mut migs = match gpu.mig_mode {
                    Some(m) if m.current => self.mig.enumerate(nvml, dev, st.index, calls),
                    _ => Vec::new(),
                };
                let only = self.chosen.as_ref().and_then(|c| c.migs_of(st.uuid.as_deref()));
                if let Some(only) = only {
                    migs.retain(|m| m.entry.uuid.as_ref().is_some_and(|u| only.contains(u)));
                }
                gpu.mig_devices = migs.iter().map(|m| m.entry.clone()).collect();
                let listed = self.merger.add_device(st.index, dev, &migs, only.is_none(), calls);
                let key = st.uuid.clone().unwrap_or_else(|| st.index.to_string());
                gpu.nvlink = self.links.read(key.clone(), st.index, dev, calls);
                if self.wanted.activity {
                    read_activity(&mut self.gpm, nvml, &key, st.index, dev, &mut gpu, calls);
                } else {
                    gpu.activity_unavailable = Some(ActivityUnavailable::NotRead);
                    for m in &mut gpu.mig_devices {
                        m.activity_unavailable = Some(ActivityUnavailable::NotRead);
                    }
                }
                if self.wanted.process_samples {
                    let batch = self.process_util.take(&key);
                    sampled.push(Sampled { at: gpus.len(), key, index: st.index, dev, idle: listed == 0, batch });
                }
            }
            self.suspect |= gpu.error.is_some();
            gpus.push(gpu);
        }
        (gpus, sampled)
    }

    /// Per-process samples, the dearest call of a tick, come last: inside
    /// the PCIe window still open (`samples_in_window`), else on threads
    /// too in a heavy tick, once the lists say which GPUs run processes.
    /// Each GPU's go into `gpus`, and its batch back into `process_util`.
    fn read_samples(
        &mut self,
        sampled: Vec<Sampled<'_, '_>>,
        window: Option<Instant>,
        plan: &TickPlan<'_>,
        gpus: &mut [Gpu],
    ) {
        let calls = &self.calls;
        let samples = match window {
            Some(opened) => {
                let (samples, took) = samples_in_window(sampled, calls, opened, &plan.handles, &mut self.watched);
                self.samples_took = Some(took);
                for (gpu, st) in gpus.iter_mut().zip(&mut self.watched) {
                    if let Some(pcie) = st.pcie.take_windowed() {
                        gpu.pcie = pcie;
                    }
                }
                samples
            }
            None => {
                let begun = Instant::now();
                let samples = on_threads(sampled, plan.heavy, |mut job| {
                    let samples = job.read(calls);
                    (job, samples)
                });
                if !plan.heavy {
                    self.samples_took = Some(begun.elapsed());
                }
                samples
            }
        };
        for (job, samples) in samples {
            if let Some(gpu) = gpus.get_mut(job.at) {
                gpu.process_utilization = samples;
            }
            self.process_util.put(job.key, job.batch);
        }
    }
}

impl Drop for NvmlSource {
    /// The kept activity samples are NVML's allocations, freed through the
    /// session that made them before it shuts down.
    fn drop(&mut self) {
        if let Some(nvml) = self.nvml.as_deref() {
            self.gpm.free_all(nvml);
        }
    }
}

impl NvmlSource {
    /// A one-shot's second activity sample: the first was taken with the
    /// GPU's lists, the rest of the tick's readings ran meanwhile, and what
    /// is left of the 0.1 s NVML needs between the two is waited out here.
    fn second_activity_sample(&mut self, nvml: &Nvml, handles: &[Handle<'_>], gpus: &mut [Gpu]) {
        let first = |g: &Gpu| {
            g.activity_unavailable == Some(ActivityUnavailable::FirstSample)
                || g.mig_devices.iter().any(|m| m.activity_unavailable == Some(ActivityUnavailable::FirstSample))
        };
        if !gpus.iter().any(first) {
            return;
        }
        if let Some(youngest) = self.gpm.youngest() {
            // A millisecond past the gap: "more than 100 ms" (nvml.h).
            let due = youngest + gpm::MIN_GAP + Duration::from_millis(1);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        for (gpu, (st, dev)) in gpus.iter_mut().zip(self.watched.iter().zip(handles)) {
            if let Ok(dev) = dev
                && first(gpu)
            {
                let key = st.uuid.clone().unwrap_or_else(|| st.index.to_string());
                read_activity(&mut self.gpm, nvml, &key, st.index, dev, gpu, &self.calls);
            }
        }
    }
}

/// The GPU's activity and its GPU instances', each instance read once for
/// all its compute instances.
fn read_activity(
    gpm: &mut gpm::Gpm,
    nvml: &Nvml,
    key: &str,
    index: u32,
    dev: &Device<'_>,
    gpu: &mut Gpu,
    calls: &Calls,
) {
    (gpu.activity, gpu.activity_unavailable) = gpm.read(nvml, key, index, dev, None, calls);
    let mut read: Vec<(u32, gpm::Reading)> = Vec::new();
    for m in &mut gpu.mig_devices {
        let Some(gi) = m.gpu_instance_id else { continue };
        let reading = match read.iter().find(|(id, _)| *id == gi) {
            Some((_, r)) => r.clone(),
            None => {
                let r = gpm.read(nvml, key, index, dev, Some(gi), calls);
                read.push((gi, r.clone()));
                r
            }
        };
        (m.activity, m.activity_unavailable) = reading;
    }
}

/// A watched GPU's handle for this tick, or why NVML gave none.
type Handle<'n> = Result<Device<'n>, NvmlError>;

/// One tick's plan (`NvmlSource::plan`).
struct TickPlan<'n> {
    /// Each watched GPU's handle, and whether it was kept from an earlier
    /// tick (else just asked of NVML).
    handles: Vec<Handle<'n>>,
    kept: Vec<bool>,
    /// Some GPU's slow readings are due (the first tick, then every 10 s).
    slow: bool,
    /// The GPUs' readings and samples are spread over threads (`first_pass`).
    heavy: bool,
    /// The per-process samples are read inside the PCIe window, which then
    /// needs no wait of its own.
    spans_samples: bool,
}

/// Each GPU's own readings (`read_gpu`), or what its failed handle says.
/// A `heavy` tick, one that reads the slow readings too (the first, so
/// every one-shot, and one every ten seconds), spreads the GPUs over the
/// CPUs (`util::spread`), here and for the per-process samples: on an 8-GPU node
/// the maximum clocks alone are 32 calls of about 1.4 ms of the driver's
/// CPU each, and the samples 8 of 2.6 ms (tests/gpu/nvml_costs.py on an
/// H100). NVIDIA's documentation, as nvml-wrapper quotes it: "NVML is
/// thread-safe so it is safe to make simultaneous NVML calls from
/// multiple threads." Whether a driver then serves GPUs side by side was
/// not measured: the one GPU lent was alone. Other ticks stay on the
/// poller's thread, where starting eight threads would cost more CPU than
/// the ordinary readings they would spread, and so do heavy ticks after
/// one that took less than `SPREAD_FROM`, and all of the dashboard's
/// (`NvmlSource::on_one_thread`).
///
/// `None` where a handle `kept` from an earlier tick names no device now.
fn first_pass(
    watched: &mut [DeviceStatic],
    handles: &[Result<Device<'_>, NvmlError>],
    kept: &[bool],
    calls: &Calls,
    heavy: bool,
    boards: Option<&Boards>,
    wanted: Wanted,
) -> Option<Vec<Gpu>> {
    let jobs: Vec<_> = watched.iter_mut().zip(handles).zip(kept).collect();
    let gpus = on_threads(jobs, heavy, |((st, dev), &kept)| match dev {
        Ok(dev) => {
            st.adopt(dev);
            st.refresh(dev, calls);
            if let Some(boards) = boards {
                st.seed_max_clocks(dev, boards, calls);
            }
            read_gpu(dev, st, calls, kept, wanted)
        }
        Err(NvmlError::GpuLost) => Some(st.apply(Gpu::blank(st.index, GpuState::Lost))),
        Err(e) => {
            let mut gpu = st.apply(Gpu::blank(st.index, GpuState::Error));
            gpu.error = Some(e.to_string());
            Some(gpu)
        }
    });
    gpus.into_iter().collect()
}

/// A tick that read the slow readings in less (a driver that answers in
/// microseconds, as the simulator's does by default) gains less from
/// threads than starting them costs.
const SPREAD_FROM: Duration = Duration::from_millis(5);

/// One GPU's per-process samples to read, and where they go.
struct Sampled<'d, 'n> {
    /// The GPU's position in this tick's list.
    at: usize,
    key: String,
    index: u32,
    dev: &'d Device<'n>,
    idle: bool,
    batch: process_util::Batch,
}

impl Sampled<'_, '_> {
    fn read(&mut self, calls: &Calls) -> Option<Vec<crate::model::ProcessUtilization>> {
        self.batch.read(self.index, self.dev, calls, self.idle)
    }
}

/// A GPU's per-process samples, read.
type SampledRead<'d, 'n> = (Sampled<'d, 'n>, Option<Vec<crate::model::ProcessUtilization>>);

/// Opens the windows 32-bit PCIe counters want (see pcie.rs): each such
/// GPU is read now, and once more `pcie::WINDOW` later (`close_windows`),
/// all of them sharing one wait. When any opened.
fn open_windows(
    calls: &Calls,
    handles: &[Result<Device<'_>, NvmlError>],
    watched: &mut [DeviceStatic],
) -> Option<Instant> {
    let opened = Instant::now();
    let mut any = false;
    for (st, dev) in watched.iter_mut().zip(handles) {
        if let Ok(dev) = dev
            && st.pcie.wants_window()
        {
            any |= st.pcie.open(dev, calls, st.index);
        }
    }
    any.then_some(opened)
}

fn close_windows(calls: &Calls, handles: &[Result<Device<'_>, NvmlError>], watched: &mut [DeviceStatic]) {
    for (st, dev) in watched.iter_mut().zip(handles) {
        if let Ok(dev) = dev
            && st.pcie.is_open()
        {
            st.pcie.close(dev, calls, st.index);
        }
    }
}

/// The per-process samples, one GPU after another, with the PCIe windows
/// open since before the tick's other readings: they close as soon as
/// `pcie::WINDOW` has passed, between two GPUs' samples (so a window
/// outlasts its 20 ms by one call at most, 2.5 ms on an H100, and stays
/// within `pcie.rs`'s `WRAP_SAFE`), or after the last, with what is left
/// of the wait. On an 8-GPU node of busy GPUs the samples alone are about
/// 20 ms of the driver's CPU (tests/gpu/nvml_costs.py): the tick's wait,
/// and the wake-up after it, are gone. Also how long the samples took,
/// the windows aside.
fn samples_in_window<'d, 'n>(
    jobs: Vec<Sampled<'d, 'n>>,
    calls: &Calls,
    opened: Instant,
    handles: &[Result<Device<'_>, NvmlError>],
    watched: &mut [DeviceStatic],
) -> (Vec<SampledRead<'d, 'n>>, Duration) {
    let mut took = Duration::ZERO;
    let mut open = true;
    let mut out = Vec::with_capacity(jobs.len());
    for mut job in jobs {
        if open && opened.elapsed() >= pcie::WINDOW {
            close_windows(calls, handles, watched);
            open = false;
        }
        let begun = Instant::now();
        let samples = job.read(calls);
        took += begun.elapsed();
        out.push((job, samples));
    }
    if open {
        std::thread::sleep(pcie::WINDOW.saturating_sub(opened.elapsed()));
        close_windows(calls, handles, watched);
    }
    (out, took)
}

impl GpuSource for NvmlSource {
    fn sample(&mut self) -> GpuSample {
        let made = self.calls.made();
        let mut sample = self.sample_uncounted();
        sample.calls = Some(self.calls.made().saturating_sub(made));
        sample
    }

    /// Asked once per PID while it stays on a GPU, the answer (a name or
    /// none) kept in `names` for `sample` to hand out.
    fn process_names(&mut self, pids: &[u32]) -> (Vec<Option<String>>, u64) {
        let made = self.calls.made();
        let names = pids
            .iter()
            .map(|&pid| match (self.names.get(&pid), self.nvml.as_deref()) {
                (Some(known), _) => known.clone(),
                (None, Some(nvml)) => {
                    let name = processes::driver_name(nvml, pid, &self.calls);
                    self.names.insert(pid, name.clone());
                    name
                }
                (None, None) => None,
            })
            .collect();
        (names, self.calls.made().saturating_sub(made))
    }

    fn show(&mut self, shown: OnScreen) {
        self.shown = shown;
    }
}

impl NvmlSource {
    /// What this tick asks: what the output always shows, and what the
    /// dashboard shows now.
    fn asked(&self) -> Wanted {
        self.wanted.showing(self.shown)
    }

    fn sample_uncounted(&mut self) -> GpuSample {
        self.ensure_open();
        self.follow_devices();
        let mut read = self.read(false);
        // Another device at some index: check the UUIDs now, so this tick
        // already shows each GPU with its own readings. Twice, for GPUs
        // that change again while being enumerated.
        for _ in 0..2 {
            if read.is_some() || self.nvml.is_none() {
                break;
            }
            self.suspect = true;
            self.follow_devices();
            read = self.read(true);
        }
        let Some((mut gpus, processes)) = read else {
            let error = match (&self.nvml, &self.last_error) {
                (Some(_), _) => "the GPUs changed while they were being read; reading them again next tick".into(),
                (None, Some(e)) => e.clone(),
                (None, None) => "NVML is not initialised".into(),
            };
            self.suspect = true;
            return GpuSample {
                driver: self.driver.clone(),
                status: SourceStatus::failed(error),
                ..GpuSample::default()
            };
        };
        // Every GPU NVML lists, watched or not: CUDA sees them all. Made
        // again only when one of them changed: otherwise each tick made
        // two dozen strings of eight GPUs' names, UUIDs and bus ids.
        if !same_identities(&self.identities, &self.all, &gpus) {
            self.identities = (self.all.iter().map(DeviceStatic::identity))
                .map(|mut id| {
                    id.mig_devices = mig_devices_of(&gpus, id.index).to_vec();
                    id
                })
                .collect();
        }
        let all_gpus = Arc::clone(&self.identities);
        let events = self.hear(&mut gpus);
        GpuSample {
            driver: self.driver.clone(),
            gpus,
            all_gpus,
            processes,
            status: SourceStatus::ok(),
            calls: None,
            events,
        }
    }

    /// The driver's events heard since the last tick, into each GPU's
    /// entry, and whether they are heard. The listener starts with the
    /// first tick that knows the watched GPUs, and again only when they
    /// change (a GPU came or went) or NVML was loaded again: a listener
    /// that gave up says why in every snapshot and is not retried.
    fn hear(&mut self, gpus: &mut [Gpu]) -> Option<crate::model::EventsStatus> {
        if !self.wanted.events {
            return None;
        }
        let uuids = || self.watched.iter().filter_map(|d| d.uuid.as_deref());
        if self.events.as_ref().is_none_or(|l| !l.watches(uuids())) {
            let watched = uuids().map(str::to_owned).collect();
            self.events = Some(events::Listener::start(&self.spec, watched));
        }
        let (heard, status) = self.events.as_ref()?.take();
        self.event_log.add(heard);
        self.event_log.apply(gpus);
        Some(status)
    }
}

/// The MIG devices this tick read on GPU `index`: none where it is not
/// watched.
fn mig_devices_of(gpus: &[Gpu], index: u32) -> &[MigDevice] {
    gpus.iter().find(|g| g.index == index).map_or(&[], |g| &g.mig_devices)
}

/// Whether `kept` is what `DeviceStatic::identity` and this tick's MIG
/// devices would make of `all` now.
fn same_identities(kept: &[GpuIdentity], all: &[DeviceStatic], gpus: &[Gpu]) -> bool {
    kept.len() == all.len()
        && kept.iter().zip(all).all(|(id, st)| st.identifies(id) && id.mig_devices == mig_devices_of(gpus, id.index))
}

/// Errors that mean the NVML session, not one device, is unusable.
fn session_broken(e: &NvmlError) -> bool {
    matches!(e, NvmlError::Uninitialized | NvmlError::DriverNotLoaded | NvmlError::LibRmVersionMismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dashboard's source reads the clocks and PCIe rates only from
    /// the tick after they are shown; once they are not, it stops, and
    /// what it then shows again is never a figure from before: the first
    /// tick back has no PCIe rate, as a GPU's first tick has none.
    #[test]
    fn the_clocks_and_pcie_rates_are_read_only_while_shown_and_never_stale() {
        use crate::model::{Clocks, Pcie};
        let mut source =
            NvmlSource::unopened(LibrarySpec::Simulated, Vec::new()).on_one_thread().asking(Wanted::DASHBOARD);
        let answering = source.sample().gpus.iter().filter(|g| g.state == GpuState::Ok).count();
        let gpus = u64::try_from(answering).unwrap_or(u64::MAX);
        // The demo's first GPU, an H100 with both, and what the tick cost.
        let mut read = |shown: Option<OnScreen>| {
            if let Some(shown) = shown {
                source.show(shown);
            }
            let sample = source.sample();
            let gpu = sample.gpus.first().cloned().unwrap_or_else(|| panic!("{:?}", sample.status));
            assert!(gpu.throttle_reasons.is_some(), "the health verdict reads why the clocks are held down");
            (gpu.clocks, gpu.pcie, sample.calls.unwrap_or(0))
        };
        let rates = |p: &Pcie| p.rx_bytes_per_s.is_some() && p.tx_bytes_per_s.is_some();
        let known = |c: &Clocks| c.sm_mhz.is_some() && c.memory_mhz.is_some();
        let (both, none) = (OnScreen { clocks: true, pcie: true }, OnScreen::NONE);
        let (clocks, pcie, _) = read(None);
        assert_eq!((clocks, pcie), (Clocks::default(), Pcie::default()), "nothing shown yet");
        let (.., without) = read(None);
        let (clocks, pcie, _) = read(Some(both));
        assert!(known(&clocks) && pcie == Pcie::default(), "a rate needs two readings: {pcie:?}");
        let (clocks, pcie, with) = read(None);
        assert!(known(&clocks) && rates(&pcie), "{clocks:?} {pcie:?}");
        assert!(with >= without + 5 * gpus, "four clocks and a field-value call or two a GPU: {with}, {without}");
        let (clocks, pcie, calls) = read(Some(none));
        assert_eq!((clocks, pcie, calls), (Clocks::default(), Pcie::default(), without));
        let (_, pcie, _) = read(Some(both));
        assert_eq!(pcie, Pcie::default(), "no rate over the time they were not shown");
        assert!(rates(&read(None).1));
    }

    #[test]
    fn the_identities_are_made_again_when_a_device_or_its_mig_devices_change() {
        let all = vec![
            DeviceStatic::named(0, "GPU-a", "NVIDIA H100", "00000000:1B:00.0"),
            DeviceStatic::named(1, "GPU-b", "NVIDIA H100", "00000000:3B:00.0"),
        ];
        let gpus = vec![Gpu::blank(0, GpuState::Ok)];
        let kept: Vec<GpuIdentity> = all.iter().map(DeviceStatic::identity).collect();
        assert!(same_identities(&kept, &all, &gpus));
        assert!(!same_identities(&kept[..1], &all, &gpus), "a device came");
        let moved = [DeviceStatic::named(0, "GPU-b", "NVIDIA H100", "00000000:3B:00.0"), all[0].clone()];
        assert!(!same_identities(&kept, &moved, &gpus), "two devices swapped places");
        let renamed = [all[0].clone(), DeviceStatic::named(1, "GPU-b", "NVIDIA H200", "00000000:3B:00.0")];
        assert!(!same_identities(&kept, &renamed, &gpus));
        let mut with_mig = gpus.clone();
        with_mig[0].mig_devices.push(MigDevice {
            index: 0,
            uuid: Some("MIG-1".into()),
            name: None,
            profile: None,
            gpu_instance_id: Some(1),
            compute_instance_id: Some(0),
            memory: crate::model::MigMemory::default(),
            activity: None,
            activity_unavailable: None,
        });
        assert!(!same_identities(&kept, &all, &with_mig), "MIG devices appeared on a watched GPU");
        let mut kept_mig = kept.clone();
        kept_mig[0].mig_devices.clone_from(&with_mig[0].mig_devices);
        assert!(same_identities(&kept_mig, &all, &with_mig));
        assert!(!same_identities(&kept_mig, &all, &gpus), "and went");
    }
}
