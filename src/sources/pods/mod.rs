//! A Kubernetes pod's name, namespace and container name for each process
//! whose cgroup puts it in a pod (`workload.rs` finds the pod's UID).
//!
//! Two sources, in order:
//! 1. The kubelet's PodResources API (`kubelet.rs`), where its socket is
//!    there to ask. It names the pod, namespace and container each GPU
//!    was allocated to, but not the pod's UID, so the join goes through
//!    the GPU: a process in a pod, on GPUs all allocated to one pod, is
//!    that pod's (and that container's, where one container of it holds
//!    them). Where several pods share a GPU (time-slicing, MPS: the device
//!    plugin offers one GPU as several replicas) or the process's GPUs are
//!    allocated to different pods, the GPU cannot tell whose the process
//!    is, and the kubelet names nothing. A pod that sees GPUs it was not
//!    allocated (`NVIDIA_VISIBLE_DEVICES=all`, a privileged pod) takes
//!    the name of the pod they were allocated to: the API gives no more.
//! 2. Else the container's own files (`container.rs`): `HOSTNAME` and the
//!    service account's namespace, where gpuscope may read them.
//!
//! Each process is named once per kubelet answer; the names ride on its
//! `Workload`, which the host source shares between ticks.

mod container;
pub mod kubelet;
pub mod proto;

use std::path::PathBuf;
use std::sync::Arc;

use crate::hashing::IntMap;
use crate::model::{Gpu, PodNames, PodSource, Process, Workload};
use crate::sources::{NAME_MAX_CHARS, bounded};
use kubelet::{Claim, Claims};

pub use container::read as from_container;

/// A name as Kubernetes gives them: lower-case letters, digits, `-` and
/// `.` (RFC 1123 DNS labels and subdomains), at most `max` characters;
/// then bounded as a label value is. Anything else names nothing.
pub fn k8s_name(raw: &str, max: usize) -> Option<String> {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if raw.is_empty() || raw.len() > max || !raw.chars().all(ok) {
        return None;
    }
    Some(bounded(raw, NAME_MAX_CHARS).into_owned())
}

/// The effective uid: root may read any process's files.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The pod a process is in, by the kubelet's claims on its GPUs; `None`
/// where they do not name exactly one pod (see the module's rule).
pub fn by_gpus(claims: &Claims, process: &Process, gpus: &[Gpu]) -> Option<PodNames> {
    let mut found: Option<Vec<&Claim>> = None;
    for on in &process.gpus {
        let gpu = gpus.iter().find(|g| g.index == on.index);
        // A MIG device is allocated by its own UUID; a whole GPU by its
        // UUID, or by its index under the device plugin's index strategy.
        let ids = [on.mig_uuid.clone(), gpu.and_then(|g| g.uuid.clone()), Some(on.index.to_string())];
        let claims: Vec<&Claim> = ids.iter().flatten().flat_map(|id| claims.of(id)).collect();
        if claims.is_empty() {
            continue;
        }
        found.get_or_insert_with(Vec::new).extend(claims);
    }
    let found = found?;
    let first = found.first()?;
    if found.iter().any(|c| c.pod != first.pod || c.namespace != first.namespace) {
        return None;
    }
    let container = first.container.as_ref().filter(|name| found.iter().all(|c| c.container.as_ref() == Some(name)));
    Some(PodNames {
        pod_name: Some(first.pod.clone()),
        pod_namespace: Some(first.namespace.clone()),
        container_name: container.cloned(),
        pod_source: Some(PodSource::Kubelet),
    })
}

/// A process named: the workload it came with, and the one it got, for
/// the kubelet answer `generation`.
struct Named {
    from: Arc<Workload>,
    generation: u64,
    to: Arc<Workload>,
}

/// Names the processes in pods, tick after tick.
pub struct PodNamer {
    socket: PathBuf,
    proc_root: PathBuf,
    reader: u32,
    watch: Option<kubelet::Watch>,
    /// When the socket was last found missing: looked for again only
    /// after `kubelet::REFRESH`, not with every tick (gpuscope in a pod
    /// without the socket mounted would stat it every second).
    missing_since: Option<std::time::Instant>,
    named: IntMap<u32, Named>,
}

impl PodNamer {
    /// The kubelet's `socket` (asked only once a process in a pod is
    /// seen, and only where the socket is there) and the container files
    /// under `proc_root`, read as `reader` (an effective uid).
    pub fn new(socket: PathBuf, proc_root: PathBuf, reader: u32) -> Self {
        Self { socket, proc_root, reader, watch: None, missing_since: None, named: IntMap::default() }
    }

    /// This machine's: the kubelet's socket, `/proc`, gpuscope's own uid.
    pub fn system() -> Self {
        Self::new(PathBuf::from(kubelet::SOCKET), PathBuf::from("/proc"), effective_uid())
    }

    pub fn name(&mut self, processes: &mut [Process], gpus: &[Gpu]) {
        let in_pods = |p: &Process| p.workload.as_ref().is_some_and(|w| w.pod_uid.is_some());
        if !processes.iter().any(in_pods) {
            self.named.clear();
            return;
        }
        let look = self.missing_since.is_none_or(|t| t.elapsed() >= kubelet::REFRESH);
        if self.watch.is_none() && look {
            if self.socket.exists() {
                self.watch = kubelet::Watch::start(self.socket.clone());
                self.missing_since = None;
            } else {
                self.missing_since = Some(std::time::Instant::now());
            }
        }
        let (generation, claims) = self.watch.as_ref().map(kubelet::Watch::latest).unwrap_or_default();
        let mut seen = IntMap::default();
        for p in processes.iter_mut().filter(|p| in_pods(p)) {
            let Some(from) = p.workload.clone() else { continue };
            let to = match self.named.remove(&p.pid) {
                Some(n) if Arc::ptr_eq(&n.from, &from) && n.generation == generation => n.to,
                _ => {
                    let names = (claims.as_deref().and_then(|c| by_gpus(c, p, gpus)))
                        .or_else(|| container::read(&self.proc_root, p.pid, self.reader));
                    names.map_or_else(|| from.clone(), |pod| Arc::new(Workload { pod, ..(*from).clone() }))
                }
            };
            p.workload = Some(to.clone());
            seen.insert(p.pid, Named { from, generation, to });
        }
        self.named = seen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GpuState, ProcessGpu};
    use crate::sources::pods::proto::{ContainerDevices, ContainerResources, PodResources};
    use proptest::prelude::any;

    fn gpu(index: u32, uuid: &str) -> Gpu {
        Gpu { uuid: Some(uuid.into()), ..Gpu::blank(index, GpuState::Ok) }
    }

    fn in_pod(pid: u32, on: &[u32]) -> Process {
        let w = Workload::in_pod(&"c".repeat(64), "0f1e2d3c-1111-2222-3333-444455556666");
        let gpus = on.iter().copied().map(ProcessGpu::compute).collect();
        Process { workload: Some(Arc::new(w)), gpus, ..Process::bare(pid) }
    }

    fn pod(name: &str, containers: &[(&str, &[&str])]) -> PodResources {
        PodResources::with_gpus(name, "ml", containers)
    }

    #[test]
    fn one_pod_on_the_gpus_names_the_process_and_its_container() {
        let gpus = [gpu(0, "GPU-a"), gpu(1, "GPU-b"), gpu(2, "GPU-c")];
        let claims = Claims::from_pods(&[
            pod("trainer", &[("main", &["GPU-a", "GPU-b"])]),
            pod("sidecars", &[("left", &["GPU-c"]), ("right", &["GPU-c::1"])]),
        ]);
        let named = by_gpus(&claims, &in_pod(7, &[0, 1]), &gpus).unwrap();
        assert_eq!(
            (named.pod_name.as_deref(), named.pod_namespace.as_deref(), named.container_name.as_deref()),
            (Some("trainer"), Some("ml"), Some("main"))
        );
        assert_eq!(named.pod_source, Some(PodSource::Kubelet));
        // Two containers of one pod share GPU 2: the pod, not the container.
        let shared = by_gpus(&claims, &in_pod(8, &[2]), &gpus).unwrap();
        assert_eq!((shared.pod_name.as_deref(), shared.container_name), (Some("sidecars"), None));
    }

    #[test]
    fn gpus_of_several_pods_or_of_none_name_nothing() {
        let gpus = [gpu(0, "GPU-a"), gpu(1, "GPU-b")];
        let claims =
            Claims::from_pods(&[pod("x", &[("c", &["GPU-a::0"])]), pod("y", &[("c", &["GPU-a::1", "GPU-b"])])]);
        assert_eq!(by_gpus(&claims, &in_pod(7, &[0]), &gpus), None, "time-sliced between two pods");
        assert_eq!(by_gpus(&claims, &in_pod(7, &[]), &gpus), None);
        let only_y = by_gpus(&claims, &in_pod(7, &[1]), &gpus).unwrap();
        assert_eq!(only_y.pod_name.as_deref(), Some("y"));
        let index_strategy = Claims::from_pods(&[pod("by-index", &[("c", &["1"])])]);
        assert_eq!(by_gpus(&index_strategy, &in_pod(7, &[1]), &gpus).unwrap().pod_name.as_deref(), Some("by-index"));
    }

    #[test]
    fn without_a_kubelet_the_container_s_files_name_it_once_and_processes_outside_pods_are_left_alone() {
        let proc = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(proc.path().join("7/root")).unwrap();
        std::fs::write(proc.path().join("7/environ"), b"HOSTNAME=trainer-0\0").unwrap();
        let mut namer = PodNamer::new(proc.path().join("no-kubelet.sock"), proc.path().into(), effective_uid());
        let mut host = in_pod(9, &[0]);
        host.workload = None;
        let mut processes = vec![in_pod(7, &[0]), host];
        let gpus = [gpu(0, "GPU-a")];
        namer.name(&mut processes, &gpus);
        let w = processes[0].workload.clone().unwrap();
        assert_eq!((w.pod.pod_name.as_deref(), w.pod.pod_source), (Some("trainer-0"), Some(PodSource::Container)));
        assert!(processes[1].workload.is_none());
        assert!(namer.watch.is_none(), "no socket, no thread");
        // The next tick reuses the name, even once the file is gone.
        std::fs::remove_file(proc.path().join("7/environ")).unwrap();
        let mut again = vec![Process { workload: processes[0].workload.clone(), ..in_pod(7, &[0]) }];
        again[0].workload = namer.named.get(&7).map(|n| n.from.clone());
        namer.name(&mut again, &gpus);
        assert!(Arc::ptr_eq(again[0].workload.as_ref().unwrap(), &w));
    }

    #[test]
    fn only_names_kubernetes_gives_pass() {
        assert_eq!(k8s_name("trainer-0.ml", 253).as_deref(), Some("trainer-0.ml"));
        for bad in ["", "Trainer", "a b", "a_b", "\u{202E}x", &"a".repeat(64)] {
            assert_eq!(k8s_name(bad, 63), None, "{bad:?}");
        }
        let long = "a".repeat(253);
        assert_eq!(k8s_name(&long, 253).unwrap().chars().count(), NAME_MAX_CHARS, "bounded as labels are");
    }

    proptest::proptest! {
        #[test]
        fn any_text_from_the_kubelet_or_a_container_is_a_tame_name_or_none(raw in any::<String>(), id in any::<String>()) {
            if let Some(n) = k8s_name(&raw, 253) {
                proptest::prop_assert!(n.chars().count() <= NAME_MAX_CHARS);
                proptest::prop_assert!(n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.…".contains(c)));
            }
            let pods = [PodResources {
                name: raw.clone(),
                namespace: raw,
                containers: vec![ContainerResources {
                    name: id.clone(),
                    devices: vec![ContainerDevices { resource_name: "nvidia.com/gpu".into(), device_ids: vec![id.clone()] }],
                }],
            }];
            let claims = Claims::from_pods(&pods);
            for c in claims.of(&id) {
                proptest::prop_assert!(k8s_name(&c.pod, 253).is_some());
            }
        }
    }
}
