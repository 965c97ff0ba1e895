//! Whether gpuscope shares the host's PID namespace. NVML always reports
//! host PIDs; in a container with a PID namespace of its own they name
//! nothing here, or, worse, some other local process.
//!
//! One `readlink` at start-up: `/proc/self/ns/pid` links to
//! `pid:[INODE]`, and the kernel gives the initial PID namespace a fixed
//! inode. (`NSpid` in `/proc/self/status` does not tell: it lists PIDs
//! from the namespace of the procfs mount down, and a container mounts
//! its own procfs, so it shows one PID there too.)

use std::path::Path;

use crate::model::PidNamespace;

/// `PROC_PID_INIT_INO` in the kernel's `include/linux/proc_ns.h`
/// (0xEFFFFFFC), the same on every kernel since namespaces got inodes.
const INIT_PID_NS_INODE: u64 = 0xEFFF_FFFC;

/// Overrides what `/proc/self/ns/pid` says: `host` where NVML's PIDs are
/// this namespace's after all (a simulated NVML, gpuscope's own tests in
/// a container), `container` to see what a container would show.
pub const ENV: &str = "GPUSCOPE_PID_NAMESPACE";

/// The override if set, else what procfs says; an override that is
/// neither word is an error naming it.
pub fn current(proc_root: &Path) -> Result<Option<PidNamespace>, String> {
    match std::env::var_os(ENV) {
        None => Ok(detect(proc_root)),
        Some(v) => match v.to_str() {
            Some("host") => Ok(Some(PidNamespace::Host)),
            Some("container") => Ok(Some(PidNamespace::Container)),
            _ => Err(format!("{ENV} must be `host` or `container`, not {v:?}")),
        },
    }
}

/// `None` when the link cannot be read (procfs hidden, or no namespaces).
pub fn detect(proc_root: &Path) -> Option<PidNamespace> {
    let link = std::fs::read_link(proc_root.join("self/ns/pid")).ok()?;
    classify(link.to_str()?)
}

pub fn classify(link: &str) -> Option<PidNamespace> {
    let inode: u64 = link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()?;
    Some(if inode == INIT_PID_NS_INODE { PidNamespace::Host } else { PidNamespace::Container })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_namespace_is_the_host() {
        assert_eq!(classify("pid:[4026531836]"), Some(PidNamespace::Host));
        assert_eq!(classify("pid:[4026532461]"), Some(PidNamespace::Container));
        assert_eq!(classify("net:[4026531836]"), None);
        assert_eq!(classify("pid:[x]"), None);
    }

    #[test]
    fn reads_the_link_under_a_proc_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("self/ns")).unwrap();
        std::os::unix::fs::symlink("pid:[4026532999]", dir.path().join("self/ns/pid")).unwrap();
        assert_eq!(detect(dir.path()), Some(PidNamespace::Container));
        assert_eq!(detect(&dir.path().join("missing")), None);
        // This machine answers one way or the other.
        assert!(detect(Path::new("/proc")).is_some());
    }
}
