use serde::{Deserialize, Serialize};

use super::GpuAllocator;

/// One GPU as NVML reports it. Readings the device does not support, or that
/// failed, are `None` (`null` in JSON): never 0, which would be a lie.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// NVML's index, the same as `nvidia-smi` and `CUDA_VISIBLE_DEVICES`
    /// with the default PCI bus order.
    pub index: u32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub pci_bus_id: Option<String>,
    pub state: GpuState,
    /// Why readings are missing, when it is not merely "not supported".
    pub error: Option<String>,
    pub memory: GpuMemory,
    pub utilization: Utilization,
    pub temperature_c: Option<u32>,
    pub fan_percent: Option<u32>,
    pub power_draw_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub clocks: Clocks,
    pub pcie: Pcie,
    /// "P0" (fastest) to "P15".
    pub performance_state: Option<String>,
    /// Why the clocks are held down, in NVML's terms (snake_case).
    pub throttle_reasons: Option<Vec<String>>,
    pub mig_mode: Option<MigMode>,
    /// With MIG on, the MIG devices (GPU instance + compute instance) NVML
    /// lists under this GPU, by MIG device index; empty otherwise.
    /// Absent in recordings made before gpuscope read MIG devices.
    #[serde(default)]
    pub mig_devices: Vec<MigDevice>,
    /// Totals of the allocator probes on this GPU; `None` when no process
    /// on it has a probe.
    pub allocator: Option<GpuAllocator>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuState {
    Ok,
    /// Fallen off the bus (NVML_ERROR_GPU_IS_LOST): needs a reset or reboot.
    Lost,
    /// The device could not be queried for another reason; see `error`.
    Error,
}

/// Device memory in bytes. `driver_reserved` is what the driver keeps back
/// for itself (NVML's `nvmlMemory_v2_t.reserved`); it has nothing to do with
/// PyTorch's "reserved" memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuMemory {
    pub total: Option<u64>,
    pub used: Option<u64>,
    pub free: Option<u64>,
    pub driver_reserved: Option<u64>,
}

/// Percentages, 0 to 100, over NVML's last sample period.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Utilization {
    pub gpu: Option<u32>,
    pub memory: Option<u32>,
    pub encoder: Option<u32>,
    pub decoder: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clocks {
    pub sm_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pcie {
    pub tx_bytes_per_s: Option<u64>,
    pub rx_bytes_per_s: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigMode {
    pub current: bool,
    pub pending: bool,
}

/// One MIG device of a GPU: what NVML answers on its handle. NVML keeps
/// utilization, clocks, power and temperature for the parent GPU only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigDevice {
    /// The MIG device index within its parent GPU (NVML's
    /// `nvmlDeviceGetMigDeviceHandleByIndex`).
    pub index: u32,
    /// "MIG-…", as `CUDA_VISIBLE_DEVICES` and `nvidia-smi -L` give it.
    pub uuid: Option<String>,
    /// NVML's name, "<parent name> MIG <profile>".
    pub name: Option<String>,
    /// The MIG profile, "1g.10gb", taken from the name.
    pub profile: Option<String>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    pub memory: MigMemory,
}

/// A MIG device's own slice of memory, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigMemory {
    pub total: Option<u64>,
    pub used: Option<u64>,
    pub free: Option<u64>,
}

impl MigDevice {
    /// The profile from NVML's name: what follows its last " MIG ".
    pub fn profile_from_name(name: &str) -> Option<String> {
        let (_, profile) = name.rsplit_once(" MIG ")?;
        let profile = profile.trim();
        (!profile.is_empty()).then(|| profile.to_string())
    }
}

impl Gpu {
    /// An entry with identity only: the starting point for a device whose
    /// readings are still to be taken, or could not be.
    pub fn blank(index: u32, state: GpuState) -> Self {
        Self {
            index,
            uuid: None,
            name: None,
            pci_bus_id: None,
            state,
            error: None,
            memory: GpuMemory::default(),
            utilization: Utilization::default(),
            temperature_c: None,
            fan_percent: None,
            power_draw_w: None,
            power_limit_w: None,
            clocks: Clocks::default(),
            pcie: Pcie::default(),
            performance_state: None,
            throttle_reasons: None,
            mig_mode: None,
            mig_devices: Vec::new(),
            allocator: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MigDevice;

    #[test]
    fn the_profile_is_read_from_the_mig_device_name() {
        let p = |n: &str| MigDevice::profile_from_name(n);
        assert_eq!(p("NVIDIA H100 80GB HBM3 MIG 1g.10gb").as_deref(), Some("1g.10gb"));
        assert_eq!(p("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb").as_deref(), Some("1c.3g.20gb"));
        assert_eq!(p("NVIDIA H100 80GB HBM3"), None);
        assert_eq!(p("X MIG "), None);
    }
}
