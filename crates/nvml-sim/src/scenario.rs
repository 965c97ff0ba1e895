//! A parsed and validated scenario: what the simulated driver reports.

mod gpu;
mod mig;
mod pci;
mod spec;
#[cfg(test)]
mod tests;

use nvml_wrapper_sys::bindings::NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE;

pub(crate) use gpu::Gpu;
pub(crate) use mig::{MAX_MIG_DEVICES, MigDevice};
pub(crate) use spec::{EventKind, InitError, ProcessSpec, Reading, TopologyStep};

/// Functions a driver older than the given branch lacks: GPM first
/// appears in the R520 documentation, the versioned per-process
/// utilisation in R550.
const SINCE: &[(&str, u32)] = &[
    ("nvmlGpmQueryDeviceSupport", 520),
    ("nvmlGpmSampleAlloc", 520),
    ("nvmlGpmSampleFree", 520),
    ("nvmlGpmSampleGet", 520),
    ("nvmlGpmMigSampleGet", 520),
    ("nvmlGpmMetricsGet", 520),
    ("nvmlDeviceGetProcessesUtilizationInfo", 550),
    // First in the 13.0 header (R580); drivers before it lack the symbol.
    ("nvmlDeviceGetAddressingMode", 580),
];

/// NVML 12.8 (driver R570) is the first header with
/// `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION` (NVIDIA/go-nvml's copy of nvml.h,
/// "Bump to NVML version 12.8"): an older driver does not know the field.
pub(crate) const RECOVERY_ACTION_SINCE: u32 = 570;

/// The built-in scenario used when `GPUSCOPE_SIM_SCENARIO` is unset.
pub const DEMO_SCENARIO: &str = include_str!("../scenarios/demo.toml");

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub driver_version: String,
    pub cuda_driver_version: i32,
    pub nvml_version: String,
    pub call_delay_ms: u64,
    pub realistic_costs: bool,
    pub call_log: Option<std::path::PathBuf>,
    pub init_error: Option<InitError>,
    pub missing_functions: Vec<String>,
    pub hang_init: bool,
    pub hang_after_s: Option<f64>,
    pub gpus: Vec<Gpu>,
    /// Which `gpus` are listed, in which order, from when; before the
    /// first step (and without steps) all of them, in file order.
    pub topology: Vec<TopologyStep>,
    all: Vec<usize>,
}

impl Scenario {
    /// Errors are a single line, because they end up as one line on stderr.
    pub(crate) fn parse(text: &str) -> Result<Scenario, String> {
        let spec: spec::ScenarioSpec = toml::from_str(text).map_err(|e| describe(text, &e))?;
        let nvml_version = spec.nvml_version.clone().unwrap_or_else(|| format!("12.{}", spec.driver_version));
        let max = NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE as usize;
        check_text("driver_version", &spec.driver_version, max)?;
        check_text("nvml_version", &nvml_version, max)?;
        for name in &spec.missing_functions {
            // nvmlErrorString returns a string, so it has no way to say "missing".
            if name == "nvmlErrorString" || !crate::api::EXPORTED.contains(&name.as_str()) {
                return Err(format!("missing_functions: {name:?} is not a function this library can hide"));
            }
        }
        let gpus = spec
            .gpu
            .into_iter()
            .enumerate()
            .map(|(i, g)| Gpu::resolve(i, g).map_err(|e| format!("gpu[{i}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, gpu) in gpus.iter().enumerate() {
            if gpus[..i].iter().any(|other| other.uuid == gpu.uuid) {
                return Err(format!("gpu[{i}]: uuid {:?} is used twice", gpu.uuid));
            }
        }
        check_topology(&spec.topology, gpus.len())?;
        if spec.hang_after_s.is_some_and(|s| !(s.is_finite() && s >= 0.0)) {
            return Err("hang_after_s must be a non-negative number".into());
        }
        Ok(Scenario {
            all: (0..gpus.len()).collect(),
            hang_init: spec.hang_init,
            hang_after_s: spec.hang_after_s,
            topology: spec.topology,
            driver_version: spec.driver_version,
            cuda_driver_version: spec.cuda_driver_version,
            nvml_version,
            call_delay_ms: spec.call_delay_ms,
            realistic_costs: spec.realistic_costs,
            call_log: spec.call_log.map(Into::into),
            init_error: spec.init_error,
            missing_functions: spec.missing_functions,
            gpus,
        })
    }

    /// Named in `missing_functions`, or newer than the scenario's driver.
    pub(crate) fn hides(&self, function: &str) -> bool {
        let major = self.driver_branch();
        let too_old = major.is_some_and(|m| SINCE.iter().any(|&(f, since)| f == function && m < since));
        too_old || self.missing_functions.iter().any(|f| f == function)
    }

    /// The driver's branch, 560 of "560.35.03"; `None` where it is no number.
    pub(crate) fn driver_branch(&self) -> Option<u32> {
        self.driver_version.split('.').next().and_then(|m| m.parse::<u32>().ok())
    }

    /// The positions in `gpus` of the devices listed at time `t`, by index.
    pub(crate) fn visible(&self, t: f64) -> &[usize] {
        self.topology.iter().rev().find(|s| s.at_s <= t).map_or(&self.all, |s| &s.gpus)
    }
}

fn check_topology(steps: &[TopologyStep], gpus: usize) -> Result<(), String> {
    for (i, step) in steps.iter().enumerate() {
        if !(step.at_s.is_finite() && step.at_s >= 0.0) {
            return Err(format!("topology[{i}]: at_s must be a non-negative number"));
        }
        if i > 0 && step.at_s <= steps[i - 1].at_s {
            return Err(format!("topology[{i}]: at_s must be later than the step before"));
        }
        for (j, &g) in step.gpus.iter().enumerate() {
            if g >= gpus {
                return Err(format!("topology[{i}]: there is no gpu[{g}]"));
            }
            if step.gpus[..j].contains(&g) {
                return Err(format!("topology[{i}]: gpu[{g}] is listed twice"));
            }
        }
    }
    Ok(())
}

/// Strings must survive the trip into a fixed-size C buffer.
pub(crate) fn check_text(what: &str, text: &str, buffer: usize) -> Result<(), String> {
    if text.contains('\0') {
        return Err(format!("{what} must not contain a NUL character"));
    }
    if text.len() >= buffer {
        return Err(format!("{what} is longer than NVML's {buffer}-byte buffer"));
    }
    Ok(())
}

/// toml's own Display spans several lines with a source excerpt; this keeps
/// the position and the message on one line.
fn describe(text: &str, err: &toml::de::Error) -> String {
    let message = err.message().trim().replace('\n', "; ");
    let Some(span) = err.span() else {
        return message;
    };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!("line {line}, column {column}: {message}")
}
