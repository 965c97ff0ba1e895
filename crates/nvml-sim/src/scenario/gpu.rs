//! One simulated GPU: its spec plus the identifiers derived from its index.

use nvml_wrapper_sys::bindings::{
    NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_SERIAL_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE,
    NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE,
};

use super::check_text;
use super::mig::{self, MigDevice};
use super::pci::PciAddress;
use super::spec::{EventKind, GpuSpec, GpuState, ProcessSpec, Reading, RecoveryAction};
use crate::gpm::{self, Metric};
use crate::value::mib_to_bytes;

#[derive(Debug, Clone)]
pub(crate) struct Gpu {
    pub uuid: String,
    pub pci: PciAddress,
    pub spec: GpuSpec,
    pub mig: Vec<MigDevice>,
    /// `None`: a board without GPM (before Hopper).
    pub gpm: Option<Vec<Metric>>,
}

/// Memory in bytes, split the way `nvmlMemory_v2_t` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Memory {
    pub total: u64,
    pub reserved: u64,
    pub used: u64,
    pub free: u64,
}

impl Gpu {
    pub(super) fn resolve(index: usize, mut spec: GpuSpec) -> Result<Gpu, String> {
        let uuid = spec.uuid.take().unwrap_or_else(|| format!("GPU-00000000-5c0b-4e5a-9d1e-{index:012x}"));
        let pci = match &spec.pci_bus_id {
            Some(text) => PciAddress::parse(text)?,
            None => PciAddress::default_for(index),
        };
        check_text("name", &spec.name, NVML_DEVICE_NAME_V2_BUFFER_SIZE as usize)?;
        check_text("uuid", &uuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE as usize)?;
        check_text("vbios_version", &spec.vbios_version, NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE as usize)?;
        if let Some(serial) = &spec.serial {
            check_text("serial", serial, NVML_DEVICE_SERIAL_BUFFER_SIZE as usize)?;
        }
        if uuid.is_empty() {
            return Err("uuid must not be empty".into());
        }
        if spec.memory_reserved_mib > spec.memory_total_mib {
            return Err("memory_reserved_mib exceeds memory_total_mib".into());
        }
        if spec.pstate > 15 {
            return Err(format!("pstate {} is outside 0..=15", spec.pstate));
        }
        if spec.hang_after_s.is_some_and(|s| !(s.is_finite() && s >= 0.0)) {
            return Err("hang_after_s must be a non-negative number".into());
        }
        if !(spec.power_limit_w.is_finite() && spec.power_limit_w >= 0.0) {
            return Err("power_limit_w must be a non-negative number".into());
        }
        if spec.gpm_no_permission_after_s.is_some_and(|s| !(s.is_finite() && s >= 0.0)) {
            return Err("gpm_no_permission_after_s must be a non-negative number".into());
        }
        check_events(&spec)?;
        let gpm = spec.gpm.as_ref().map(gpm::resolve).transpose()?;
        let mig = mig::resolve(index, &mut spec)?;
        if gpm.is_none() && mig.iter().any(|m| m.gpm.is_some()) {
            return Err("mig devices report gpm metrics only on a board with gpm".into());
        }
        let mig_processes = mig.iter().flat_map(|m| &m.spec.process);
        for (i, p) in spec.process.iter().chain(mig_processes).enumerate() {
            if (p.pid == 0) == p.pid_file.is_none() {
                return Err(format!("process[{i}]: give either pid or pid_file"));
            }
            if let Some(name) = &p.name {
                // Names are cropped to the caller's buffer, so only NULs matter.
                check_text(&format!("process[{i}].name"), name, usize::MAX)?;
            }
        }
        Ok(Gpu { uuid, pci, spec, mig, gpm })
    }

    /// The recovery action the driver recommends at `t`.
    pub(crate) fn recovery_action(&self, t: f64) -> RecoveryAction {
        if t >= self.spec.recovery_action_from_s { self.spec.recovery_action } else { RecoveryAction::None }
    }

    /// Whether a call on this GPU at time `t` never returns.
    pub(crate) fn hangs_at(&self, t: f64) -> bool {
        self.spec.hang_after_s.is_some_and(|s| t >= s)
    }

    /// The GPM metrics of GPU instance `id`: its first MIG device's that
    /// has a `gpm` table (a GPU instance's compute instances share it);
    /// `None` when no MIG device belongs to that instance.
    pub(crate) fn instance_gpm(&self, id: u32) -> Option<&[Metric]> {
        let mut devices = self.mig.iter().filter(|m| m.spec.gpu_instance_id == id).peekable();
        devices.peek()?;
        Some(devices.find_map(|m| m.gpm.as_deref()).unwrap_or(&[]))
    }

    /// Whether taking a GPM sample at `t` is refused.
    pub(crate) fn gpm_refused_at(&self, t: f64) -> bool {
        self.spec.gpm_no_permission_after_s.is_some_and(|s| t >= s)
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.spec.state == GpuState::Lost
    }

    pub(crate) fn supports(&self, reading: Reading) -> bool {
        let shared = self.spec.unified_memory && reading == Reading::Memory;
        !shared && !self.spec.unsupported.contains(&reading)
    }

    /// `None` when the driver cannot attribute memory to the process.
    pub(crate) fn process_bytes(process: &ProcessSpec, t: f64) -> Option<u64> {
        let mib = process.used_mib.as_ref()?.at(t).max(0.0);
        Some(mib_to_bytes(mib))
    }

    /// Without an explicit `memory_used_mib`, used memory is what the
    /// processes account for (those on its MIG devices included), so the
    /// two views agree as on a real GPU running only known processes.
    pub(crate) fn memory(&self, t: f64) -> Memory {
        let total = mib_to_bytes(self.spec.memory_total_mib as f64);
        let reserved = mib_to_bytes(self.spec.memory_reserved_mib as f64);
        let usable = total - reserved;
        let used = match &self.spec.memory_used_mib {
            Some(v) => mib_to_bytes(v.at(t).max(0.0)),
            None => (self.spec.process.iter())
                .filter_map(|p| Self::process_bytes(p, t))
                .chain(self.mig.iter().map(|m| m.memory(t).used))
                .fold(0u64, u64::saturating_add),
        }
        .min(usable);
        Memory { total, reserved, used, free: usable - used }
    }
}

fn check_events(spec: &GpuSpec) -> Result<(), String> {
    for (i, e) in spec.event.iter().enumerate() {
        if !(e.at_s.is_finite() && e.at_s >= 0.0) {
            return Err(format!("event[{i}]: at_s must be a non-negative number"));
        }
        match (e.kind, e.xid) {
            (EventKind::Xid, None) => return Err(format!("event[{i}]: an xid event needs its xid")),
            (EventKind::Xid, Some(_)) => {}
            (_, Some(_)) => return Err(format!("event[{i}]: only an xid event carries an xid")),
            (_, None) => {}
        }
    }
    let r = &spec.nvlink_errors_per_s;
    if [r.crc_flit, r.crc_data, r.replay, r.recovery].iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err("nvlink_errors_per_s must be non-negative numbers".into());
    }
    if !(spec.recovery_action_from_s.is_finite() && spec.recovery_action_from_s >= 0.0) {
        return Err("recovery_action_from_s must be a non-negative number".into());
    }
    Ok(())
}
