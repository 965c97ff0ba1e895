//! `--query-gpu` fields: nvidia-smi's names, aliases, units and help text
//! (from `nvidia-smi --help-query-gpu`), each read from the snapshot.

use super::cell::Cell;
use crate::model::{ComputeMode, Gpu, GpuState, Snapshot};
use crate::sources::nvml::Wanted;

/// One GPU's row: the snapshot it belongs to and the GPU.
pub struct Row<'a> {
    pub snap: &'a Snapshot,
    pub gpu: &'a Gpu,
    /// The row's time, already in nvidia-smi's form.
    pub timestamp: &'a str,
}

pub struct GpuField {
    /// The first is the name nvidia-smi writes in the header.
    pub names: &'static [&'static str],
    pub unit: Option<&'static str>,
    /// Whether the header repeats the name as typed: the throttle reasons
    /// are `clocks_throttle_reasons.*` up to driver 530 and
    /// `clocks_event_reasons.*` after, and each driver writes its own.
    pub header_as_typed: bool,
    /// A reading of the GPU (rather than its identity or the system's):
    /// not shown for a lost GPU.
    pub reading: bool,
    pub help: &'static str,
    pub read: fn(&Row<'_>) -> Cell,
}

const fn ident(names: &'static [&'static str], help: &'static str, read: fn(&Row<'_>) -> Cell) -> GpuField {
    GpuField { names, unit: None, header_as_typed: false, reading: false, help, read }
}

const fn reading(
    names: &'static [&'static str],
    unit: Option<&'static str>,
    help: &'static str,
    read: fn(&Row<'_>) -> Cell,
) -> GpuField {
    GpuField { names, unit, header_as_typed: false, reading: true, help, read }
}

const MIB: Option<&str> = Some("MiB");
const PCT: Option<&str> = Some("%");
const WATT: Option<&str> = Some("W");
const MHZ: Option<&str> = Some("MHz");

/// NVML's clock event reason bits (`nvmlClocksEventReason*` in nvml.h),
/// by the name nvidia-smi gives each field.
pub const REASONS: [(&str, u64); 9] = [
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clock_setting", 0x100),
];

/// The active reasons as NVML's bitmask.
fn reason_mask(gpu: &Gpu) -> Option<u64> {
    let names = gpu.throttle_reasons.as_ref()?;
    Some(REASONS.iter().filter(|(n, _)| names.iter().any(|a| a == n)).map(|(_, bit)| bit).sum())
}

fn reason(gpu: &Gpu, bit: u64) -> Cell {
    Cell::opt(reason_mask(gpu), |m| Cell::Text(if m & bit != 0 { "Active" } else { "Not Active" }.into()))
}

macro_rules! reason_field {
    ($throttle:literal, $event:literal, $bit:expr, $help:literal) => {
        GpuField {
            names: &[$throttle, $event],
            unit: None,
            header_as_typed: true,
            reading: true,
            help: $help,
            read: |r| reason(r.gpu, $bit),
        }
    };
}

pub static GPU_FIELDS: &[GpuField] = &[
    ident(&["timestamp"], "The time of the query, as \"YYYY/MM/DD HH:MM:SS.msec\" (local time).", |r| {
        Cell::Text(r.timestamp.to_string())
    }),
    ident(&["driver_version"], "The version of the installed NVIDIA display driver.", |r| {
        Cell::text(r.snap.driver.driver_version.as_deref())
    }),
    ident(&["count"], "The number of NVIDIA GPUs in the system.", |r| Cell::int(r.snap.gpus.len() as u64)),
    ident(&["name", "gpu_name"], "The official product name of the GPU.", |r| Cell::text(r.gpu.name.as_deref())),
    ident(&["uuid", "gpu_uuid"], "The globally unique immutable identifier of the GPU.", |r| {
        Cell::text(r.gpu.uuid.as_deref())
    }),
    ident(&["pci.bus_id", "gpu_bus_id"], "PCI bus id as \"domain:bus:device.function\", in hex.", |r| {
        Cell::text(r.gpu.pci_bus_id.as_deref())
    }),
    reading(
        &["pcie.link.gen.current"],
        None,
        "The current PCI-E link generation. These may be reduced when the GPU is not in use.",
        |r| Cell::opt(r.gpu.pcie_link.gen_current, Cell::int),
    ),
    reading(
        &["pcie.link.gen.max"],
        None,
        "The maximum PCI-E link generation possible with this GPU and system configuration.",
        |r| Cell::opt(r.gpu.pcie_link.gen_max, Cell::int),
    ),
    reading(
        &["pcie.link.width.current"],
        None,
        "The current PCI-E link width. These may be reduced when the GPU is not in use.",
        |r| Cell::opt(r.gpu.pcie_link.width_current, Cell::int),
    ),
    reading(
        &["pcie.link.width.max"],
        None,
        "The maximum PCI-E link width possible with this GPU and system configuration.",
        |r| Cell::opt(r.gpu.pcie_link.width_max, Cell::int),
    ),
    ident(&["serial", "gpu_serial"], "The serial number physically printed on the board.", |r| {
        Cell::text(r.gpu.serial.as_deref())
    }),
    ident(&["index"], "Zero based index of the GPU. Can change at each boot.", |r| Cell::int(r.gpu.index)),
    reading(&["persistence_mode"], None, "Whether persistence mode is enabled: \"Enabled\" or \"Disabled\".", |r| {
        Cell::flag(r.gpu.persistence_mode, "Enabled", "Disabled")
    }),
    reading(&["accounting.mode"], None, "Whether per-process accounting is on: \"Enabled\" or \"Disabled\".", |r| {
        Cell::flag(r.gpu.accounting.as_ref().map(|a| a.enabled), "Enabled", "Disabled")
    }),
    reading(
        &["accounting.buffer_size"],
        None,
        "How many processes the accounting buffer holds before the oldest are dropped.",
        |r| Cell::opt(r.gpu.accounting.as_ref().and_then(|a| a.buffer_size), Cell::int),
    ),
    reading(
        &["compute_mode"],
        None,
        "Default, Exclusive_Thread, Prohibited or Exclusive_Process: who may create a context.",
        |r| Cell::opt(r.gpu.compute_mode, |m| Cell::Text(compute_mode(m).into())),
    ),
    reading(&["fan.speed"], PCT, "The intended fan speed, in percent of the maximum.", |r| {
        Cell::opt(r.gpu.fan_percent, Cell::int)
    }),
    reading(&["pstate"], None, "The current performance state, P0 (maximum performance) to P12 (minimum).", |r| {
        Cell::text(r.gpu.performance_state.as_deref())
    }),
    reading(&["memory.total"], MIB, "Total installed GPU memory.", |r| Cell::opt(r.gpu.memory.total, Cell::mib)),
    reading(&["memory.reserved"], MIB, "Total memory reserved by the NVIDIA driver and firmware.", |r| {
        Cell::opt(r.gpu.memory.driver_reserved, Cell::mib)
    }),
    reading(&["memory.used"], MIB, "Total memory allocated by active contexts.", |r| {
        Cell::opt(r.gpu.memory.used, Cell::mib)
    }),
    reading(&["memory.free"], MIB, "Total free memory.", |r| Cell::opt(r.gpu.memory.free, Cell::mib)),
    reading(
        &["utilization.gpu"],
        PCT,
        "Percent of time over the past sample period during which one or more kernels was executing on the GPU.",
        |r| Cell::opt(r.gpu.utilization.gpu, Cell::int),
    ),
    reading(
        &["utilization.memory"],
        PCT,
        "Percent of time over the past sample period during which device memory was being read or written.",
        |r| Cell::opt(r.gpu.utilization.memory, Cell::int),
    ),
    reading(&["utilization.encoder"], PCT, "Percent of time the video encoder was busy.", |r| {
        Cell::opt(r.gpu.utilization.encoder, Cell::int)
    }),
    reading(&["utilization.decoder"], PCT, "Percent of time the video decoder was busy.", |r| {
        Cell::opt(r.gpu.utilization.decoder, Cell::int)
    }),
    reading(&["temperature.gpu"], None, "Core GPU temperature, in degrees C.", |r| {
        Cell::opt(r.gpu.temperature_c, Cell::int)
    }),
    reading(&["power.draw"], WATT, "The last measured power draw for the entire board, in watts.", |r| {
        Cell::opt(r.gpu.power_draw_w, Cell::watts)
    }),
    reading(&["power.limit"], WATT, "The software power limit in watts (nvidia-smi -pl).", |r| {
        Cell::opt(r.gpu.power_management_limit_w, Cell::watts)
    }),
    reading(&["enforced.power.limit"], WATT, "The power management algorithm's power ceiling, in watts.", |r| {
        Cell::opt(r.gpu.power_limit_w, Cell::watts)
    }),
    reading(&["clocks.current.graphics", "clocks.gr"], MHZ, "Current frequency of graphics (shader) clock.", |r| {
        Cell::opt(r.gpu.clocks.graphics_mhz, Cell::int)
    }),
    reading(
        &["clocks.current.sm", "clocks.sm"],
        MHZ,
        "Current frequency of SM (Streaming Multiprocessor) clock.",
        |r| Cell::opt(r.gpu.clocks.sm_mhz, Cell::int),
    ),
    reading(&["clocks.current.memory", "clocks.mem"], MHZ, "Current frequency of memory clock.", |r| {
        Cell::opt(r.gpu.clocks.memory_mhz, Cell::int)
    }),
    reading(&["clocks.current.video", "clocks.video"], MHZ, "Current frequency of video encoder/decoder clock.", |r| {
        Cell::opt(r.gpu.clocks.video_mhz, Cell::int)
    }),
    reading(&["clocks.max.graphics", "clocks.max.gr"], MHZ, "Maximum frequency of graphics (shader) clock.", |r| {
        Cell::opt(r.gpu.max_clocks.graphics_mhz, Cell::int)
    }),
    reading(&["clocks.max.sm"], MHZ, "Maximum frequency of SM (Streaming Multiprocessor) clock.", |r| {
        Cell::opt(r.gpu.max_clocks.sm_mhz, Cell::int)
    }),
    reading(&["clocks.max.memory", "clocks.max.mem"], MHZ, "Maximum frequency of memory clock.", |r| {
        Cell::opt(r.gpu.max_clocks.memory_mhz, Cell::int)
    }),
    reading(&["ecc.mode.current"], None, "The ECC mode that the GPU is currently operating under.", |r| {
        Cell::flag(r.gpu.ecc.mode_current, "Enabled", "Disabled")
    }),
    reading(&["ecc.mode.pending"], None, "The ECC mode that the GPU will operate under after the next reboot.", |r| {
        Cell::flag(r.gpu.ecc.mode_pending, "Enabled", "Disabled")
    }),
    reading(
        &["ecc.errors.corrected.volatile.total"],
        None,
        "Corrected errors across the chip since the driver loaded.",
        |r| Cell::opt(r.gpu.ecc.corrected_volatile, Cell::int),
    ),
    reading(
        &["ecc.errors.corrected.aggregate.total"],
        None,
        "Corrected errors across the chip, over its lifetime.",
        |r| Cell::opt(r.gpu.ecc.corrected_aggregate, Cell::int),
    ),
    reading(
        &["ecc.errors.uncorrected.volatile.total"],
        None,
        "Uncorrected errors across the chip since the driver loaded.",
        |r| Cell::opt(r.gpu.ecc.uncorrected_volatile, Cell::int),
    ),
    reading(
        &["ecc.errors.uncorrected.aggregate.total"],
        None,
        "Uncorrected errors across the chip, over its lifetime.",
        |r| Cell::opt(r.gpu.ecc.uncorrected_aggregate, Cell::int),
    ),
    reading(
        &["retired_pages.pending"],
        None,
        "Whether device memory pages are pending retirement at the next reboot.",
        |r| Cell::flag(r.gpu.ecc.retired_pages_pending, "Yes", "No"),
    ),
    reading(&["mig.mode.current"], None, "The MIG mode that the GPU is currently operating under.", |r| {
        Cell::flag(r.gpu.mig_mode.map(|m| m.current), "Enabled", "Disabled")
    }),
    reading(&["mig.mode.pending"], None, "The MIG mode that the GPU will operate under after reset.", |r| {
        Cell::flag(r.gpu.mig_mode.map(|m| m.pending), "Enabled", "Disabled")
    }),
    GpuField {
        names: &["clocks_throttle_reasons.active", "clocks_event_reasons.active"],
        unit: None,
        header_as_typed: true,
        reading: true,
        help: "Bitmask of active clock event (throttle) reasons. See nvml.h for more details.",
        read: |r| Cell::opt(reason_mask(r.gpu), |m| Cell::Text(format!("0x{m:016X}"))),
    },
    reason_field!(
        "clocks_throttle_reasons.gpu_idle",
        "clocks_event_reasons.gpu_idle",
        0x1,
        "Nothing is running on the GPU and the clocks are dropping to Idle state."
    ),
    reason_field!(
        "clocks_throttle_reasons.applications_clocks_setting",
        "clocks_event_reasons.applications_clocks_setting",
        0x2,
        "GPU clocks are limited by applications clocks setting."
    ),
    reason_field!(
        "clocks_throttle_reasons.sw_power_cap",
        "clocks_event_reasons.sw_power_cap",
        0x4,
        "SW Power Scaling algorithm is reducing the clocks below requested clocks."
    ),
    reason_field!(
        "clocks_throttle_reasons.hw_slowdown",
        "clocks_event_reasons.hw_slowdown",
        0x8,
        "HW Slowdown (reducing the core clocks by a factor of 2 or more) is engaged."
    ),
    reason_field!(
        "clocks_throttle_reasons.sync_boost",
        "clocks_event_reasons.sync_boost",
        0x10,
        "This GPU is part of a Sync boost group."
    ),
    reason_field!(
        "clocks_throttle_reasons.sw_thermal_slowdown",
        "clocks_event_reasons.sw_thermal_slowdown",
        0x20,
        "SW Thermal capping algorithm is reducing clocks below requested clocks."
    ),
    reason_field!(
        "clocks_throttle_reasons.hw_thermal_slowdown",
        "clocks_event_reasons.hw_thermal_slowdown",
        0x40,
        "HW Thermal Slowdown is engaged: the temperature is too high."
    ),
    reason_field!(
        "clocks_throttle_reasons.hw_power_brake_slowdown",
        "clocks_event_reasons.hw_power_brake_slowdown",
        0x80,
        "HW Power Brake Slowdown is engaged: External Power Brake Assertion is triggered."
    ),
];

/// nvidia-smi's spelling.
fn compute_mode(m: ComputeMode) -> &'static str {
    match m {
        ComputeMode::Default => "Default",
        ComputeMode::ExclusiveThread => "Exclusive_Thread",
        ComputeMode::Prohibited => "Prohibited",
        ComputeMode::ExclusiveProcess => "Exclusive_Process",
    }
}

/// What the driver must be asked for this field's value, beyond what every
/// output reads (`Wanted`), by the field's name: a query asks for no more
/// than its fields show.
pub fn wants(field: &GpuField) -> Wanted {
    let name = field.names[0];
    let has = |prefix: &str| name.starts_with(prefix);
    let none = Wanted::NONE;
    match name {
        "serial" | "persistence_mode" | "compute_mode" | "power.limit" => Wanted { settings: true, ..none },
        _ if has("accounting.") => Wanted { settings: true, ..none },
        "fan.speed" => Wanted { fan: true, ..none },
        "utilization.encoder" | "utilization.decoder" => Wanted { codecs: true, ..none },
        _ if has("clocks.current.") || has("clocks_throttle_reasons.") => Wanted { clocks: true, ..none },
        _ if has("clocks.max.") => Wanted { max_clocks: true, ..none },
        _ if has("ecc.") || has("retired_pages.") => Wanted { health: true, ..none },
        _ if has("pcie.link.") => Wanted { pcie_link: true, ..none },
        _ => none,
    }
}

/// The field of that name or alias, and the header it is written under.
pub fn find(name: &str) -> Option<(&'static GpuField, String)> {
    let field = GPU_FIELDS.iter().find(|f| f.names.contains(&name))?;
    let header = if field.header_as_typed { name } else { field.names[0] };
    Some((field, header.to_string()))
}

impl GpuField {
    pub fn cell(&self, row: &Row<'_>) -> Cell {
        if self.reading && row.gpu.state == GpuState::Lost {
            return Cell::Lost;
        }
        (self.read)(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut all: Vec<&str> = GPU_FIELDS.iter().flat_map(|f| f.names.iter().copied()).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
    }

    /// The exporter's test snapshot with what it leaves out filled in, so
    /// that every field of its first GPU has a value.
    fn every_reading() -> Snapshot {
        let mut snap = crate::serve::metrics::tests::snapshot();
        snap.driver.driver_version = Some("580.159.04".into());
        let gpu = &mut snap.gpus[0];
        (gpu.serial, gpu.compute_mode) = (Some("1654123456789".into()), Some(ComputeMode::ExclusiveProcess));
        (gpu.clocks.graphics_mhz, gpu.clocks.video_mhz) = (Some(1755), Some(1545));
        gpu.max_clocks = crate::model::MaxClocks {
            sm_mhz: Some(1980),
            memory_mhz: Some(2619),
            graphics_mhz: Some(1980),
            video_mhz: Some(1755),
        };
        gpu.throttle_reasons = Some(vec!["sw_power_cap".into(), "hw_slowdown".into()]);
        gpu.mig_mode = Some(crate::model::MigMode { current: true, pending: false });
        gpu.performance_state = Some("P0".into());
        gpu.pcie_link = crate::model::PcieLink {
            gen_current: Some(4),
            gen_max: Some(5),
            width_current: Some(16),
            width_max: Some(16),
            replay_counter: Some(0),
            replays_since_last: Some(0),
        };
        snap
    }

    #[test]
    fn every_field_shows_the_same_with_only_what_it_asks_the_driver_for() {
        let full = every_reading();
        for field in GPU_FIELDS {
            let mut asked = full.clone();
            asked.gpus.iter_mut().for_each(|g| wants(field).blank(g));
            let cell = |snap: &Snapshot| field.cell(&Row { snap, gpu: &snap.gpus[0], timestamp: "t" });
            let shown = cell(&full);
            assert!(!matches!(shown, Cell::NotAvailable), "{}: a reading to show", field.names[0]);
            assert_eq!(cell(&asked), shown, "{}", field.names[0]);
        }
    }

    #[test]
    fn aliases_are_written_under_nvidia_smis_name() {
        assert_eq!(find("gpu_name").unwrap().1, "name");
        assert_eq!(find("clocks.sm").unwrap().1, "clocks.current.sm");
        assert_eq!(find("clocks_event_reasons.active").unwrap().1, "clocks_event_reasons.active");
        assert_eq!(find("clocks_throttle_reasons.active").unwrap().1, "clocks_throttle_reasons.active");
        assert!(find("memory.usedd").is_none());
    }
}
