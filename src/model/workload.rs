use serde::{Deserialize, Serialize};

/// The container, Kubernetes pod or Slurm job a process runs in, as its
/// cgroup path names it; a pod's name, namespace and container name are
/// not in the path, and come from the kubelet or the container's own files
/// where gpuscope can read them (`pod`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub kind: WorkloadKind,
    /// The runtime's full id (64 hex digits).
    pub container_id: Option<String>,
    /// The Kubernetes pod's UID, with dashes.
    pub pod_uid: Option<String>,
    pub qos: Option<PodQos>,
    pub slurm_job: Option<u64>,
    /// `0`, `1`, ... or `batch`, `extern`, `interactive`.
    pub slurm_step: Option<String>,
    /// Only Slurm's cgroup v1 layout names the job's user.
    pub slurm_uid: Option<u32>,
    /// The pod's names, where a process in a pod could be named; flat in
    /// JSON (`pod_name`, `pod_namespace`, `container_name`, `pod_source`),
    /// absent in recordings made before gpuscope named pods.
    #[serde(flatten)]
    pub pod: PodNames,
}

/// A Kubernetes pod's names, each checked for the shape Kubernetes gives
/// names (lower-case letters, digits, `-` and `.`) and bounded as label
/// values are; `None` where no source said.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodNames {
    #[serde(default)]
    pub pod_name: Option<String>,
    #[serde(default)]
    pub pod_namespace: Option<String>,
    /// The container's name in the pod spec (not the runtime's id).
    #[serde(default)]
    pub container_name: Option<String>,
    #[serde(default)]
    pub pod_source: Option<PodSource>,
}

/// Which source named a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PodSource {
    /// The kubelet's PodResources API, by the GPUs the process uses.
    Kubelet,
    /// The container's own files: `HOSTNAME` in its environment and its
    /// service account's `namespace` file.
    Container,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WorkloadKind {
    #[serde(rename = "docker")]
    Docker,
    #[serde(rename = "containerd")]
    Containerd,
    #[serde(rename = "cri-o")]
    CriO,
    #[serde(rename = "podman")]
    Podman,
    #[serde(rename = "slurm")]
    Slurm,
}

/// Kubernetes' quality-of-service class, which names the pod's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PodQos {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// Characters of a container id shown where room is short, as `docker ps`
/// shows them.
pub const SHORT_ID: usize = 12;

impl Workload {
    /// A containerd container in the pod `uid`, not yet named.
    pub fn in_pod(container_id: &str, uid: &str) -> Self {
        Self {
            kind: WorkloadKind::Containerd,
            container_id: Some(container_id.into()),
            pod_uid: Some(uid.into()),
            qos: None,
            slurm_job: None,
            slurm_step: None,
            slurm_uid: None,
            pod: PodNames::default(),
        }
    }

    /// A few characters that tell workloads apart in a table: the pod
    /// first (a pod's containers belong together), else the container,
    /// else the Slurm job and step.
    pub fn tag(&self) -> String {
        if let Some(name) = &self.pod.pod_name {
            return format!("pod:{name}");
        }
        if let Some(uid) = &self.pod_uid {
            return format!("pod:{}", uid.chars().take(8).collect::<String>());
        }
        if let Some(id) = &self.container_id {
            return id.chars().take(SHORT_ID).collect();
        }
        match (self.slurm_job, &self.slurm_step) {
            (Some(job), Some(step)) => format!("slurm:{job}.{step}"),
            (Some(job), None) => format!("slurm:{job}"),
            _ => String::new(),
        }
    }

    /// What groups processes: the pod (its containers together), else the
    /// container, else the Slurm job and step.
    pub fn group_key(&self) -> (u8, String) {
        match (&self.pod_uid, &self.container_id, self.slurm_job) {
            (Some(pod), ..) => (0, pod.clone()),
            (None, Some(id), _) => (1, id.clone()),
            (None, None, Some(job)) => (2, format!("{job:020}.{}", self.slurm_step.as_deref().unwrap_or(""))),
            (None, None, None) => (3, String::new()),
        }
    }

    /// Every id it carries, for a filter to match against.
    pub fn search_text(&self) -> String {
        let mut parts = vec![self.kind.name().to_string(), self.tag()];
        parts.extend(self.container_id.clone());
        parts.extend(self.pod_uid.clone());
        parts.extend(self.pod.pod_namespace.clone());
        parts.extend(self.pod.container_name.clone());
        parts.extend(self.slurm_job.map(|j| j.to_string()));
        parts.join(" ")
    }
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Docker => "docker",
            Self::Containerd => "containerd",
            Self::CriO => "cri-o",
            Self::Podman => "podman",
            Self::Slurm => "slurm",
        }
    }
}

/// Where gpuscope runs, as far as PIDs go: in the host's PID namespace,
/// NVML's PIDs are this machine's; in any other, they are not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PidNamespace {
    Host,
    Container,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_prefer_the_pod_then_the_container_then_the_job() {
        let id = "a".repeat(64);
        let mut w = Workload {
            kind: WorkloadKind::Containerd,
            container_id: Some(id.clone()),
            pod_uid: Some("0f1e2d3c-1111-2222-3333-444455556666".into()),
            qos: Some(PodQos::Burstable),
            slurm_job: None,
            slurm_step: None,
            slurm_uid: None,
            pod: PodNames::default(),
        };
        assert_eq!(w.tag(), "pod:0f1e2d3c");
        let named = PodNames { pod_name: Some("trainer-0".into()), ..PodNames::default() };
        assert_eq!(Workload { pod: named, ..w.clone() }.tag(), "pod:trainer-0");
        w.pod_uid = None;
        assert_eq!(w.tag(), "aaaaaaaaaaaa");
        let job = Workload { kind: WorkloadKind::Slurm, container_id: None, slurm_job: Some(77), ..w.clone() };
        assert_eq!(job.tag(), "slurm:77");
        let step = Workload { slurm_step: Some("batch".into()), ..job };
        assert_eq!(step.tag(), "slurm:77.batch");
        assert!(w.search_text().contains("containerd") && w.search_text().contains(&id));
        assert_eq!(serde_json::to_value(WorkloadKind::CriO).unwrap(), "cri-o");
        assert_eq!(serde_json::to_value(PodQos::BestEffort).unwrap(), "besteffort");
    }
}
