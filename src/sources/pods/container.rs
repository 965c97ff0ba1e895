//! A pod's names from inside its container: `HOSTNAME` in the process's
//! environment is the pod's name (Kubernetes sets it so unless the spec
//! sets `hostname`), and the service account's `namespace` file (mounted
//! unless `automountServiceAccountToken: false`) its namespace. Read only
//! from gpuscope's own user's processes, or by root, as the kernel would
//! allow anyway (`/proc/PID/environ` needs ptrace-read access).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

use super::k8s_name;
use crate::model::{PodNames, PodSource};
use crate::sources::procstat;

/// `HOSTNAME` sits among the first variables a runtime sets; a bound
/// keeps a huge environment cheap.
const MAX_ENVIRON: usize = 64 * 1024;

/// Where the kubelet mounts the service account (Kubernetes docs,
/// "Configure Service Accounts for Pods"), under the container's root.
const NAMESPACE_FILE: &str = "var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The pod's names as process `pid`'s own files give them; `None` where
/// they cannot be read or are not names Kubernetes gives. `reader`: the
/// effective uid gpuscope runs as.
pub fn read(proc_root: &Path, pid: u32, reader: u32) -> Option<PodNames> {
    let dir = proc_root.join(pid.to_string());
    if reader != 0 && std::fs::metadata(&dir).ok()?.uid() != reader {
        return None;
    }
    let environ = procstat::read_up_to(&dir.join("environ"), MAX_ENVIRON).ok()?;
    let host = environ.split(|b| *b == 0).find_map(|kv| kv.strip_prefix(b"HOSTNAME="))?;
    let pod_name = k8s_name(std::str::from_utf8(host).ok()?, 253)?;
    Some(PodNames {
        pod_name: Some(pod_name),
        pod_namespace: namespace(&dir.join("root")),
        container_name: None,
        pod_source: Some(PodSource::Container),
    })
}

/// The namespace file under the process's root, every link in it resolved
/// inside that root (`RESOLVE_IN_ROOT`): the container's own files may
/// link anywhere, and an absolute link must not reach gpuscope's.
fn namespace(root: &Path) -> Option<String> {
    let root = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let how = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
    // Non-blocking, and only a regular file: a FIFO the container put
    // there must not hold the tick.
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let file = std::fs::File::from(rustix::fs::openat2(&root, NAMESPACE_FILE, flags, Mode::empty(), how).ok()?);
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = Vec::new();
    crate::util::bounded_read::read_into(file, &mut text, 256, None).ok()?;
    k8s_name(std::str::from_utf8(&text).ok()?.trim(), 63)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted `/proc` with process 42 in a pod.
    fn proc_with(environ: &[u8], namespace: Option<&str>) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("42");
        std::fs::create_dir_all(dir.join("root")).unwrap();
        std::fs::write(dir.join("environ"), environ).unwrap();
        if let Some(ns) = namespace {
            let sa = dir.join("root").join(NAMESPACE_FILE);
            std::fs::create_dir_all(sa.parent().unwrap()).unwrap();
            std::fs::write(sa, ns).unwrap();
        }
        root
    }

    fn me() -> u32 {
        crate::sources::pods::effective_uid()
    }

    #[test]
    fn hostname_and_the_service_account_name_the_pod() {
        let root = proc_with(b"PATH=/usr/bin\0HOSTNAME=trainer-7f9c-0\0HOME=/root\0", Some("ml-team\n"));
        let names = read(root.path(), 42, me()).unwrap();
        assert_eq!(names.pod_name.as_deref(), Some("trainer-7f9c-0"));
        assert_eq!(names.pod_namespace.as_deref(), Some("ml-team"));
        assert_eq!((names.container_name, names.pod_source), (None, Some(PodSource::Container)));
        // Without a mounted service account: the name alone.
        let root = proc_with(b"HOSTNAME=web-1\0", None);
        assert_eq!(read(root.path(), 42, me()).unwrap().pod_namespace, None);
    }

    #[test]
    fn another_user_s_process_is_not_read_unless_by_root() {
        let root = proc_with(b"HOSTNAME=web-1\0", Some("ns"));
        assert_eq!(read(root.path(), 42, me().wrapping_add(1).max(1)), None);
        if me() == 0 {
            assert!(read(root.path(), 42, 0).is_some());
        }
    }

    #[test]
    fn no_hostname_or_a_name_kubernetes_would_not_give_names_nothing() {
        for environ in [&b"PATH=/bin\0"[..], b"HOSTNAME=\x1b[31mevil\0", b"HOSTNAME=Upper_Case\0", b""] {
            let root = proc_with(environ, Some("ns"));
            assert_eq!(read(root.path(), 42, me()), None, "{environ:?}");
        }
        let root = proc_with(b"HOSTNAME=ok\0", Some("bad namespace!"));
        assert_eq!(read(root.path(), 42, me()).unwrap().pod_namespace, None);
    }

    #[test]
    fn an_absolute_link_in_the_container_resolves_inside_its_root() {
        let root = proc_with(b"HOSTNAME=web-1\0", None);
        let sa = root.path().join("42/root").join(NAMESPACE_FILE);
        std::fs::create_dir_all(sa.parent().unwrap()).unwrap();
        // Outside the container's root, a file a link might aim at.
        let outside = root.path().join("secret");
        std::fs::write(&outside, "stolen").unwrap();
        std::os::unix::fs::symlink(&outside, &sa).unwrap();
        assert_eq!(read(root.path(), 42, me()).unwrap().pod_namespace, None, "resolved inside the root: no such file");
        // A link inside the root, as the kubelet's own `..data` links are.
        std::fs::remove_file(&sa).unwrap();
        std::fs::write(sa.with_file_name("ns-data"), "prod").unwrap();
        std::os::unix::fs::symlink("ns-data", &sa).unwrap();
        assert_eq!(read(root.path(), 42, me()).unwrap().pod_namespace.as_deref(), Some("prod"));
    }
}
