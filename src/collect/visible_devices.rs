//! `CUDA_VISIBLE_DEVICES` read the way CUDA reads it, so that a framework's
//! device ordinal can be mapped to the GPU NVML enumerates.
//!
//! NVIDIA's CUDA Programming Guide (environment variables, "Device
//! Enumeration and Properties") documents the forms: unset, every device;
//! set but empty, none; otherwise a comma-separated sequence of integer
//! indices or UUID strings as `nvidia-smi -L` prints them, where a UUID may
//! be cut to any prefix that is unique, or `MIG-` identifiers; the devices
//! are enumerated in the order of the sequence, and only those before the
//! first invalid entry are visible. Where the guide is silent (spaces,
//! repeated entries, a list that mixes forms), this follows PyTorch's own
//! model of CUDA (`torch/cuda/__init__.py`, `_parse_visible_devices` and
//! `_transform_uuid_to_ordinals`): a number is read like `strtoul` (spaces
//! around it ignored, digits up to the first other character), the first
//! entry decides whether the list is of indices, `GPU-` or `MIG-` UUIDs,
//! and a device named twice leaves no device visible at all.

/// One entry as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// An index into CUDA's enumeration of all GPUs.
    Index(u32),
    /// A GPU UUID or a prefix of it, lowercase, without "GPU-".
    Gpu(String),
    /// A MIG device, as written.
    Mig(String),
}

/// What one visible ordinal is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visible {
    /// NVML's index of the GPU.
    Gpu(u32),
    /// A MIG device, by its `MIG-` UUID (or a prefix of it).
    Mig(String),
}

/// The entries CUDA accepts by their form, in order, stopping at the first
/// it would not; whether an index or prefix names a real device is
/// `resolve`'s to judge. `None` (unset) is not a list: see `resolve`.
pub fn parse(value: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    if value.is_empty() {
        return entries;
    }
    let kind = if value.starts_with("GPU-") {
        Kind::Gpu
    } else if value.starts_with("MIG-") {
        Kind::Mig
    } else {
        Kind::Index
    };
    for raw in value.split(',') {
        let Some(entry) = kind.read(raw) else { break };
        if entries.contains(&entry) {
            return Vec::new();
        }
        entries.push(entry);
    }
    entries
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Index,
    Gpu,
    Mig,
}

impl Kind {
    fn read(self, raw: &str) -> Option<Entry> {
        match self {
            Self::Index => strtoul(raw.trim()).map(Entry::Index),
            Self::Gpu => raw.strip_prefix("GPU-").map(|p| Entry::Gpu(p.to_ascii_lowercase())),
            Self::Mig => raw.starts_with("MIG-").then(|| Entry::Mig(raw.to_string())),
        }
    }
}

/// The leading decimal number, as C's `strtoul` reads it: an optional `+`,
/// then digits up to the first other character. A minus sign, no digits or
/// a number beyond u32 is invalid.
fn strtoul(s: &str) -> Option<u32> {
    let s = s.strip_prefix('+').unwrap_or(s);
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

/// The visible devices in ordinal order. `in_cuda_order` is every GPU's
/// (NVML index, UUID) in the order CUDA enumerates them; an index or a
/// prefix that names no device, or a prefix that names more than one,
/// ends the list there; a GPU named twice leaves none.
pub fn resolve(value: Option<&str>, in_cuda_order: &[(u32, Option<&str>)]) -> Vec<Visible> {
    let Some(value) = value else {
        return in_cuda_order.iter().map(|(i, _)| Visible::Gpu(*i)).collect();
    };
    let mut visible = Vec::new();
    for entry in parse(value) {
        let one = match entry {
            Entry::Index(i) => in_cuda_order.get(i as usize).map(|(n, _)| Visible::Gpu(*n)),
            Entry::Gpu(prefix) => by_prefix(&prefix, in_cuda_order).map(Visible::Gpu),
            Entry::Mig(uuid) => Some(Visible::Mig(uuid)),
        };
        let Some(one) = one else { break };
        if visible.contains(&one) {
            return Vec::new();
        }
        visible.push(one);
    }
    visible
}

/// Whether the list's indices depend on CUDA's enumeration order (unset
/// or an index list), rather than naming GPUs by UUID.
pub fn uses_indices(value: Option<&str>) -> bool {
    value.is_none_or(|v| matches!(parse(v).first(), Some(Entry::Index(_))))
}

fn by_prefix(prefix: &str, devices: &[(u32, Option<&str>)]) -> Option<u32> {
    let mut hits = devices.iter().filter(|(_, uuid)| {
        uuid.is_some_and(|u| {
            let bare = u.strip_prefix("GPU-").or_else(|| u.strip_prefix("gpu-")).unwrap_or(u);
            bare.to_ascii_lowercase().starts_with(prefix)
        })
    });
    let (index, _) = hits.next()?;
    hits.next().is_none().then_some(*index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: &str = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
    const B: &str = "GPU-89aa0000-0000-4000-8000-000000000001";
    const C: &str = "GPU-77aa0000-0000-4000-8000-000000000002";

    fn devices() -> Vec<(u32, Option<&'static str>)> {
        vec![(0, Some(A)), (1, Some(B)), (2, Some(C))]
    }

    fn gpus(value: Option<&str>) -> Vec<Visible> {
        resolve(value, &devices())
    }

    fn g(indices: &[u32]) -> Vec<Visible> {
        indices.iter().map(|i| Visible::Gpu(*i)).collect()
    }

    #[test]
    fn unset_is_every_device_and_empty_is_none() {
        assert_eq!(gpus(None), g(&[0, 1, 2]));
        assert_eq!(gpus(Some("")), g(&[]));
    }

    #[test]
    fn indices_in_the_order_given() {
        assert_eq!(gpus(Some("1")), g(&[1]));
        assert_eq!(gpus(Some("2,0")), g(&[2, 0]));
        assert_eq!(gpus(Some("0,1,2")), g(&[0, 1, 2]));
    }

    #[test]
    fn the_first_invalid_entry_ends_the_list() {
        // The guide's own example: 0,2,-1,1 makes 0 and 2 visible.
        assert_eq!(gpus(Some("0,2,-1,1")), g(&[0, 2]));
        assert_eq!(gpus(Some("1,7,0")), g(&[1]), "index beyond the GPUs");
        assert_eq!(gpus(Some("1,,0")), g(&[1]), "empty entry");
        assert_eq!(gpus(Some("1,x,0")), g(&[1]), "not a number");
        assert_eq!(gpus(Some("-1")), g(&[]));
        assert_eq!(gpus(Some("0,GPU-77aa")), g(&[0]), "an index list stops at a UUID");
        assert_eq!(gpus(Some("99999999999")), g(&[]), "beyond any index");
    }

    #[test]
    fn numbers_read_like_strtoul() {
        assert_eq!(gpus(Some(" 2 , 0")), g(&[2, 0]), "spaces around an index");
        assert_eq!(gpus(Some("1gpu,+2")), g(&[1, 2]));
    }

    #[test]
    fn a_device_named_twice_leaves_none() {
        assert_eq!(gpus(Some("0,1,0")), g(&[]));
        assert_eq!(gpus(Some("GPU-77aa,GPU-77aa0000")), g(&[]), "two prefixes of one GPU");
    }

    #[test]
    fn uuids_and_unique_prefixes() {
        assert_eq!(gpus(Some(&format!("{C},{A}"))), g(&[2, 0]));
        assert_eq!(gpus(Some("GPU-77,GPU-8932")), g(&[2, 0]));
        assert_eq!(gpus(Some("GPU-8932F937")), g(&[0]), "hex in either case");
        assert_eq!(gpus(Some("GPU-89,GPU-77")), g(&[]), "GPU-89 names two GPUs");
        assert_eq!(gpus(Some("GPU-77,GPU-ffff,GPU-8932")), g(&[2]), "an unknown UUID ends the list");
        assert_eq!(gpus(Some("GPU-77, GPU-8932")), g(&[2]), "a UUID entry is taken as written");
        assert_eq!(gpus(Some("GPU-77,1")), g(&[2]), "a UUID list stops at an index");
    }

    #[test]
    fn mig_devices_are_kept_as_written() {
        let mig = "MIG-4b6f3a5e-2f1d-5c3b-9a8e-7d6c5b4a3f21";
        assert_eq!(gpus(Some(mig)), vec![Visible::Mig(mig.into())]);
        let old = "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0";
        assert_eq!(gpus(Some(&format!("{old},0"))), vec![Visible::Mig(old.into())]);
    }

    #[test]
    fn which_lists_depend_on_the_enumeration_order() {
        assert!(uses_indices(None));
        assert!(uses_indices(Some("1,0")));
        assert!(!uses_indices(Some("GPU-77")));
        assert!(!uses_indices(Some("MIG-aa")));
        assert!(!uses_indices(Some("")));
    }

    proptest! {
        #[test]
        fn never_panics(value in "[-+, 0-9a-fA-FGPUMI\\x00-\\x7f\u{80}-\u{10ffff}]{0,40}") {
            let visible = gpus(Some(&value));
            prop_assert!(visible.len() <= 3 || visible.iter().any(|v| matches!(v, Visible::Mig(_))));
            let _ = uses_indices(Some(&value));
        }
    }
}
