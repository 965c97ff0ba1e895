//! `--gpus 0,2`, `--gpus GPU-5ea1,GPU-77` or `--gpus MIG-4b6f` (and
//! nvidia-smi's `-i`, which also takes PCI bus ids): which devices to
//! watch. A MIG device is watched with its parent GPU shown.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSelector {
    Index(u32),
    /// Case-insensitive prefix of the UUID, with or without the "GPU-".
    UuidPrefix(String),
    /// Case-insensitive prefix of a MIG device's UUID, "MIG-" included.
    MigPrefix(String),
    /// A PCI bus id (`00000000:18:00.0`, `0000:18:00.0` or `18:00.0`), as
    /// nvidia-smi's `-i` takes it.
    PciBusId(PciAddress),
}

/// A PCI address, compared by value so that every spelling of one
/// matches (domain width, case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    domain: u32,
    bus: u32,
    device: u32,
    function: u32,
}

impl PciAddress {
    /// `[domain:]bus:device.function`, in hex; the domain defaults to 0.
    pub fn parse(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.split(':').collect();
        let (domain, bus, rest) = match parts.as_slice() {
            [d, b, rest] => (*d, *b, *rest),
            [b, rest] => ("0", *b, *rest),
            _ => return None,
        };
        let (device, function) = rest.split_once('.')?;
        let hex = |s: &str, digits: usize| {
            (!s.is_empty() && s.len() <= digits).then(|| u32::from_str_radix(s, 16).ok()).flatten()
        };
        Some(Self { domain: hex(domain, 8)?, bus: hex(bus, 2)?, device: hex(device, 2)?, function: hex(function, 1)? })
    }

    /// The device's name under `/sys/bus/pci/devices`: the kernel prints
    /// the domain with at least four hex digits, all in lower case
    /// (`pci_name`: "%04x:%02x:%02x.%d").
    pub fn sysfs_name(&self) -> String {
        format!("{:04x}:{:02x}:{:02x}.{:x}", self.domain, self.bus, self.device, self.function)
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08X}:{:02X}:{:02X}.{:X}", self.domain, self.bus, self.device, self.function)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("empty GPU selector in {0:?}")]
    Empty(String),
    #[error("{0:?} is not a PCI bus id (domain:bus:device.function in hex, e.g. 00000000:18:00.0)")]
    BadPci(String),
    #[error("no GPU matches {selector:?}; these exist: {available}")]
    NoMatch { selector: String, available: String },
    #[error("GPU selector {selector:?} is ambiguous: it matches {matches}")]
    Ambiguous { selector: String, matches: String },
}

impl fmt::Display for GpuSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Index(i) => write!(f, "{i}"),
            Self::UuidPrefix(p) | Self::MigPrefix(p) => f.write_str(p),
            Self::PciBusId(a) => write!(f, "{a}"),
        }
    }
}

/// Parses a comma-separated list; digits are indices, "MIG-…" a MIG
/// device's UUID prefix, anything with a colon a PCI bus id (no UUID has
/// one), anything else a GPU UUID prefix.
pub fn parse_selectors(spec: &str) -> Result<Vec<GpuSelector>, SelectError> {
    spec.split(',')
        .map(str::trim)
        .map(|part| match part {
            "" => Err(SelectError::Empty(spec.to_string())),
            p if p.get(..4).is_some_and(|h| h.eq_ignore_ascii_case("MIG-")) => Ok(GpuSelector::MigPrefix(p.into())),
            p if p.contains(':') => {
                PciAddress::parse(p).map(GpuSelector::PciBusId).ok_or_else(|| SelectError::BadPci(p.to_string()))
            }
            p => Ok(p.parse().map_or_else(|_| GpuSelector::UuidPrefix(p.to_string()), GpuSelector::Index)),
        })
        .collect()
}

/// What a device is known by: NVML's index, its UUID and PCI bus id.
pub type DeviceIds<'a> = (u32, Option<&'a str>, Option<&'a str>);

fn uuid_matches(prefix: &str, uuid: &str) -> bool {
    let norm = |s: &str| s.trim_start_matches("GPU-").trim_start_matches("gpu-").to_ascii_lowercase();
    norm(uuid).starts_with(&norm(prefix))
}

/// Positions into `devices` (index, uuid) of the selected GPUs, in device
/// order, each once. An empty selector list selects every device; MIG
/// selectors are left to [`select_migs`].
pub fn select_gpus(selectors: &[GpuSelector], devices: &[DeviceIds<'_>]) -> Result<Vec<usize>, SelectError> {
    if selectors.is_empty() {
        return Ok((0..devices.len()).collect());
    }
    let mut chosen = vec![false; devices.len()];
    for sel in selectors.iter().filter(|s| !matches!(s, GpuSelector::MigPrefix(_))) {
        let hits: Vec<usize> = devices
            .iter()
            .enumerate()
            .filter(|(_, (index, uuid, pci))| match sel {
                GpuSelector::Index(i) => i == index,
                GpuSelector::UuidPrefix(p) => uuid.is_some_and(|u| uuid_matches(p, u)),
                GpuSelector::MigPrefix(_) => false,
                GpuSelector::PciBusId(a) => pci.and_then(PciAddress::parse).is_some_and(|p| p == *a),
            })
            .map(|(pos, _)| pos)
            .collect();
        match hits.as_slice() {
            [] => {
                return Err(SelectError::NoMatch { selector: sel.to_string(), available: describe(devices) });
            }
            [one] => chosen[*one] = true,
            many => {
                let matches = many.iter().map(|&p| describe(&devices[p..=p])).collect::<Vec<_>>().join(", ");
                return Err(SelectError::Ambiguous { selector: sel.to_string(), matches });
            }
        }
    }
    Ok(chosen.iter().enumerate().filter(|(_, c)| **c).map(|(p, _)| p).collect())
}

/// Positions into `migs` (parent index, MIG UUID) of the MIG devices the
/// MIG selectors name, each once; one matching none, or several, is an
/// error as for GPUs.
pub fn select_migs(selectors: &[GpuSelector], migs: &[(u32, Option<&str>)]) -> Result<Vec<usize>, SelectError> {
    let mut chosen = Vec::new();
    for sel in selectors {
        let GpuSelector::MigPrefix(p) = sel else { continue };
        let want = p.to_ascii_lowercase();
        let named = |u: &str| u.to_ascii_lowercase().starts_with(&want);
        let hits: Vec<usize> =
            (migs.iter().enumerate()).filter(|(_, (_, u))| u.is_some_and(named)).map(|(i, _)| i).collect();
        match hits.as_slice() {
            [] => return Err(SelectError::NoMatch { selector: sel.to_string(), available: describe_migs(migs) }),
            [one] if !chosen.contains(one) => chosen.push(*one),
            [_] => {}
            many => {
                let matches = many.iter().map(|&i| describe_migs(&migs[i..=i])).collect::<Vec<_>>().join(", ");
                return Err(SelectError::Ambiguous { selector: sel.to_string(), matches });
            }
        }
    }
    chosen.sort_unstable();
    Ok(chosen)
}

fn describe_migs(migs: &[(u32, Option<&str>)]) -> String {
    if migs.is_empty() {
        return "no MIG devices".into();
    }
    migs.iter().map(|(i, u)| format!("{} on GPU {i}", u.unwrap_or("uuid unknown"))).collect::<Vec<_>>().join(", ")
}

fn describe(devices: &[DeviceIds<'_>]) -> String {
    if devices.is_empty() {
        return "none".into();
    }
    devices.iter().map(|(i, u, _)| format!("{i} ({})", u.unwrap_or("uuid unknown"))).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEVS: [DeviceIds<'static>; 3] = [
        (0, Some("GPU-5ea1c0de-aaaa"), Some("00000000:18:00.0")),
        (1, Some("GPU-77aa0000-bbbb"), Some("00000000:2A:00.0")),
        (2, Some("GPU-77ab0000-cccc"), None),
    ];

    #[test]
    fn pci_bus_ids_in_every_spelling() {
        for spelling in ["00000000:2A:00.0", "0000:2a:00.0", "2a:00.0"] {
            assert_eq!(select_gpus(&parse_selectors(spelling).unwrap(), &DEVS).unwrap(), vec![1], "{spelling}");
        }
        assert_eq!(parse_selectors("0,18:00.x"), Err(SelectError::BadPci("18:00.x".into())));
        let err = select_gpus(&parse_selectors("3b:00.0").unwrap(), &DEVS).unwrap_err();
        assert!(err.to_string().contains("no GPU matches \"00000000:3B:00.0\""), "{err}");
    }

    #[test]
    fn indices_and_prefixes() {
        let sel = parse_selectors("2, gpu-5EA1").unwrap();
        assert_eq!(sel, vec![GpuSelector::Index(2), GpuSelector::UuidPrefix("gpu-5EA1".into())]);
        assert_eq!(select_gpus(&sel, &DEVS).unwrap(), vec![0, 2]);
        assert_eq!(select_gpus(&parse_selectors("77ab").unwrap(), &DEVS).unwrap(), vec![2]);
    }

    #[test]
    fn empty_selects_all_and_duplicates_collapse() {
        assert_eq!(select_gpus(&[], &DEVS).unwrap(), vec![0, 1, 2]);
        assert_eq!(select_gpus(&parse_selectors("1,1").unwrap(), &DEVS).unwrap(), vec![1]);
    }

    #[test]
    fn errors_name_the_selector() {
        assert_eq!(parse_selectors("0,,1"), Err(SelectError::Empty("0,,1".into())));
        let err = select_gpus(&parse_selectors("7").unwrap(), &DEVS).unwrap_err();
        assert!(err.to_string().contains("no GPU matches \"7\""), "{err}");
        let err = select_gpus(&parse_selectors("GPU-77").unwrap(), &DEVS).unwrap_err();
        assert!(matches!(err, SelectError::Ambiguous { .. }), "{err}");
    }

    #[test]
    fn mig_uuids_select_mig_devices() {
        let sel = parse_selectors("mig-AB12,1").unwrap();
        assert_eq!(sel, vec![GpuSelector::MigPrefix("mig-AB12".into()), GpuSelector::Index(1)]);
        assert_eq!(select_gpus(&sel, &DEVS).unwrap(), vec![1], "a MIG selector picks no GPU by itself");
        let migs = [(0, Some("MIG-ab12-1111")), (0, Some("MIG-ab13-2222")), (2, Some("MIG-cd00-3333"))];
        assert_eq!(select_migs(&sel, &migs).unwrap(), vec![0]);
        assert_eq!(select_migs(&parse_selectors("MIG-cd,MIG-AB12-1").unwrap(), &migs).unwrap(), vec![0, 2]);
        let err = select_migs(&parse_selectors("MIG-ab1").unwrap(), &migs).unwrap_err();
        assert!(matches!(err, SelectError::Ambiguous { .. }), "{err}");
        let err = select_migs(&parse_selectors("MIG-ff").unwrap(), &migs).unwrap_err();
        assert!(err.to_string().contains("MIG-cd00-3333 on GPU 2"), "{err}");
        let err = select_migs(&parse_selectors("MIG-ff").unwrap(), &[]).unwrap_err();
        assert!(err.to_string().contains("no MIG devices"), "{err}");
    }
}
