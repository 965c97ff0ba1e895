//! The kubelet's PodResources `List` over its unix socket, as dcgm-exporter
//! asks it: which pod, namespace and container each device (a GPU's UUID,
//! a MIG device's) is allocated to. Asked on a thread of its own, at most
//! every [`REFRESH`], each call within [`TIMEOUT`], so a hung kubelet
//! never holds a tick; the newest answer is what the ticks join with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Endpoint, Uri};

use super::k8s_name;
use super::proto::{LIST_PATH, ListPodResourcesRequest, ListPodResourcesResponse, PodResources};

/// Where the kubelet serves PodResources (Kubernetes' device-plugin docs,
/// "Monitoring device plugin resources").
pub const SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// How long one `List` may take, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(1);

/// How often the answer is asked again: pods come and go on that scale.
pub const REFRESH: Duration = Duration::from_secs(10);

/// The largest answer read: the kubelet's own PodResources client allows
/// 16 MiB (`podresources.MaxMsgSize`, pkg/kubelet/apis/podresources); a
/// node of 110 pods answers in tens of KiB.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Devices kept from one answer, and pods claiming one device: far above
/// a real node's, so a hostile answer costs bounded memory.
const MAX_DEVICES: usize = 4096;
const MAX_CLAIMS_PER_DEVICE: usize = 64;

/// One container that was allocated a device.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Claim {
    pub pod: String,
    pub namespace: String,
    pub container: Option<String>,
}

/// What one `List` said, by device id as [`device_key`] spells it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claims {
    by_device: HashMap<String, Vec<Claim>>,
}

impl Claims {
    /// The GPU devices of an answer: resources the NVIDIA device plugin
    /// names (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`, ...), pods and
    /// namespaces whose names have Kubernetes' shape; the rest is skipped.
    pub fn from_pods(pods: &[PodResources]) -> Self {
        let mut by_device: HashMap<String, Vec<Claim>> = HashMap::new();
        for pod in pods {
            let (Some(name), Some(namespace)) = (k8s_name(&pod.name, 253), k8s_name(&pod.namespace, 63)) else {
                continue;
            };
            for c in &pod.containers {
                let claim = Claim { pod: name.clone(), namespace: namespace.clone(), container: k8s_name(&c.name, 63) };
                let gpus = c.devices.iter().filter(|d| d.resource_name.starts_with("nvidia.com/"));
                for id in gpus.flat_map(|d| &d.device_ids) {
                    let key = device_key(id);
                    if !by_device.contains_key(&key) && by_device.len() >= MAX_DEVICES {
                        continue;
                    }
                    let claims = by_device.entry(key).or_default();
                    if claims.len() < MAX_CLAIMS_PER_DEVICE && !claims.contains(&claim) {
                        claims.push(claim.clone());
                    }
                }
            }
        }
        Self { by_device }
    }

    /// The containers allocated the device `id` (a UUID, or an index).
    pub fn of(&self, id: &str) -> &[Claim] {
        self.by_device.get(&device_key(id)).map_or(&[], Vec::as_slice)
    }
}

/// A device id as the NVIDIA device plugin gives it, made comparable with
/// NVML's: with time-slicing or MPS sharing on, each GPU is offered as
/// several replicas, `<uuid>::<n>` (k8s-device-plugin's `AnnotatedID`), all
/// the one GPU; UUIDs compare without regard to case.
pub fn device_key(id: &str) -> String {
    id.split_once("::").map_or(id, |(uuid, _)| uuid).to_ascii_lowercase()
}

/// Why a `List` gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("the kubelet did not answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot connect to the kubelet: {0}")]
    Connect(#[from] tonic::transport::Error),
    #[error("the kubelet refused: {0}")]
    Status(#[from] tonic::Status),
}

/// Asks the kubelet on `socket` for every pod's resources, within
/// `timeout`, reading at most `max_bytes` of answer.
pub async fn list(socket: &Path, timeout: Duration, max_bytes: usize) -> Result<Vec<PodResources>, KubeletError> {
    tokio::time::timeout(timeout, list_unbounded(socket, max_bytes))
        .await
        .unwrap_or(Err(KubeletError::Timeout(timeout)))
}

async fn list_unbounded(socket: &Path, max_bytes: usize) -> Result<Vec<PodResources>, KubeletError> {
    let socket = socket.to_owned();
    // The URI is a placeholder: every connection goes to the socket.
    let channel = Endpoint::from_static("http://kubelet.sock")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(socket).await?)) }
        }))
        .await?;
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(max_bytes);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static(LIST_PATH);
    let codec = tonic_prost::ProstCodec::<ListPodResourcesRequest, ListPodResourcesResponse>::default();
    let answer = grpc.unary(tonic::Request::new(ListPodResourcesRequest {}), path, codec).await?;
    Ok(answer.into_inner().pod_resources)
}

/// The newest answer and its generation (one more for each answer).
type Latest = Arc<Mutex<(u64, Option<Arc<Claims>>)>>;

/// The thread that asks the kubelet every [`REFRESH`]; it ends when this
/// is dropped.
pub struct Watch {
    latest: Latest,
    _stop: mpsc::Sender<()>,
}

impl Watch {
    pub fn start(socket: PathBuf) -> Option<Self> {
        let latest: Latest = Arc::default();
        let (stop, stopped) = mpsc::channel();
        let shared = latest.clone();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
        std::thread::Builder::new()
            .name("gpuscope-kubelet".into())
            .spawn(move || {
                loop {
                    // A failed call keeps the last answer: the pods it named
                    // mostly still run, and a new one falls to the container path.
                    if let Ok(pods) = runtime.block_on(list(&socket, TIMEOUT, MAX_ANSWER_BYTES)) {
                        let claims = Arc::new(Claims::from_pods(&pods));
                        if let Ok(mut l) = shared.lock() {
                            *l = (l.0 + 1, Some(claims));
                        }
                    }
                    match stopped.recv_timeout(REFRESH) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => break,
                    }
                }
            })
            .ok()?;
        Some(Self { latest, _stop: stop })
    }

    /// The newest answer, if one came, with its generation.
    pub fn latest(&self) -> (u64, Option<Arc<Claims>>) {
        self.latest.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, namespace: &str, container: &str, resource: &str, ids: &[&str]) -> PodResources {
        let mut p = PodResources::with_gpus(name, namespace, &[(container, ids)]);
        p.containers[0].devices[0].resource_name = resource.into();
        p
    }

    #[test]
    fn gpus_mig_devices_and_shared_replicas_are_claimed_by_their_containers() {
        let pods = [
            pod("trainer-0", "ml", "main", "nvidia.com/gpu", &["GPU-AAAA"]),
            pod("notebook", "lab", "jupyter", "nvidia.com/mig-1g.10gb", &["MIG-bbbb"]),
            pod("a", "shared", "x", "nvidia.com/gpu", &["GPU-cccc::0"]),
            pod("b", "shared", "y", "nvidia.com/gpu", &["GPU-cccc::1"]),
            pod("nic", "net", "z", "example.com/sriov", &["GPU-dddd"]),
            pod("Bad Name", "ml", "main", "nvidia.com/gpu", &["GPU-eeee"]),
        ];
        let c = Claims::from_pods(&pods);
        let main = Claim { pod: "trainer-0".into(), namespace: "ml".into(), container: Some("main".into()) };
        assert_eq!(c.of("GPU-aaaa"), [main]);
        assert_eq!(c.of("MIG-bbbb")[0].pod, "notebook");
        assert_eq!(c.of("GPU-cccc").len(), 2, "time-slicing: two pods on one GPU");
        assert!(c.of("GPU-dddd").is_empty(), "not a GPU resource");
        assert!(c.of("GPU-eeee").is_empty(), "a name Kubernetes would not give is dropped");
    }

    #[test]
    fn a_hostile_answer_keeps_bounded_claims() {
        let ids: Vec<String> = (0..MAX_DEVICES + 100).map(|i| format!("GPU-{i}")).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut pods = vec![pod("p", "n", "c", "nvidia.com/gpu", &refs)];
        pods.extend(
            (0..MAX_CLAIMS_PER_DEVICE + 10).map(|i| pod(&format!("p{i}"), "n", "c", "nvidia.com/gpu", &["GPU-0"])),
        );
        let c = Claims::from_pods(&pods);
        assert_eq!(c.by_device.len(), MAX_DEVICES);
        assert_eq!(c.of("GPU-0").len(), MAX_CLAIMS_PER_DEVICE);
    }
}
