//! Per-device readings. Each reading is taken on its own: one that the GPU
//! does not support is `None` and quiet; a lost GPU stops the device's
//! readings at once; anything else is kept as the device's error.

use nvml_wrapper::enum_wrappers::device::{Clock, PerformanceState, TemperatureSensor};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::boards::Boards;
use super::calls::Calls;
use super::link::LinkState;
use super::pcie::PcieState;
use super::slow::Slow;
use super::wanted::Wanted;
use crate::model::{Clocks, Gpu, GpuMemory, GpuState, Utilization};
use crate::sources::GpuIdentity;

/// Facts that do not change while the device is there, read once per UUID.
/// A field that could not be read (say, the GPU was lost at start) is
/// tried again.
#[derive(Debug, Clone)]
pub struct DeviceStatic {
    /// NVML's index now; it changes when GPUs come and go.
    pub index: u32,
    pub uuid: Option<String>,
    name: Option<String>,
    pci_bus_id: Option<String>,
    /// How many fans the board reports (asked once; `Some(None)` where the
    /// driver could not say); 0 on boards the chassis cools.
    /// `nvmlDeviceGetFanSpeed_v2` of fan 0 answers those with
    /// INVALID_ARGUMENT (an H100 SXM, driver 580.159.04), which would read
    /// as an error where there is simply no fan.
    fans: Option<Option<u32>>,
    /// The firmware's version, asked once (`Some(None)`: it could not be
    /// read) and only to find the board's kept maximum clocks (`boards.rs`).
    vbios: Option<Option<String>>,
    /// The handle NVML gave for this index last time (its address, 0 for
    /// none), from the session that is open: `enumerate` gives every
    /// device a fresh one whenever NVML is loaded. Most ticks read through
    /// it (`kept`) rather than ask for it again; a different one for the
    /// same index means a different device may sit there now.
    handle: usize,
    /// Not facts but per-GPU state that must follow the GPU, not its
    /// index: the PCIe counters between ticks, the settings read seldom.
    pub(super) pcie: PcieState,
    slow: Slow,
    /// The link's maxima and its last replay count.
    link: LinkState,
    /// Whether the GPU addresses the host's memory as its own, asked once
    /// the memory first answers NOT_SUPPORTED (`unified_memory`).
    unified: Option<bool>,
}

impl DeviceStatic {
    /// What a framework's device is matched against.
    pub fn identity(&self) -> GpuIdentity {
        GpuIdentity {
            index: self.index,
            uuid: self.uuid.clone(),
            name: self.name.clone(),
            pci_bus_id: self.pci_bus_id.clone(),
            mig_devices: Vec::new(),
        }
    }

    /// Whether `identity` says what `identity()` would, MIG devices aside.
    /// Every field is named, so one added to `GpuIdentity` must be
    /// compared here too.
    pub fn identifies(&self, identity: &GpuIdentity) -> bool {
        let GpuIdentity { index, uuid, name, pci_bus_id, mig_devices: _ } = identity;
        *index == self.index && *uuid == self.uuid && *name == self.name && *pci_bus_id == self.pci_bus_id
    }

    /// A device as `read` makes it of an index with no handle, with these
    /// names.
    #[cfg(test)]
    pub(super) fn named(index: u32, uuid: &str, name: &str, pci_bus_id: &str) -> Self {
        let st = Self::read(index, None, Some(uuid.into()), &Calls::default());
        Self { name: Some(name.into()), pci_bus_id: Some(pci_bus_id.into()), ..st }
    }

    /// `uuid`: as just read by the caller, where it could be.
    fn read(index: u32, dev: Option<&Device<'_>>, uuid: Option<String>, calls: &Calls) -> Self {
        let mut st = Self {
            index,
            uuid,
            name: None,
            pci_bus_id: None,
            fans: None,
            vbios: None,
            handle: 0,
            pcie: PcieState::default(),
            slow: Slow::default(),
            link: LinkState::default(),
            unified: None,
        };
        if let Some(dev) = dev {
            st.handle = handle_of(dev);
            st.refresh(dev, calls);
        }
        st
    }

    pub fn refresh(&mut self, dev: &Device<'_>, calls: &Calls) {
        let index = Some(self.index);
        if self.uuid.is_none() {
            self.uuid = calls.track("nvmlDeviceGetUUID", index, || dev.uuid()).ok();
        }
        if self.name.is_none() {
            self.name = calls.track("nvmlDeviceGetName", index, || dev.name()).ok();
        }
        if self.pci_bus_id.is_none() {
            self.pci_bus_id = calls.track("nvmlDeviceGetPciInfo", index, || dev.pci_info()).ok().map(|p| p.bus_id);
        }
        if self.fans.is_none() {
            self.fans = Some(calls.track("nvmlDeviceGetNumFans", index, || dev.num_fans()).ok());
        }
    }

    /// Takes the maximum clocks kept for this board and firmware, where
    /// they are still to be had.
    pub fn seed_max_clocks(&mut self, dev: &Device<'_>, boards: &Boards, calls: &Calls) {
        if !self.slow.needs_max_clocks() {
            return;
        }
        let Some(uuid) = &self.uuid else { return };
        let vbios = self.vbios.get_or_insert_with(|| {
            calls.track("nvmlDeviceGetVbiosVersion", Some(self.index), || dev.vbios_version()).ok()
        });
        if let Some(clocks) = vbios.as_deref().and_then(|v| boards.get(uuid, v)) {
            self.slow.seed_max_clocks(clocks);
        }
    }

    /// Hands the maximum clocks the driver has just given to `boards`.
    pub fn keep_max_clocks(&mut self, boards: &mut Boards) {
        if let Some(clocks) = self.slow.take_fresh_max_clocks()
            && let (Some(uuid), Some(Some(vbios))) = (&self.uuid, &self.vbios)
        {
            boards.put(uuid, vbios, clocks);
        }
    }

    /// See `Slow::forgo_max_clocks`.
    pub fn forgo_max_clocks(&mut self) {
        self.slow.forgo_max_clocks();
    }

    pub fn needs_max_clocks(&self) -> bool {
        self.slow.needs_max_clocks()
    }

    /// Whether this tick reads the slow readings (`slow.rs`) too: the
    /// first tick's and every tenth second's, the costly ones.
    pub fn slow_due(&self) -> bool {
        self.slow.due()
    }

    /// The device behind the handle NVML gave last time, without asking
    /// NVML again. NVML keeps a device's handle for as long as the library
    /// stays loaded (`nvmlShutdown` ends it), as nvitop and nvtop rely on
    /// too, holding theirs from start to end; a GPU that falls off the bus
    /// keeps its handle, whose calls then answer GPU_IS_LOST.
    pub fn kept<'n>(&self, nvml: &'n Nvml) -> Option<Device<'n>> {
        if self.handle == 0 {
            return None;
        }
        let handle = std::ptr::with_exposed_provenance_mut(self.handle);
        // SAFETY: `handle` is one NVML handed out in `nvml`'s session: the
        // source drops every device's handle with the session and takes
        // fresh ones from `enumerate` for the next (see `handle`). NVML
        // only ever sees it again; Rust never dereferences it.
        Some(unsafe { Device::new(handle, nvml) })
    }

    /// Whether NVML now hands out another handle for this index.
    pub fn moved(&self, dev: &Device<'_>) -> bool {
        handle_of(dev) != self.handle
    }

    /// Takes the handle as this device's.
    pub fn adopt(&mut self, dev: &Device<'_>) {
        self.handle = handle_of(dev);
    }

    /// Whether the device behind `dev` has this device's UUID (as far as
    /// anyone can tell: one that cannot be read is given the benefit).
    pub fn same_uuid(&self, dev: &Device<'_>, calls: &Calls) -> bool {
        match (calls.track("nvmlDeviceGetUUID", Some(self.index), || dev.uuid()), &self.uuid) {
            (Ok(now), Some(was)) => &now == was,
            (Ok(_), None) => false,
            (Err(_), _) => true,
        }
    }

    /// Stamps the device's identity onto an entry.
    pub fn apply(&self, mut gpu: Gpu) -> Gpu {
        gpu.uuid.clone_from(&self.uuid);
        gpu.name.clone_from(&self.name);
        gpu.pci_bus_id.clone_from(&self.pci_bus_id);
        gpu
    }
}

fn handle_of(dev: &Device<'_>) -> usize {
    // SAFETY: the pointer's value is kept and compared, never dereferenced
    // here; exposed, so that `kept` may hand the same pointer back to NVML.
    unsafe { dev.handle() }.expose_provenance()
}

/// Every device NVML lists now, by index. Statics already read for a UUID
/// (in `known`) are reused, so a re-enumeration costs one call per device
/// it has seen before.
pub fn enumerate(nvml: &Nvml, calls: &Calls, known: &[DeviceStatic]) -> Result<Vec<DeviceStatic>, NvmlError> {
    let count = calls.track("nvmlDeviceGetCount", None, || nvml.device_count())?;
    Ok((0..count)
        .map(|i| {
            let dev = calls.track("nvmlDeviceGetHandleByIndex", Some(i), || nvml.device_by_index(i)).ok();
            let Some(dev) = dev else { return DeviceStatic::read(i, None, None, calls) };
            let uuid = calls.track("nvmlDeviceGetUUID", Some(i), || dev.uuid()).ok();
            match known.iter().find(|k| k.uuid.is_some() && k.uuid == uuid) {
                Some(k) => DeviceStatic { index: i, handle: handle_of(&dev), ..k.clone() },
                None => DeviceStatic::read(i, Some(&dev), uuid, calls),
            }
        })
        .collect())
}

/// The UUID at each index now, one call per device: whether the devices
/// are still the ones `known` says.
pub fn same_devices(nvml: &Nvml, calls: &Calls, known: &[DeviceStatic]) -> bool {
    let count = calls.track("nvmlDeviceGetCount", None, || nvml.device_count());
    if count.ok() != u32::try_from(known.len()).ok() {
        return false;
    }
    known.iter().all(|k| {
        let dev = calls.track("nvmlDeviceGetHandleByIndex", Some(k.index), || nvml.device_by_index(k.index));
        match dev {
            // A lost GPU keeps its place; its UUID cannot be read.
            Err(NvmlError::GpuLost) => true,
            Err(_) => false,
            Ok(dev) => {
                let uuid = calls.track("nvmlDeviceGetUUID", Some(k.index), || dev.uuid());
                match (uuid, &k.uuid) {
                    (Ok(now), Some(was)) => &now == was,
                    (Err(NvmlError::GpuLost), _) | (Err(_), None) => true,
                    _ => false,
                }
            }
        }
    })
}

/// Collects the outcome of a device's readings.
pub(super) struct Reader<'a> {
    lost: bool,
    error: Option<String>,
    /// Calls that failed other than as unsupported, the first of them
    /// kept in `error`.
    failures: u32,
    calls: &'a Calls,
    gpu: u32,
}

impl Reader<'_> {
    /// Whether the GPU was found lost.
    pub(super) fn lost(&self) -> bool {
        self.lost
    }

    pub(super) fn failures(&self) -> u32 {
        self.failures
    }

    pub(super) fn take<T>(&mut self, what: &'static str, call: impl FnOnce() -> Result<T, NvmlError>) -> Option<T> {
        let result = self.calls.track(what, Some(self.gpu), call);
        self.keep(what, result)
    }

    /// `take` for a call already made.
    fn keep<T>(&mut self, what: &'static str, result: Result<T, NvmlError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(NvmlError::GpuLost) => {
                self.lost = true;
                None
            }
            // Normal on many boards and drivers: consumer cards have no
            // encoder figures, passive-cooled ones no fan, old drivers lack
            // newer functions. Unavailable, not wrong.
            Err(
                NvmlError::NotSupported
                | NvmlError::NotFound
                | NvmlError::NoPermission
                | NvmlError::FunctionNotFound
                | NvmlError::FailedToLoadSymbol(_),
            ) => None,
            Err(e) => {
                self.failures += 1;
                self.error.get_or_insert_with(|| format!("{what}: {e}"));
                None
            }
        }
    }
}

/// The GPU's readings through `dev`; `None` where `dev` is a handle `kept`
/// from an earlier tick that NVML now says names no device (its first call
/// answers INVALID_ARGUMENT: the GPU has gone, and another may have taken
/// its index, the count unchanged), so that the tick asks again by index.
/// Only what `wanted` asks is read; the rest stays unknown.
pub fn read_gpu(dev: &Device<'_>, st: &mut DeviceStatic, calls: &Calls, kept: bool, wanted: Wanted) -> Option<Gpu> {
    let mut r = Reader { lost: false, error: None, failures: 0, calls, gpu: st.index };
    let mut gpu = st.apply(Gpu::blank(st.index, GpuState::Ok));
    // Memory first: if the GPU has fallen off the bus, this says so and the
    // remaining calls (each of which would fail the same way) are skipped.
    let mem = calls.track("memory", Some(st.index), || dev.memory_info());
    if kept && matches!(mem, Err(NvmlError::InvalidArg)) {
        return None;
    }
    gpu.unified_memory = match &mem {
        Ok(_) => Some(false),
        Err(NvmlError::NotSupported) => Some(*st.unified.get_or_insert_with(|| {
            calls.track("nvmlDeviceGetAddressingMode", Some(st.index), || addressing_mode(dev)).is_ok_and(|m| m == ATS)
        })),
        Err(_) => None,
    };
    let mem = r.keep("memory", mem);
    if r.lost {
        gpu.state = GpuState::Lost;
        return Some(gpu);
    }
    gpu.memory = GpuMemory {
        total: mem.as_ref().map(|m| m.total),
        used: mem.as_ref().map(|m| m.used),
        free: mem.as_ref().map(|m| m.free),
        driver_reserved: mem.as_ref().map(|m| m.reserved),
    };
    let util = r.take("utilization", || dev.utilization_rates());
    gpu.utilization = Utilization {
        gpu: util.as_ref().map(|u| u.gpu),
        memory: util.as_ref().map(|u| u.memory),
        ..Utilization::default()
    };
    if wanted.codecs {
        gpu.utilization.encoder = r.take("encoder", || dev.encoder_utilization()).map(|u| u.utilization);
        gpu.utilization.decoder = r.take("decoder", || dev.decoder_utilization()).map(|u| u.utilization);
    }
    gpu.temperature_c = r.take("temperature", || dev.temperature(TemperatureSensor::Gpu));
    gpu.fan_percent = match st.fans {
        _ if !wanted.fan => None,
        Some(Some(0)) => None,
        _ => r.take("fan", || dev.fan_speed(0)),
    };
    gpu.power_draw_w = r.take("power", || dev.power_usage()).map(milliwatts);
    if wanted.energy {
        gpu.energy_mj = r.take("energy", || dev.total_energy_consumption());
    }
    gpu.performance_state = r.take("performance state", || dev.performance_state()).and_then(pstate_name);
    if wanted.clocks {
        gpu.clocks = Clocks {
            sm_mhz: r.take("SM clock", || dev.clock_info(Clock::SM)),
            memory_mhz: r.take("memory clock", || dev.clock_info(Clock::Memory)),
            graphics_mhz: r.take("graphics clock", || dev.clock_info(Clock::Graphics)),
            video_mhz: r.take("video clock", || dev.clock_info(Clock::Video)),
        };
    }
    // The health verdict judges hardware slowdowns by them.
    if wanted.clocks || wanted.health {
        gpu.throttle_reasons = r.take("throttle reasons", || dev.current_throttle_reasons()).map(|reasons| {
            reasons.iter_names().map(|(name, _)| name.to_ascii_lowercase()).filter(|n| n != "none").collect()
        });
    }
    if wanted.pcie {
        gpu.pcie = st.pcie.read(&mut r, dev);
    } else {
        st.pcie.forget();
    }
    if wanted.pcie_link {
        gpu.pcie_link = st.link.read(&mut r, dev);
    }
    st.slow.apply(&mut r, dev, &mut gpu, wanted);
    super::settings::read(&mut r, dev, &mut gpu, st.slow.accounting());

    if r.lost {
        // Lost part-way through: what was read may be from before the loss,
        // so none of it is shown.
        return Some(st.apply(Gpu::blank(st.index, GpuState::Lost)));
    }
    gpu.error = r.error;
    Some(gpu)
}

/// nvml.h: `NVML_DEVICE_ADDRESSING_MODE_ATS`, "Address Translation
/// Services": the GPU reaches system memory through the CPU's page tables,
/// as on GB10, whose driver answers NOT_SUPPORTED for the memory since
/// there is no framebuffer of its own. A GH200 is ATS too but has HBM of
/// its own and answers the memory, so ATS alone does not mean unified:
/// only together with NOT_SUPPORTED.
const ATS: u32 = nvml_wrapper_sys::bindings::nvmlDeviceAddressingModeType_t_NVML_DEVICE_ADDRESSING_MODE_ATS;

/// nvml-wrapper has no call for it: the library's own symbol
/// (`nvmlDeviceGetAddressingMode`, R580 and later; a driver without it
/// leaves the board's kind unknown, so it is never taken for unified).
fn addressing_mode(dev: &Device<'_>) -> Result<u32, NvmlError> {
    use nvml_wrapper::error::nvml_try;
    use nvml_wrapper_sys::bindings::nvmlDeviceAddressingMode_t;
    let Ok(f) = dev.nvml().lib().nvmlDeviceGetAddressingMode.as_ref() else {
        return Err(NvmlError::FunctionNotFound);
    };
    // nvml.h: `nvmlDeviceAddressingMode_v1` = NVML_STRUCT_VERSION(DeviceAddressingMode, 1),
    // the struct's size with the version in the top byte.
    let version = size_of::<nvmlDeviceAddressingMode_t>() as u32 | (1 << 24);
    let mut mode = nvmlDeviceAddressingMode_t { version, value: 0 };
    // SAFETY: the handle is NVML's own, and `mode` is a live local of the
    // versioned layout NVML writes.
    nvml_try(unsafe { f(dev.handle(), &mut mode) })?;
    Ok(mode.value)
}

fn milliwatts(mw: u32) -> f64 {
    f64::from(mw) / 1000.0
}

fn pstate_name(p: PerformanceState) -> Option<String> {
    use PerformanceState::*;
    let n = match p {
        Zero => 0,
        One => 1,
        Two => 2,
        Three => 3,
        Four => 4,
        Five => 5,
        Six => 6,
        Seven => 7,
        Eight => 8,
        Nine => 9,
        Ten => 10,
        Eleven => 11,
        Twelve => 12,
        Thirteen => 13,
        Fourteen => 14,
        Fifteen => 15,
        Unknown => return None,
    };
    Some(format!("P{n}"))
}
