use serde::{Deserialize, Serialize};

/// The machine the GPUs sit in. Every reading is `None` when it could not be
/// taken (for CPU usage: on the first sample, which has nothing to compare to).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    pub hostname: Option<String>,
    /// Busy share of all logical CPUs together, 0 to 100.
    pub cpu_percent: Option<f64>,
    pub cpu_count: Option<u32>,
    pub memory_total: Option<u64>,
    pub memory_used: Option<u64>,
    pub memory_available: Option<u64>,
    pub swap_total: Option<u64>,
    pub swap_used: Option<u64>,
    /// The machine's NUMA nodes and their CPUs
    /// (`/sys/devices/system/node/node*/cpulist`); `None` where sysfs does
    /// not say. Absent in recordings made before gpuscope read them.
    #[serde(default)]
    pub numa_nodes: Option<Vec<NumaNode>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub node: u32,
    /// As the kernel writes a CPU list: "0-31,64-95".
    pub cpus: String,
}
