//! Which NVML library to load, and what its failures mean to a user.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Nvml, cuda_driver_version_major, cuda_driver_version_minor};

use crate::model::{Driver, SelectError};

/// The name nvml-wrapper (and every other NVML client) opens by default.
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// The simulated NVML built from `crates/nvml-sim`, embedded at build time.
static SIMULATOR: &[u8] = include_bytes!(env!("GPUSCOPE_SIM_LIB"));

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibrarySpec {
    /// A library name (searched by the dynamic loader) or a path.
    Path(OsString),
    /// gpuscope's own simulator (`--demo`).
    Simulated,
}

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(
        "cannot load the NVML library {lib} ({reason}); is the NVIDIA driver installed? \
         Point gpuscope at the library with --nvml-lib PATH (or GPUSCOPE_NVML_LIB), \
         or try it on simulated GPUs with --demo"
    )]
    Library { lib: String, reason: String },
    #[error("NVML ({lib}) could not start: {reason}")]
    Init { lib: String, reason: String },
    #[error("cannot write the simulated NVML library to a temporary directory: {0}")]
    Extract(std::io::Error),
    #[error(transparent)]
    Select(#[from] SelectError),
    #[error("NVML could not list the GPUs: {0}")]
    Devices(NvmlError),
}

impl LibrarySpec {
    pub fn describe(&self) -> String {
        match self {
            Self::Path(p) => p.to_string_lossy().into_owned(),
            Self::Simulated => "gpuscope simulated NVML".into(),
        }
    }

    pub fn load(&self) -> Result<Nvml, InitError> {
        match self {
            Self::Path(p) => init_at(p, self),
            Self::Simulated => {
                // Each load gets its own copy, so its state is its own; the
                // file can go as soon as the loader has mapped it.
                let dir = tempfile::Builder::new().prefix("gpuscope-sim-").tempdir().map_err(InitError::Extract)?;
                let path: PathBuf = dir.path().join("libnvidia-ml-sim.so");
                std::fs::write(&path, SIMULATOR).map_err(InitError::Extract)?;
                init_at(path.as_os_str(), self)
            }
        }
    }
}

/// Loads the library on a thread of its own that ends once it has.
/// Loading builds nvml-wrapper's table of every NVML function (several
/// kilobytes, copied from frame to frame) and, for the simulator, parses
/// its scenario: about 120 KiB of stack that the poller's thread, which
/// loads NVML on its first tick, kept resident for the life of the
/// dashboard. An ended thread's stack is handed back (glibc's
/// `advise_stack_range`). Where no thread can be started, the caller's
/// does the work.
pub fn load_aside(spec: &LibrarySpec) -> Result<Box<Nvml>, InitError> {
    std::thread::scope(|scope| {
        let aside = std::thread::Builder::new()
            .name("gpuscope-nvml-load".into())
            .stack_size(LOAD_STACK)
            .spawn_scoped(scope, || spec.load().map(Box::new));
        match aside {
            Ok(handle) => handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => spec.load().map(Box::new),
        }
    })
}

/// Ample for loading (it used about 120 KiB), and not taken from
/// `RUST_MIN_STACK`, which may be set small for the threads that stay.
const LOAD_STACK: usize = 2 << 20;

fn init_at(path: &std::ffi::OsStr, spec: &LibrarySpec) -> Result<Nvml, InitError> {
    Nvml::builder().lib_path(path).init().map_err(|e| {
        let lib = spec.describe();
        match e {
            NvmlError::LibloadingError(e) => {
                // dlerror() names the file first: said once, by `lib`.
                let reason = e.to_string();
                let reason = reason.strip_prefix(&format!("{lib}: ")).map_or_else(|| reason.clone(), str::to_owned);
                InitError::Library { lib, reason }
            }
            NvmlError::FailedToLoadSymbol(s) => {
                InitError::Library { lib, reason: format!("it lacks the NVML function {s}") }
            }
            NvmlError::DriverNotLoaded => {
                InitError::Init { lib, reason: "the NVIDIA kernel driver is not loaded".into() }
            }
            other => InitError::Init { lib, reason: other.to_string() },
        }
    })
}

/// The file the loaded library came from: the path given, or where the
/// dynamic loader found a bare name. `None` for the built-in simulator
/// (a fresh copy each run) and where no loaded object has that name.
pub fn loaded_file(spec: &LibrarySpec) -> Option<PathBuf> {
    let LibrarySpec::Path(name) = spec else { return None };
    // dlopen(3): a name with a slash in it is a path, anything else is
    // searched for.
    if name.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(name));
    }
    loaded_objects().into_iter().find(|path| path.file_name() == Some(name.as_os_str()))
}

/// The paths of the objects loaded into this process, as the dynamic
/// loader recorded them (a `dlopen`ed library under the path it was found
/// at).
fn loaded_objects() -> Vec<PathBuf> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr hands each call a valid `info` and the
        // `data` given below, a `Vec<PathBuf>` borrowed mutably for the
        // whole iteration and touched by nothing else meanwhile.
        let (info, found) = unsafe { (&*info, &mut *data.cast::<Vec<PathBuf>>()) };
        if !info.dlpi_name.is_null() {
            // SAFETY: a non-null `dlpi_name` is a NUL-terminated string
            // that lives while the object stays loaded, past this call.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                found.push(PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())));
            }
        }
        0
    }
    let mut found: Vec<PathBuf> = Vec::new();
    // SAFETY: `each` matches the callback's C signature and only reads
    // what it is handed; `found` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut found).cast()) };
    found
}

/// Versions are static for the life of the driver: read once per init.
pub fn read_driver(nvml: &Nvml, spec: &LibrarySpec) -> Driver {
    Driver {
        driver_version: nvml.sys_driver_version().ok(),
        cuda_driver_version: nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", cuda_driver_version_major(v), cuda_driver_version_minor(v))),
        nvml_version: nvml.sys_nvml_version().ok(),
        library: Some(spec.describe()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_where_the_loader_found_it() {
        let libc = loaded_file(&LibrarySpec::Path("libc.so.6".into())).expect("libc is loaded");
        assert!(libc.is_absolute() && libc.ends_with("libc.so.6") && libc.exists(), "{}", libc.display());
        assert_eq!(loaded_file(&LibrarySpec::Path("libnot-loaded-here.so.1".into())), None);
        assert_eq!(
            loaded_file(&LibrarySpec::Path("/opt/x/libnvidia-ml.so.1".into())),
            Some("/opt/x/libnvidia-ml.so.1".into())
        );
        assert_eq!(loaded_file(&LibrarySpec::Simulated), None);
    }

    #[test]
    fn loading_aside_brings_back_the_library_or_why_not() {
        let missing = LibrarySpec::Path("/nonexistent/libnvidia-ml.so.1".into());
        match load_aside(&missing) {
            Err(InitError::Library { lib, reason }) => {
                assert_eq!(lib, "/nonexistent/libnvidia-ml.so.1");
                assert!(!reason.contains(&lib), "the file is named once: {reason}");
            }
            other => panic!("expected a library error, got {:?}", other.map(|_| "a library")),
        }
        let nvml = load_aside(&LibrarySpec::Simulated).expect("the simulator loads");
        assert!(nvml.device_count().expect("it lists GPUs") > 0);
    }
}
