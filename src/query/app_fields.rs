//! `--query-compute-apps` fields: nvidia-smi's names, aliases and units
//! (from `nvidia-smi --help-query-compute-apps`).

use super::cell::Cell;
use crate::model::{Gpu, Process, ProcessGpu};

/// One compute process on one GPU.
pub struct AppRow<'a> {
    pub gpu: &'a Gpu,
    pub process: &'a Process,
    pub on: &'a ProcessGpu,
    pub timestamp: &'a str,
}

pub struct AppField {
    /// The first is the name nvidia-smi writes in the header.
    pub names: &'static [&'static str],
    pub unit: Option<&'static str>,
    pub help: &'static str,
    pub read: fn(&AppRow<'_>) -> Cell,
}

pub static APP_FIELDS: &[AppField] = &[
    AppField {
        names: &["timestamp"],
        unit: None,
        help: "The time of the query, as \"YYYY/MM/DD HH:MM:SS.msec\" (local time).",
        read: |r| Cell::Text(r.timestamp.to_string()),
    },
    AppField {
        names: &["gpu_name"],
        unit: None,
        help: "The official product name of the GPU.",
        read: |r| Cell::text(r.gpu.name.as_deref()),
    },
    AppField {
        names: &["gpu_bus_id"],
        unit: None,
        help: "PCI bus id as \"domain:bus:device.function\", in hex.",
        read: |r| Cell::text(r.gpu.pci_bus_id.as_deref()),
    },
    AppField {
        names: &["gpu_uuid"],
        unit: None,
        help: "The globally unique immutable identifier of the GPU.",
        read: |r| Cell::text(r.gpu.uuid.as_deref()),
    },
    AppField {
        names: &["pid"],
        unit: None,
        help: "Process ID of the compute application.",
        read: |r| Cell::int(r.process.pid),
    },
    AppField {
        names: &["process_name", "name"],
        unit: None,
        help: "Process name: the executable as the process was started (argv[0]).",
        read: |r| process_name(r.process),
    },
    AppField {
        names: &["used_gpu_memory", "used_memory"],
        unit: Some("MiB"),
        help: "Amount of memory used on the device by the context.",
        read: |r| Cell::opt(r.on.used_memory, Cell::mib),
    },
];

/// NVML names a process by its `argv[0]`, which is the start of the
/// command line where the host can see the process; elsewhere the name
/// collected is NVML's own.
fn process_name(p: &Process) -> Cell {
    let argv0 = p.command.as_deref().and_then(|c| c.split(' ').next()).filter(|a| !a.is_empty());
    Cell::text(argv0.or(p.name.as_deref()))
}

pub fn find(name: &str) -> Option<(&'static AppField, String)> {
    let field = APP_FIELDS.iter().find(|f| f.names.contains(&name))?;
    Some((field, field.names[0].to_string()))
}
