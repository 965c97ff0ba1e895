//! The kubelet's PodResources API, the part gpuscope reads, written by hand
//! from its protocol file so that building needs no `protoc`:
//! `k8s.io/kubelet/pkg/apis/podresources/v1/api.proto` (package `v1`,
//! service `PodResourcesLister`, its `List` call). Field numbers and types
//! are the file's; the fields gpuscope does not read (`cpu_ids`, `memory`,
//! `topology`, `dynamic_resources`) are left out, and protobuf skips what
//! a message carries beyond its declared fields.

/// The gRPC method path: `/<package>.<service>/<method>`.
pub const LIST_PATH: &str = "/v1.PodResourcesLister/List";

/// `message ListPodResourcesRequest {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesRequest {}

/// `message ListPodResourcesResponse { repeated PodResources pod_resources = 1; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

/// `message PodResources { string name = 1; string namespace = 2;
/// repeated ContainerResources containers = 3; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub namespace: String,
    #[prost(message, repeated, tag = "3")]
    pub containers: Vec<ContainerResources>,
}

/// `message ContainerResources { string name = 1;
/// repeated ContainerDevices devices = 2; ... }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<ContainerDevices>,
}

/// `message ContainerDevices { string resource_name = 1;
/// repeated string device_ids = 2; TopologyInfo topology = 3; }`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerDevices {
    #[prost(string, tag = "1")]
    pub resource_name: String,
    #[prost(string, repeated, tag = "2")]
    pub device_ids: Vec<String>,
}

impl PodResources {
    /// A pod whose containers were each allocated the NVIDIA GPUs `ids`
    /// (`nvidia.com/gpu`): what a stand-in kubelet answers.
    pub fn with_gpus(name: &str, namespace: &str, containers: &[(&str, &[&str])]) -> Self {
        let container = |(c, ids): &(&str, &[&str])| ContainerResources {
            name: (*c).into(),
            devices: vec![ContainerDevices {
                resource_name: "nvidia.com/gpu".into(),
                device_ids: ids.iter().map(|s| s.to_string()).collect(),
            }],
        };
        Self { name: name.into(), namespace: namespace.into(), containers: containers.iter().map(container).collect() }
    }
}
