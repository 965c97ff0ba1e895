//! GPUs through NVML (nvml-wrapper). NVML is initialised once and kept;
//! static facts are read once per device; after a failure the library is
//! loaded again with backoff, while the rest of the snapshot goes on.

mod backoff;
mod device;
mod library;
mod processes;

use std::collections::HashMap;

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

use super::{GpuIdentity, GpuSample, GpuSource};
use crate::model::{Driver, Gpu, GpuSelector, GpuState, SourceStatus};
use backoff::Backoff;
use device::{DeviceStatic, read_gpu};
pub use library::{DEFAULT_LIBRARY, InitError, LibrarySpec};
use processes::ProcessMerger;

pub struct NvmlSource {
    spec: LibrarySpec,
    selectors: Vec<GpuSelector>,
    nvml: Option<Nvml>,
    devices: Vec<DeviceStatic>,
    /// Every device's identity, watched or not.
    all: Vec<GpuIdentity>,
    driver: Driver,
    backoff: Backoff,
    last_error: Option<String>,
    /// NVML's process names, kept per PID while the PID stays on a GPU.
    names: HashMap<u32, Option<String>>,
}

impl NvmlSource {
    /// Loads and initialises NVML now, so that a missing driver or a
    /// selector matching no GPU is reported before any output starts.
    pub fn open(spec: LibrarySpec, selectors: Vec<GpuSelector>) -> Result<Self, InitError> {
        let mut source = Self::unopened(spec, selectors);
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
            nvml: None,
            devices: Vec::new(),
            all: Vec::new(),
            backoff: Backoff::default(),
            last_error: None,
            names: HashMap::new(),
        }
    }

    fn init(&mut self) -> Result<(), InitError> {
        let nvml = self.spec.load()?;
        let (devices, all) = device::read_statics(&nvml, &self.selectors)?;
        self.driver = library::read_driver(&nvml, &self.spec);
        self.devices = devices;
        self.all = all;
        self.nvml = Some(nvml);
        self.backoff.reset();
        self.last_error = None;
        Ok(())
    }

    /// Gives up a session the driver has turned against (unloaded, or
    /// upgraded under us): the next samples load NVML again, with backoff.
    fn drop_session(&mut self, error: &NvmlError) {
        self.nvml = None;
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
}

impl GpuSource for NvmlSource {
    fn sample(&mut self) -> GpuSample {
        self.ensure_open();
        // Cheap, and the one call that fails when the session as a whole
        // has gone bad, even on a machine with no GPUs to query.
        if let Some(Err(e)) = self.nvml.as_ref().map(Nvml::device_count)
            && session_broken(&e)
        {
            self.drop_session(&e);
        }
        let Some(nvml) = &self.nvml else {
            let error = self.last_error.clone().unwrap_or_else(|| "NVML is not initialised".into());
            return GpuSample {
                driver: self.driver.clone(),
                status: SourceStatus::failed(error),
                ..GpuSample::default()
            };
        };
        let mut gpus = Vec::with_capacity(self.devices.len());
        let mut merger = ProcessMerger::default();
        for st in &mut self.devices {
            let gpu = match nvml.device_by_index(st.index) {
                Ok(dev) => {
                    st.refresh(&dev);
                    let gpu = read_gpu(&dev, st);
                    if gpu.state == GpuState::Ok {
                        merger.add_device(st.index, &dev);
                    }
                    gpu
                }
                Err(NvmlError::GpuLost) => st.apply(Gpu::blank(st.index, GpuState::Lost)),
                Err(e) => {
                    let mut gpu = st.apply(Gpu::blank(st.index, GpuState::Error));
                    gpu.error = Some(e.to_string());
                    gpu
                }
            };
            gpus.push(gpu);
        }
        let processes = merger.finish(nvml, &mut self.names);
        // Identities read late (a GPU that answered only now) catch up.
        for st in &self.devices {
            if let Some(id) = self.all.iter_mut().find(|i| i.index == st.index) {
                *id = st.identity();
            }
        }
        GpuSample {
            driver: self.driver.clone(),
            gpus,
            all_gpus: self.all.clone(),
            processes,
            status: SourceStatus::ok(),
        }
    }
}

/// Errors that mean the NVML session, not one device, is unusable.
fn session_broken(e: &NvmlError) -> bool {
    matches!(e, NvmlError::Uninitialized | NvmlError::DriverNotLoaded | NvmlError::LibRmVersionMismatch)
}
