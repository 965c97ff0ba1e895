//! gpuscope's PodResources client against a stand-in kubelet: a tonic
//! server on a unix socket serving `v1.PodResourcesLister/List` with the
//! same messages (written from the kubelet's `api.proto`); a kubelet that
//! accepts and never answers; one whose answer is too big; none at all.
//! And the namer end to end: a process in a pod, named by the kubelet
//! through the GPU it uses.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use gpuscope::model::{Gpu, GpuState, PodSource, Process, ProcessGpu, Workload};
use gpuscope::sources::pods::kubelet::{self, Claims, KubeletError};
use gpuscope::sources::pods::proto::{LIST_PATH, ListPodResourcesRequest, ListPodResourcesResponse, PodResources};
use gpuscope::sources::pods::{PodNamer, effective_uid};
use tonic::body::Body;
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic_prost::ProstCodec;

/// The stand-in kubelet: answers `List` with `answer`.
#[derive(Clone)]
struct Kubelet {
    answer: Arc<ListPodResourcesResponse>,
}

struct List(Arc<ListPodResourcesResponse>);

impl UnaryService<ListPodResourcesRequest> for List {
    type Response = ListPodResourcesResponse;
    type Future = Ready<Result<tonic::Response<Self::Response>, tonic::Status>>;
    fn call(&mut self, _: tonic::Request<ListPodResourcesRequest>) -> Self::Future {
        ready(Ok(tonic::Response::new((*self.0).clone())))
    }
}

/// What tonic's code generator writes for a service, by hand: route the
/// method's path to its handler.
impl tower::Service<http::Request<Body>> for Kubelet {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let answer = self.answer.clone();
        Box::pin(async move {
            if req.uri().path() != LIST_PATH {
                return Ok(tonic::Status::unimplemented(req.uri().path().to_owned()).into_http());
            }
            let codec = ProstCodec::<ListPodResourcesResponse, ListPodResourcesRequest>::default();
            Ok(Grpc::new(codec).max_encoding_message_size(usize::MAX).unary(List(answer), req).await)
        })
    }
}

impl NamedService for Kubelet {
    const NAME: &'static str = "v1.PodResourcesLister";
}

fn pod(name: &str, namespace: &str, container: &str, ids: &[&str]) -> PodResources {
    PodResources::with_gpus(name, namespace, &[(container, ids)])
}

/// Serves `pods` on a socket in `dir`, on the test's runtime.
fn serve(dir: &Path, pods: Vec<PodResources>) -> PathBuf {
    let socket = dir.join("kubelet.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let kubelet = Kubelet { answer: Arc::new(ListPodResourcesResponse { pod_resources: pods }) };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(kubelet)
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
    );
    socket
}

#[tokio::test]
async fn list_reads_the_pods_and_their_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let socket = serve(
        dir.path(),
        vec![pod("trainer-0", "ml", "main", &["GPU-aaaa"]), pod("notebook", "lab", "jupyter", &["GPU-bbbb::3"])],
    );
    let pods = kubelet::list(&socket, kubelet::TIMEOUT, kubelet::MAX_ANSWER_BYTES).await.unwrap();
    assert_eq!(pods.len(), 2);
    let claims = Claims::from_pods(&pods);
    let c = &claims.of("GPU-AAAA")[0];
    assert_eq!((c.pod.as_str(), c.namespace.as_str(), c.container.as_deref()), ("trainer-0", "ml", Some("main")));
    assert_eq!(claims.of("GPU-bbbb")[0].pod, "notebook", "a shared GPU's replica is the GPU");
}

#[tokio::test]
async fn a_hung_kubelet_costs_the_timeout_and_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("kubelet.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    // Accepts, holds the connection, says nothing.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let started = Instant::now();
    let err = kubelet::list(&socket, Duration::from_millis(300), kubelet::MAX_ANSWER_BYTES).await.unwrap_err();
    assert!(matches!(err, KubeletError::Timeout(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "bounded by the timeout: {:?}", started.elapsed());
}

#[tokio::test]
async fn a_huge_answer_is_refused_past_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String> = (0..40_000).map(|i| format!("GPU-{i:032}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let socket = serve(dir.path(), vec![pod("hog", "ml", "c", &refs)]);
    // About 1.5 MiB of answer against a 1 MiB bound.
    let err = kubelet::list(&socket, kubelet::TIMEOUT, 1 << 20).await.unwrap_err();
    let KubeletError::Status(status) = &err else { panic!("{err}") };
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status}");
    // Within the bound the same answer reads, and the claims kept are bounded.
    let pods = kubelet::list(&socket, Duration::from_secs(5), kubelet::MAX_ANSWER_BYTES).await.unwrap();
    assert_eq!(Claims::from_pods(&pods).of("GPU-00000000000000000000000000000000").len(), 1);
}

#[tokio::test]
async fn no_socket_is_an_error_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let err = kubelet::list(&dir.path().join("absent.sock"), kubelet::TIMEOUT, 1024).await.unwrap_err();
    assert!(matches!(err, KubeletError::Connect(_)), "{err}");
}

fn in_pod(pid: u32, gpu: u32) -> Process {
    let w = Workload::in_pod(&"c".repeat(64), "0f1e2d3c-1111-2222-3333-444455556666");
    Process { workload: Some(Arc::new(w)), gpus: vec![ProcessGpu::compute(gpu)], ..Process::bare(pid) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namer_names_a_pod_s_process_through_its_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let socket = serve(dir.path(), vec![pod("trainer-0", "ml", "main", &["GPU-aaaa"])]);
    // An empty /proc: the container path names nothing, so the name is the kubelet's.
    let mut namer = PodNamer::new(socket, dir.path().join("proc"), effective_uid());
    let gpus = [Gpu { uuid: Some("GPU-aaaa".into()), ..Gpu::blank(0, GpuState::Ok) }];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut processes = vec![in_pod(7, 0)];
        namer.name(&mut processes, &gpus);
        let w = processes[0].workload.clone().unwrap();
        if let Some(name) = &w.pod.pod_name {
            assert_eq!(name, "trainer-0");
            assert_eq!(w.pod.pod_namespace.as_deref(), Some("ml"));
            assert_eq!(w.pod.container_name.as_deref(), Some("main"));
            assert_eq!(w.pod.pod_source, Some(PodSource::Kubelet));
            break;
        }
        assert!(Instant::now() < deadline, "the kubelet's answer never came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
