//! MIG devices of a simulated GPU: one per GPU instance + compute instance.

use nvml_wrapper_sys::bindings::{NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE};

use super::check_text;
use super::gpu::{Gpu, Memory};
use super::spec::{GpuSpec, MigSpec};
use crate::gpm::{self, Metric};
use crate::value::mib_to_bytes;

/// What `nvmlDeviceGetMaxMigDeviceCount` reports with MIG on: an A100 or
/// H100 splits into at most seven GPU instances.
pub(crate) const MAX_MIG_DEVICES: u32 = 7;

#[derive(Debug, Clone)]
pub(crate) struct MigDevice {
    pub uuid: String,
    /// "<parent name> MIG <profile>", as the driver names MIG devices.
    pub name: String,
    pub spec: MigSpec,
    pub gpm: Option<Vec<Metric>>,
}

impl MigDevice {
    pub(crate) fn memory(&self, t: f64) -> Memory {
        let total = mib_to_bytes(self.spec.memory_total_mib as f64);
        let used = match &self.spec.memory_used_mib {
            Some(v) => mib_to_bytes(v.at(t).max(0.0)),
            None => (self.spec.process.iter()).filter_map(|p| Gpu::process_bytes(p, t)).fold(0u64, u64::saturating_add),
        }
        .min(total);
        Memory { total, reserved: 0, used, free: total - used }
    }
}

/// Checks the `[[gpu.mig]]` tables of the GPU at `position` and names them.
pub(super) fn resolve(position: usize, spec: &mut GpuSpec) -> Result<Vec<MigDevice>, String> {
    let specs = std::mem::take(&mut spec.mig);
    if !specs.is_empty() && !spec.mig_current {
        return Err("mig devices need mig_current = true".into());
    }
    if specs.len() > MAX_MIG_DEVICES as usize {
        return Err(format!("at most {MAX_MIG_DEVICES} mig devices"));
    }
    let mut out: Vec<MigDevice> = Vec::with_capacity(specs.len());
    for (slot, mut m) in specs.into_iter().enumerate() {
        let at = |e: String| format!("mig[{slot}]: {e}");
        let uuid = m.uuid.take().unwrap_or_else(|| format!("MIG-00000000-5c0b-5e5a-9d1e-{position:06x}{slot:06x}"));
        if !uuid.starts_with("MIG-") {
            return Err(at(format!("uuid {uuid:?} must start with \"MIG-\"")));
        }
        check_text("uuid", &uuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE as usize).map_err(at)?;
        if m.profile.is_empty() {
            return Err(at("profile must not be empty".into()));
        }
        let name = format!("{} MIG {}", spec.name, m.profile);
        check_text("name", &name, NVML_DEVICE_NAME_V2_BUFFER_SIZE as usize).map_err(at)?;
        let ids = (m.gpu_instance_id, m.compute_instance_id);
        if out.iter().any(|o| (o.spec.gpu_instance_id, o.spec.compute_instance_id) == ids || o.uuid == uuid) {
            return Err(at("uuid or (gpu_instance_id, compute_instance_id) used twice".into()));
        }
        if out.iter().map(|o| o.spec.memory_total_mib).sum::<u64>() + m.memory_total_mib > spec.memory_total_mib {
            return Err(at("the mig devices' memory exceeds the GPU's".into()));
        }
        let gpm = m.gpm.as_ref().map(gpm::resolve).transpose().map_err(at)?;
        m.uuid = None;
        out.push(MigDevice { uuid, name, spec: m, gpm });
    }
    Ok(out)
}
