//! Which container, Kubernetes pod or Slurm job a process belongs to,
//! from `/proc/PID/cgroup`. Pure: the host source reads the file once per
//! process, on first sight, and hands the text here.
//!
//! The runtimes name their cgroups after the container's 64-hex id, the
//! kubelet after the pod's UID and QoS class, slurmstepd after the job and
//! step. Every id is checked for its exact shape, so a path that merely
//! mentions `docker` or `job_` names nothing.

use std::path::Path;

use crate::model::{PodQos, Workload, WorkloadKind};
use crate::sources::procstat;

/// Far above any real cgroup file (a dozen short lines), so a hostile
/// one cannot make gpuscope read without end.
const MAX_BYTES: usize = 64 * 1024;

/// Reads and parses `/proc/PID/cgroup` under `proc_root`; `None` when it
/// cannot be read or names no workload.
pub fn read(proc_root: &Path, pid: u32) -> Option<Workload> {
    let raw = procstat::read_up_to(&proc_root.join(pid.to_string()).join("cgroup"), MAX_BYTES).ok()?;
    parse(std::str::from_utf8(&raw).ok()?)
}

/// The workload named by the most specific line: cgroup v2 has the one
/// `0::/path` line, v1 one line per hierarchy (`4:memory:/path`), where
/// some controllers may sit higher in the tree than others.
pub fn parse(cgroup: &str) -> Option<Workload> {
    let mut best: Option<(usize, Workload)> = None;
    for line in cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(_), Some(path)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let Some(w) = from_path(path) else { continue };
        let score = detail(&w);
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((score, w));
        }
    }
    best.map(|(_, w)| w)
}

fn detail(w: &Workload) -> usize {
    [
        w.container_id.is_some(),
        w.pod_uid.is_some(),
        w.qos.is_some(),
        w.slurm_job.is_some(),
        w.slurm_step.is_some(),
        w.slurm_uid.is_some(),
    ]
    .iter()
    .filter(|&&b| b)
    .count()
}

/// One cgroup path.
pub fn from_path(path: &str) -> Option<Workload> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let pod = pod(&segments);
    let container = container(&segments, pod.is_some());
    let slurm = slurm(&segments);
    let kind = match (&container, &slurm) {
        (Some((kind, _)), _) => *kind,
        (None, Some(_)) => WorkloadKind::Slurm,
        // A pod's own cgroup holds no process but its containers'.
        (None, None) => return None,
    };
    let (pod_uid, qos) = pod.map_or((None, None), |(uid, qos)| (Some(uid), Some(qos)));
    let (slurm_job, slurm_step, slurm_uid) = slurm.map_or((None, None, None), |s| (Some(s.job), s.step, s.uid));
    Some(Workload {
        kind,
        container_id: container.map(|(_, id)| id),
        pod_uid,
        qos,
        slurm_job,
        slurm_step,
        slurm_uid,
        pod: crate::model::PodNames::default(),
    })
}

/// The first segment that names a container, outermost first.
fn container(segments: &[&str], in_pod: bool) -> Option<(WorkloadKind, String)> {
    segments.iter().enumerate().find_map(|(i, seg)| {
        let after_docker = i > 0 && segments[i - 1] == "docker";
        named_container(seg)
            // cgroupfs drivers: `/docker/<id>`; under a pod, the bare id.
            // Kubernetes has run containerd (or CRI-O, whose ids carry
            // `crio-`) since dockershim left in 1.24.
            .or_else(|| (after_docker && is_hex64(seg)).then(|| (WorkloadKind::Docker, seg.to_string())))
            .or_else(|| (in_pod && is_hex64(seg)).then(|| (WorkloadKind::Containerd, seg.to_string())))
    })
}

/// `docker-<id>.scope`, `cri-containerd-<id>.scope`, `crio-<id>.scope`,
/// `libpod-<id>.scope`; with the cgroupfs driver, CRI-O and Podman drop
/// the `.scope`. Their `conmon` siblings fail the id check.
fn named_container(seg: &str) -> Option<(WorkloadKind, String)> {
    const PREFIXES: [(&str, WorkloadKind); 4] = [
        ("docker-", WorkloadKind::Docker),
        ("cri-containerd-", WorkloadKind::Containerd),
        ("crio-", WorkloadKind::CriO),
        ("libpod-", WorkloadKind::Podman),
    ];
    let base = seg.strip_suffix(".scope").unwrap_or(seg);
    PREFIXES.iter().find_map(|(prefix, kind)| {
        let id = base.strip_prefix(prefix)?;
        is_hex64(id).then(|| (*kind, id.to_string()))
    })
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The pod's UID and QoS class. systemd driver:
/// `kubepods-burstable-pod<uid>.slice` (`_` for `-` in the UID),
/// `kubepods-pod<uid>.slice` for Guaranteed; cgroupfs driver:
/// `kubepods/burstable/pod<uid>`, `kubepods/pod<uid>`.
fn pod(segments: &[&str]) -> Option<(String, PodQos)> {
    let systemd = segments.iter().find_map(|seg| {
        let rest = seg.strip_prefix("kubepods-")?.strip_suffix(".slice")?;
        let (qos, uid) = qos_and_pod(rest, '-')?;
        Some((pod_uid(&uid.replace('_', "-"))?, qos))
    });
    systemd.or_else(|| {
        let at = segments.iter().position(|s| *s == "kubepods")?;
        let rest = segments[at + 1..].iter().take(2).copied().collect::<Vec<_>>().join("/");
        let (qos, uid) = qos_and_pod(&rest, '/')?;
        Some((pod_uid(uid.split('/').next()?)?, qos))
    })
}

/// `burstable<sep>pod<uid>`, `besteffort<sep>pod<uid>` or `pod<uid>`.
fn qos_and_pod(s: &str, sep: char) -> Option<(PodQos, &str)> {
    for (name, qos) in [("burstable", PodQos::Burstable), ("besteffort", PodQos::BestEffort)] {
        if let Some(rest) = s.strip_prefix(name).and_then(|r| r.strip_prefix(sep)) {
            return Some((qos, rest.strip_prefix("pod")?));
        }
    }
    Some((PodQos::Guaranteed, s.strip_prefix("pod")?))
}

/// A UUID (`8-4-4-4-12` hex), or the 32 hex digits the kubelet gives a
/// static pod.
fn pod_uid(s: &str) -> Option<String> {
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = s.split('-').collect();
    let uuid = parts.len() == 5 && parts.iter().zip([8, 4, 4, 4, 12]).all(|(p, n)| hex(p, n));
    (uuid || hex(s, 32)).then(|| s.to_ascii_lowercase())
}

struct Slurm {
    job: u64,
    step: Option<String>,
    uid: Option<u32>,
}

/// cgroup v2: `.../slurmstepd.scope/job_<id>/step_<step>/...` (with
/// several slurmd per node the scope is `<node>_slurmstepd.scope`);
/// v1: `/slurm/uid_<uid>/job_<id>/step_<step>/...` (or `slurm_<node>`).
fn slurm(segments: &[&str]) -> Option<Slurm> {
    let v2 = segments.iter().position(|s| s.ends_with("slurmstepd.scope")).map(|at| (at + 1, None));
    let v1 = || {
        let at = segments.iter().position(|s| *s == "slurm" || s.starts_with("slurm_"))?;
        let uid = segments.get(at + 1)?.strip_prefix("uid_")?;
        Some((at + 2, Some(digits(uid)?)))
    };
    let (job_at, uid) = v2.or_else(v1)?;
    let job = digits(segments.get(job_at)?.strip_prefix("job_")?)?;
    let step = segments.get(job_at + 1).and_then(|s| s.strip_prefix("step_")).filter(|s| is_step(s));
    Some(Slurm { job, step: step.map(str::to_string), uid })
}

fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A number, or a name such as `batch`, `extern`, `interactive`.
fn is_step(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: &str = "4f1c0a2b3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";
    const UID: &str = "7a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9";

    fn container(kind: WorkloadKind, pod: Option<(&str, PodQos)>) -> Workload {
        Workload {
            kind,
            container_id: Some(ID.into()),
            pod_uid: pod.map(|(u, _)| u.into()),
            qos: pod.map(|(_, q)| q),
            slurm_job: None,
            slurm_step: None,
            slurm_uid: None,
            pod: crate::model::PodNames::default(),
        }
    }

    fn slurm(job: u64, step: Option<&str>, uid: Option<u32>) -> Workload {
        Workload {
            kind: WorkloadKind::Slurm,
            container_id: None,
            pod_uid: None,
            qos: None,
            slurm_job: Some(job),
            slurm_step: step.map(Into::into),
            slurm_uid: uid,
            pod: crate::model::PodNames::default(),
        }
    }

    #[test]
    fn docker_on_cgroup_v2_systemd_and_cgroupfs() {
        let want = Some(container(WorkloadKind::Docker, None));
        assert_eq!(parse(&format!("0::/system.slice/docker-{ID}.scope\n")), want);
        assert_eq!(parse(&format!("0::/docker/{ID}\n")), want);
    }

    #[test]
    fn docker_on_cgroup_v1_takes_the_line_that_names_it() {
        let v1 = format!(
            "12:hugetlb:/docker/{ID}\n11:memory:/docker/{ID}\n4:cpu,cpuacct:/docker/{ID}\n\
             1:name=systemd:/docker/{ID}\n0::/system.slice/containerd.service\n"
        );
        assert_eq!(parse(&v1), Some(container(WorkloadKind::Docker, None)));
    }

    #[test]
    fn containerd_under_kubernetes_with_the_systemd_driver() {
        let uid = UID.replace('-', "_");
        let burstable = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/cri-containerd-{ID}.scope\n"
        );
        assert_eq!(parse(&burstable), Some(container(WorkloadKind::Containerd, Some((UID, PodQos::Burstable)))));
        let besteffort = format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid}.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(parse(&besteffort), Some(container(WorkloadKind::Containerd, Some((UID, PodQos::BestEffort)))));
        let guaranteed = format!("0::/kubepods.slice/kubepods-pod{uid}.slice/cri-containerd-{ID}.scope");
        assert_eq!(parse(&guaranteed), Some(container(WorkloadKind::Containerd, Some((UID, PodQos::Guaranteed)))));
    }

    #[test]
    fn containerd_under_kubernetes_with_the_cgroupfs_driver() {
        let v1 =
            format!("11:memory:/kubepods/burstable/pod{UID}/{ID}\n1:name=systemd:/kubepods/burstable/pod{UID}/{ID}\n");
        assert_eq!(parse(&v1), Some(container(WorkloadKind::Containerd, Some((UID, PodQos::Burstable)))));
        let guaranteed = format!("0::/kubepods/pod{UID}/{ID}");
        assert_eq!(parse(&guaranteed), Some(container(WorkloadKind::Containerd, Some((UID, PodQos::Guaranteed)))));
        // A static pod's UID is a hash, not a UUID.
        let static_uid = "3b5f0b1b2f4a4e1d6c5bd6ab3c3f9cf0";
        let w = parse(&format!("0::/kubepods/besteffort/pod{static_uid}/{ID}")).unwrap();
        assert_eq!((w.pod_uid.as_deref(), w.qos), (Some(static_uid), Some(PodQos::BestEffort)));
    }

    #[test]
    fn cri_o_and_podman() {
        let uid = UID.replace('-', "_");
        let crio =
            format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/crio-{ID}.scope");
        assert_eq!(parse(&crio), Some(container(WorkloadKind::CriO, Some((UID, PodQos::Burstable)))));
        let crio_cgroupfs = format!("0::/kubepods/besteffort/pod{UID}/crio-{ID}");
        assert_eq!(parse(&crio_cgroupfs).map(|w| w.kind), Some(WorkloadKind::CriO));
        // The monitor beside the container is not the container.
        assert_eq!(parse(&format!("0::/kubepods.slice/crio-conmon-{ID}.scope")), None);

        let podman = Some(container(WorkloadKind::Podman, None));
        assert_eq!(parse(&format!("0::/machine.slice/libpod-{ID}.scope/container")), podman);
        let rootless = format!("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope");
        assert_eq!(parse(&rootless), podman);
        assert_eq!(parse(&format!("0::/machine.slice/libpod-conmon-{ID}.scope")), None);
    }

    #[test]
    fn slurm_on_cgroup_v2_and_v1() {
        let v2 = "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n";
        assert_eq!(parse(v2), Some(slurm(4242, Some("0"), None)));
        let batch = "0::/system.slice/node7_slurmstepd.scope/job_17/step_batch/user/task_0";
        assert_eq!(parse(batch), Some(slurm(17, Some("batch"), None)));
        let v1 = "10:freezer:/slurm/uid_1001/job_4242/step_3/task_0\n\
                  7:memory:/slurm/uid_1001/job_4242\n\
                  1:name=systemd:/system.slice/slurmd.service\n";
        assert_eq!(parse(v1), Some(slurm(4242, Some("3"), Some(1001))));
        // slurmstepd's own cgroup, outside any job.
        assert_eq!(parse("0::/system.slice/slurmstepd.scope/system"), None);
    }

    #[test]
    fn a_plain_session_or_service_is_no_workload() {
        let session = "0::/user.slice/user-1000.slice/session-3.scope\n";
        assert_eq!(parse(session), None);
        assert_eq!(parse("0::/system.slice/docker.service\n"), None);
        assert_eq!(parse("0::/\n"), None);
        // The host (and this machine) on cgroup v1 with another service's path.
        assert_eq!(parse("9:name=systemd:/\n4:memory:/process_api/73e0fb1e8b76f266a95e4de19610e1dc\n0::/"), None);
        // Ids of the wrong length or case, a pod without its container.
        assert_eq!(parse(&format!("0::/docker/{}", &ID[..63])), None);
        assert_eq!(parse(&format!("0::/docker/{}", ID.to_uppercase())), None);
        assert_eq!(parse(&format!("0::/kubepods/burstable/pod{UID}")), None);
        assert_eq!(parse(&format!("0::/kubepods/burstable/podnot-a-uid/{ID}")).and_then(|w| w.pod_uid), None);
        assert_eq!(parse("0::/slurm/uid_x/job_1/step_0"), None);
    }

    #[test]
    fn reads_this_process_without_failing() {
        // Whatever this machine's layout, reading it is safe; a PID that
        // does not exist gives nothing.
        let _ = read(Path::new("/proc"), std::process::id());
        assert_eq!(read(Path::new("/proc"), u32::MAX - 5), None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("7")).unwrap();
        std::fs::write(dir.path().join("7/cgroup"), format!("0::/docker/{ID}\n")).unwrap();
        assert_eq!(read(dir.path(), 7), Some(container(WorkloadKind::Docker, None)));
    }

    proptest! {
        #[test]
        fn garbage_never_panics_and_names_nothing(text in any::<String>()) {
            prop_assert_eq!(parse(&text), None);
        }

        #[test]
        fn garbage_paths_name_nothing(path in "(/[a-z0-9_.@:-]{0,12}){0,8}") {
            prop_assert_eq!(parse(&format!("0::{path}")), None);
        }

        #[test]
        fn cut_or_mangled_layouts_never_panic_and_only_yield_exact_ids(cut in 0usize..200, byte in any::<u8>()) {
            let uid = UID.replace('-', "_");
            let full = format!(
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/cri-containerd-{ID}.scope"
            );
            let at = cut.min(full.len());
            let mut bytes = full.as_bytes()[..at].to_vec();
            bytes.push(byte);
            let text = String::from_utf8_lossy(&bytes);
            if let Some(w) = parse(&text) {
                prop_assert!(w.container_id.as_deref().is_some_and(is_hex64), "{:?}", w);
            }
        }

        #[test]
        fn any_container_id_and_job_round_trips(id in "[0-9a-f]{64}", job in any::<u64>(), step in "[0-9]{1,4}|batch|extern") {
            let w = parse(&format!("0::/system.slice/docker-{id}.scope")).unwrap();
            prop_assert_eq!(w.container_id, Some(id));
            let s = parse(&format!("0::/system.slice/slurmstepd.scope/job_{job}/step_{step}/user")).unwrap();
            prop_assert_eq!((s.slurm_job, s.slurm_step), (Some(job), Some(step)));
        }
    }
}
