//! The machine's NUMA layout from sysfs: each node's CPUs
//! (`/sys/devices/system/node/node<N>/cpulist`) and each PCI device's node
//! (`/sys/bus/pci/devices/<domain:bus:device.function>/numa_node`). A GPU
//! fed from CPUs of another node pays the socket link on every host-to-
//! device copy. (`nvmlDeviceGetNumaNodeId` does not tell this: nvml.h says
//! it "only applies to platforms where the GPUs are NUMA nodes", the
//! GPU's own memory onlined as a node on Grace Hopper.)

use std::path::{Path, PathBuf};

use super::procstat;
use crate::model::{NumaNode, PciAddress};

/// A CPU list as the kernel writes it (`bitmap_print_to_pagebuf`'s "%*pbl",
/// Documentation/admin-guide/cgroup-v2.rst calls it "the List Format"):
/// comma-separated CPUs and inclusive ranges, "0-3,8-11". Kept as ranges,
/// so that a list is checked without being spelled out one CPU at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuList(Vec<(u32, u32)>);

/// Far above any machine's CPU count (the kernel's NR_CPUS tops out at
/// 8192): a list naming more ranges than this is not the kernel's.
const MAX_RANGES: usize = 8192;

impl CpuList {
    /// `None` for anything the kernel would not write: a range that runs
    /// backwards, a number that is not one, too many ranges. Empty text
    /// (an offline node, an empty cpuset) is an empty list.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.is_empty() {
            return Some(Self::default());
        }
        let mut ranges = Vec::new();
        for part in text.split(',') {
            if ranges.len() >= MAX_RANGES {
                return None;
            }
            let (first, last) = part.split_once('-').unwrap_or((part, part));
            let number = |s: &str| s.bytes().all(|b| b.is_ascii_digit()).then(|| s.parse::<u32>().ok()).flatten();
            let (first, last) = (number(first)?, number(last)?);
            if last < first {
                return None;
            }
            ranges.push((first, last));
        }
        Some(Self(ranges))
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.iter().any(|&(first, last)| (first..=last).contains(&cpu))
    }

    /// Whether any CPU is in both lists.
    pub fn meets(&self, other: &Self) -> bool {
        self.0.iter().any(|&(a, b)| other.0.iter().any(|&(c, d)| a <= d && c <= b))
    }
}

/// The nodes and their CPUs, ascending by node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<(u32, CpuList, String)>,
}

/// More nodes than any machine has (the kernel's MAX_NUMNODES is 1024).
const MAX_NODES: usize = 1024;

impl Topology {
    /// `None` where sysfs shows no nodes (mounted elsewhere, or hidden).
    pub fn read(sys_root: &Path) -> Option<Self> {
        let dir = sys_root.join("devices/system/node");
        let mut nodes = Vec::new();
        for entry in std::fs::read_dir(&dir).ok()?.flatten().take(MAX_NODES * 4) {
            let name = entry.file_name();
            let Some(node) = name.to_str().and_then(|n| n.strip_prefix("node")).and_then(|n| n.parse().ok()) else {
                continue;
            };
            let Some(text) = procstat::read_small_text(&dir.join(name).join("cpulist")) else { continue };
            let Some(cpus) = CpuList::parse(&text) else { continue };
            nodes.push((node, cpus, text.trim().to_owned()));
            if nodes.len() >= MAX_NODES {
                break;
            }
        }
        nodes.sort_by_key(|(node, ..)| *node);
        (!nodes.is_empty()).then_some(Self { nodes })
    }

    pub fn node_of(&self, cpu: u32) -> Option<u32> {
        self.nodes.iter().find(|(_, cpus, _)| cpus.contains(cpu)).map(|(node, ..)| *node)
    }

    /// The nodes holding any CPU of `cpus`, ascending.
    pub fn nodes_of(&self, cpus: &CpuList) -> Vec<u32> {
        self.nodes.iter().filter(|(_, list, _)| list.meets(cpus)).map(|(node, ..)| *node).collect()
    }

    pub fn nodes(&self) -> Vec<NumaNode> {
        self.nodes.iter().map(|(node, _, text)| NumaNode { node: *node, cpus: text.clone() }).collect()
    }
}

/// The NUMA node of the PCI device NVML calls `bus_id`
/// ("00000000:1B:00.0"); `None` where sysfs says -1 (the firmware gave no
/// affinity, as on a one-node machine) or cannot say.
pub fn pci_node(sys_root: &Path, bus_id: &str) -> Option<u32> {
    let text = procstat::read_small_text(&pci_device_dir(sys_root, bus_id)?.join("numa_node"))?;
    parse_node(&text)
}

/// sysfs names a PCI device as the kernel prints it: a domain of at least
/// four hex digits, all lower case ("0000:1b:00.0").
fn pci_device_dir(sys_root: &Path, bus_id: &str) -> Option<PathBuf> {
    Some(sys_root.join("bus/pci/devices").join(PciAddress::parse(bus_id)?.sysfs_name()))
}

/// `numa_node`: a node number, or -1 for none.
fn parse_node(text: &str) -> Option<u32> {
    text.trim().parse::<i64>().ok().and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(text: &str) -> CpuList {
        CpuList::parse(text).unwrap()
    }

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        let l = list("0-3,8-11\n");
        assert_eq!(l, CpuList(vec![(0, 3), (8, 11)]));
        assert!(l.contains(0) && l.contains(3) && l.contains(9) && !l.contains(4) && !l.contains(12));
        assert_eq!(list("5"), CpuList(vec![(5, 5)]));
        assert_eq!(list(""), CpuList::default(), "an offline node's, or an empty cpuset's");
        assert!(list("0-3").meets(&list("3-5")) && !list("0-3").meets(&list("4-7")));
        assert!(!CpuList::default().meets(&list("0-3")));
        for bad in ["3-1", "a", "1,,2", "-1", "1-", "0-4294967296", "+1", " 1 - 2", "1-2-3"] {
            assert_eq!(CpuList::parse(bad), None, "{bad:?}");
        }
    }

    /// A two-socket machine: node 0 has CPUs 0-3 and 8-11, node 1 4-7 and
    /// 12-15, the GPU hangs off node 1.
    fn machine() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let node = |n: u32, cpus: &str| {
            let d = dir.path().join(format!("devices/system/node/node{n}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
        };
        node(1, "4-7,12-15");
        node(0, "0-3,8-11");
        std::fs::write(dir.path().join("devices/system/node/possible"), "0-1\n").unwrap();
        let gpu = dir.path().join("bus/pci/devices/0000:1b:00.0");
        std::fs::create_dir_all(&gpu).unwrap();
        std::fs::write(gpu.join("numa_node"), "1\n").unwrap();
        let unset = dir.path().join("bus/pci/devices/0000:3b:00.0");
        std::fs::create_dir_all(&unset).unwrap();
        std::fs::write(unset.join("numa_node"), "-1\n").unwrap();
        dir
    }

    #[test]
    fn nodes_and_devices_are_read_from_a_sysfs_tree() {
        let sys = machine();
        let t = Topology::read(sys.path()).unwrap();
        assert_eq!(
            t.nodes(),
            [NumaNode { node: 0, cpus: "0-3,8-11".into() }, NumaNode { node: 1, cpus: "4-7,12-15".into() }]
        );
        assert_eq!((t.node_of(9), t.node_of(13), t.node_of(16)), (Some(0), Some(1), None));
        assert_eq!(t.nodes_of(&list("2-5")), [0, 1]);
        assert_eq!(t.nodes_of(&list("12")), [1]);
        assert_eq!(pci_node(sys.path(), "00000000:1B:00.0"), Some(1), "NVML's spelling of the bus id");
        assert_eq!(pci_node(sys.path(), "0000:1b:00.0"), Some(1));
        assert_eq!(pci_node(sys.path(), "00000000:3B:00.0"), None, "-1: the firmware gave none");
        assert_eq!(pci_node(sys.path(), "00000000:5E:00.0"), None, "no such device");
        assert_eq!(pci_node(sys.path(), "not a bus id"), None);
        assert_eq!(Topology::read(&sys.path().join("absent")), None);
    }

    #[test]
    fn this_machine_reads_without_failing() {
        // Whatever this machine has: each CPU it lists is on one node.
        if let Some(t) = Topology::read(Path::new("/sys")) {
            assert!(t.nodes().iter().all(|n| CpuList::parse(&n.cpus).is_some()));
        }
    }

    proptest! {
        #[test]
        fn any_text_parses_or_not_without_panicking(text in any::<String>()) {
            if let Some(l) = CpuList::parse(&text) {
                prop_assert!(l.0.iter().all(|(a, b)| a <= b));
            }
            let _ = parse_node(&text);
        }

        #[test]
        fn written_lists_parse_back(ranges in proptest::collection::vec((0u32..5000, 0u32..64), 0..20)) {
            let ranges: Vec<(u32, u32)> = ranges.into_iter().map(|(a, n)| (a, a + n)).collect();
            let text = ranges
                .iter()
                .map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
                .collect::<Vec<_>>()
                .join(",");
            let l = CpuList::parse(&text).unwrap();
            for &(a, b) in &ranges {
                prop_assert!(l.contains(a) && l.contains(b));
            }
            prop_assert_eq!(l.0, ranges);
        }
    }
}
