//! Where the scenario comes from, and how a change to it is noticed.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::scenario::{DEMO_SCENARIO, Scenario};

/// Environment variable naming the scenario file.
pub const SCENARIO_ENV: &str = "GPUSCOPE_SIM_SCENARIO";

#[derive(Debug, Clone)]
pub(crate) enum Source {
    Demo,
    File(PathBuf),
}

/// Identifies one version of the file without reading it, so polling for
/// changes costs a `stat` rather than a parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    mtime_ns: i128,
    size: u64,
    inode: u64,
}

impl Source {
    pub(crate) fn from_env() -> Source {
        match std::env::var_os(SCENARIO_ENV) {
            Some(path) if !path.is_empty() => Source::File(path.into()),
            _ => Source::Demo,
        }
    }

    /// `None` for the built-in scenario, and for a file that cannot be
    /// stat'ed (its disappearance is itself a change worth reporting).
    pub(crate) fn fingerprint(&self) -> Option<Fingerprint> {
        let Source::File(path) = self else {
            return None;
        };
        let meta = std::fs::metadata(path).ok()?;
        Some(Fingerprint {
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            size: meta.size(),
            inode: meta.ino(),
        })
    }

    /// Errors are one line naming the source, ready for stderr.
    pub(crate) fn load(&self) -> Result<Scenario, String> {
        let text = match self {
            Source::Demo => DEMO_SCENARIO.to_owned(),
            Source::File(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("gpuscope-nvml-sim: cannot read scenario {self}: {e}"))?,
        };
        Scenario::parse(&text).map_err(|e| format!("gpuscope-nvml-sim: invalid scenario {self}: {e}"))
    }

    pub(crate) fn watched(&self) -> bool {
        matches!(self, Source::File(_))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Demo => f.write_str("(built-in demo)"),
            Source::File(path) => write!(f, "{}", path.display()),
        }
    }
}
