//! Which GPU a framework's device is: by its UUID, else its PCI bus id,
//! else its CUDA ordinal through the process's `CUDA_VISIBLE_DEVICES`
//! against NVML's enumeration. A MIG device (by its UUID, bare or `MIG-`,
//! or named in `CUDA_VISIBLE_DEVICES`) is placed on its parent GPU and
//! that GPU's MIG device. A device none of these places gets the reason
//! instead, and keeps its figures.

use super::visible_devices::{self, Visible};
use crate::model::{GpuMatch, MigDevice};
use crate::probe::files::{ProbeDevice, ProbeFile};
use crate::sources::GpuIdentity;

/// NVML's GPUs: every one (CUDA sees them all), and which gpuscope watches.
pub struct Gpus<'a> {
    pub all: &'a [GpuIdentity],
    pub watched: &'a [u32],
    /// A GPU in MIG mode: CUDA then enumerates its MIG instances, not it.
    pub mig: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    pub gpu: Option<u32>,
    pub how: Option<GpuMatch>,
    pub unmatched_reason: Option<String>,
    /// The MIG device of `gpu` the device is, if it is one.
    pub mig: Option<MigRef>,
}

/// A MIG device: its index within the parent GPU, and its UUID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigRef {
    pub index: u32,
    pub uuid: Option<String>,
}

impl Match {
    fn unmatched(reason: String) -> Self {
        Self { gpu: None, how: None, unmatched_reason: Some(reason), mig: None }
    }
}

/// Where a UUID or `CUDA_VISIBLE_DEVICES` entry points.
enum Place {
    Gpu(u32),
    Mig(u32, MigRef),
}

pub fn match_device(d: &ProbeDevice, f: &ProbeFile, gpus: &Gpus<'_>) -> Match {
    let mut notes = Vec::new();
    if let Some(uuid) = d.uuid.as_deref() {
        match by_uuid(uuid, gpus.all) {
            Ok(place) => return on(place, GpuMatch::Uuid, gpus),
            Err(UuidMiss::Mig) => {
                return Match::unmatched(format!(
                    "{uuid} is none of the MIG devices gpuscope reads (those of watched GPUs in MIG mode)"
                ));
            }
            Err(UuidMiss::Unknown) => notes.push(format!("UUID {uuid} is none of NVML's GPUs or MIG devices")),
        }
    }
    if let Some(bus) = d.pci_bus_id.as_deref() {
        match by_pci(bus, gpus.all) {
            Some(index) => return on(Place::Gpu(index), GpuMatch::PciBusId, gpus),
            None => notes.push(format!("PCI bus id {bus} is none of NVML's GPUs")),
        }
    }
    match by_ordinal(d.index, f, gpus) {
        Ok(place) => on(place, GpuMatch::CudaVisibleDevices, gpus),
        Err(why) => {
            notes.push(why);
            Match::unmatched(notes.join("; "))
        }
    }
}

/// The match, unless the GPU is one `--gpus` leaves out.
fn on(place: Place, how: GpuMatch, gpus: &Gpus<'_>) -> Match {
    let (index, mig) = match place {
        Place::Gpu(index) => (index, None),
        Place::Mig(index, mig) => (index, Some(mig)),
    };
    if gpus.watched.contains(&index) {
        Match { gpu: Some(index), how: Some(how), unmatched_reason: None, mig }
    } else {
        Match::unmatched(format!("on GPU {index}, which --gpus leaves out"))
    }
}

enum UuidMiss {
    Mig,
    Unknown,
}

/// PyTorch gives the UUID bare ("8932f937-…"; a MIG device's own UUID on
/// a MIG device), NVML with "GPU-" or "MIG-": compared without either
/// prefix, in either case, against the GPUs and their MIG devices.
fn by_uuid(uuid: &str, all: &[GpuIdentity]) -> Result<Place, UuidMiss> {
    let (mig, bare) = strip_uuid(uuid);
    let same = |u: Option<&str>| u.is_some_and(|u| strip_uuid(u).1.eq_ignore_ascii_case(bare));
    if let Some(g) = all.iter().find(|g| same(g.uuid.as_deref())) {
        return Ok(Place::Gpu(g.index));
    }
    let on_mig = |g: &GpuIdentity| g.mig_devices.iter().find(|m| same(m.uuid.as_deref())).map(|m| mig_place(g, m));
    match all.iter().find_map(on_mig) {
        Some(place) => Ok(place),
        None if mig => Err(UuidMiss::Mig),
        None => Err(UuidMiss::Unknown),
    }
}

fn mig_place(g: &GpuIdentity, m: &MigDevice) -> Place {
    Place::Mig(g.index, MigRef { index: m.index, uuid: m.uuid.clone() })
}

/// A `MIG-` entry of `CUDA_VISIBLE_DEVICES`: the whole UUID or a prefix
/// naming one MIG device only.
fn by_mig_entry(entry: &str, all: &[GpuIdentity]) -> Option<Place> {
    let want = entry.to_ascii_lowercase();
    let mut hits = all.iter().flat_map(|g| {
        let named = |m: &&MigDevice| m.uuid.as_deref().is_some_and(|u| u.to_ascii_lowercase().starts_with(&want));
        g.mig_devices.iter().filter(named).map(move |m| mig_place(g, m))
    });
    let first = hits.next()?;
    hits.next().is_none().then_some(first)
}

fn strip_uuid(uuid: &str) -> (bool, &str) {
    let prefix = uuid.get(..4).map(str::to_ascii_uppercase);
    match prefix.as_deref() {
        Some("GPU-") => (false, &uuid[4..]),
        Some("MIG-") => (true, &uuid[4..]),
        _ => (false, uuid),
    }
}

fn by_pci(bus: &str, all: &[GpuIdentity]) -> Option<u32> {
    let want = parse_pci(bus)?;
    all.iter().find(|g| g.pci_bus_id.as_deref().and_then(parse_pci) == Some(want)).map(|g| g.index)
}

/// (domain, bus, device) from "00000000:3B:00.0" (NVML), "0000:3b:00.0"
/// (NVML's legacy form) or the probe's "%08x:%02x:%02x.0".
pub fn parse_pci(s: &str) -> Option<(u32, u32, u32)> {
    let mut parts = s.trim().split(':');
    let (domain, bus, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let device = rest.split('.').next()?;
    let hex = |h: &str| u32::from_str_radix(h, 16).ok();
    Some((hex(domain)?, hex(bus)?, hex(device)?))
}

/// The ordinal through `CUDA_VISIBLE_DEVICES`. Index lists (and no list)
/// count in CUDA's enumeration order, which by default is fastest first:
/// the same as the PCI order only when every GPU is the same model, so
/// indices are mapped only then or with `CUDA_DEVICE_ORDER=PCI_BUS_ID`.
fn by_ordinal(ordinal: u32, f: &ProbeFile, gpus: &Gpus<'_>) -> Result<Place, String> {
    let Some(cvd) = &f.cuda_visible_devices else {
        return Err("no UUID or PCI bus id, and the probe does not report CUDA_VISIBLE_DEVICES".into());
    };
    let cvd = cvd.as_deref();
    let all = gpus.all;
    if gpus.mig && visible_devices::uses_indices(cvd) {
        return Err("a GPU is in MIG mode, where CUDA's ordinals count MIG devices in an order of CUDA's own; \
                    name them by MIG- UUID in CUDA_VISIBLE_DEVICES"
            .into());
    }
    let pci_order = f.cuda_device_order.as_deref() == Some("PCI_BUS_ID");
    if visible_devices::uses_indices(cvd) && !pci_order && !same_model(all) {
        return Err("CUDA's fastest-first order is ambiguous on mixed GPUs; set CUDA_DEVICE_ORDER=PCI_BUS_ID".into());
    }
    let order = in_pci_order(all);
    let ids: Vec<(u32, Option<&str>)> = order.iter().map(|g| (g.index, g.uuid.as_deref())).collect();
    let visible = visible_devices::resolve(cvd, &ids);
    let shown = cvd.map_or_else(|| "unset".to_string(), |v| format!("{v:?}"));
    match visible.get(ordinal as usize) {
        Some(Visible::Gpu(index)) => Ok(Place::Gpu(*index)),
        Some(Visible::Mig(uuid)) => by_mig_entry(uuid, all).ok_or_else(|| {
            format!("cuda:{ordinal} is MIG device {uuid}, none (or more than one) of the MIG devices gpuscope reads")
        }),
        None => Err(format!(
            "cuda:{ordinal} is beyond the {} GPU(s) CUDA_VISIBLE_DEVICES ({shown}) makes visible",
            visible.len()
        )),
    }
}

fn same_model(all: &[GpuIdentity]) -> bool {
    let first = all.first().and_then(|g| g.name.as_deref());
    first.is_some() && all.iter().all(|g| g.name.as_deref() == first)
}

/// CUDA's PCI_BUS_ID order: by bus id where NVML gave every GPU's,
/// otherwise NVML's own order, which follows the bus.
fn in_pci_order(all: &[GpuIdentity]) -> Vec<&GpuIdentity> {
    let mut order: Vec<&GpuIdentity> = all.iter().collect();
    if all.iter().all(|g| g.pci_bus_id.as_deref().and_then(parse_pci).is_some()) {
        order.sort_by_key(|g| g.pci_bus_id.as_deref().and_then(parse_pci));
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "GPU-3f6a1c2e-8b4d-4e71-a0c9-5d2e7b81f403";
    const B: &str = "GPU-9c04d7b5-2e1f-4a38-b6f0-c17a4e9d2b56";
    const C: &str = "GPU-61b8e0f2-7d3c-4c95-8e27-0a4f3b6c9d18";

    fn all(names: [&str; 3]) -> Vec<GpuIdentity> {
        [A, B, C]
            .iter()
            .zip(names)
            .enumerate()
            .map(|(i, (u, n))| GpuIdentity {
                index: i as u32,
                uuid: Some((*u).into()),
                name: Some(n.into()),
                pci_bus_id: Some(format!("00000000:{:02X}:00.0", 0x18 + i * 0x10)),
                mig_devices: Vec::new(),
            })
            .collect()
    }

    fn file(cvd: Option<Option<&str>>, order: Option<&str>) -> ProbeFile {
        let mut v: serde_json::Value = serde_json::from_str(&crate::probe::files::sample_json_for_tests(1, 1)).unwrap();
        v.as_object_mut().unwrap().remove("cuda_visible_devices");
        if let Some(c) = cvd {
            v["cuda_visible_devices"] = c.into();
        }
        v["cuda_device_order"] = order.into();
        ProbeFile::parse(&v.to_string(), 1, 1).unwrap()
    }

    fn device(index: u32, uuid: Option<&str>, bus: Option<&str>) -> ProbeDevice {
        let mut d: ProbeDevice = serde_json::from_str("{\"index\":0}").unwrap();
        (d.index, d.uuid, d.pci_bus_id) = (index, uuid.map(Into::into), bus.map(Into::into));
        d
    }

    fn found(d: &ProbeDevice, f: &ProbeFile, all: &[GpuIdentity]) -> Match {
        match_device(d, f, &Gpus { all, watched: &[0, 1, 2], mig: false })
    }

    fn hit(gpu: u32, how: GpuMatch) -> Match {
        Match { gpu: Some(gpu), how: Some(how), unmatched_reason: None, mig: None }
    }

    const H100: [&str; 3] = ["NVIDIA H100 80GB HBM3"; 3];

    #[test]
    fn uuid_first_with_or_without_prefix_in_any_case() {
        let f = file(Some(Some("0")), None);
        let bare = device(0, Some(&B[4..].to_uppercase()), Some("00000000:18:00.0"));
        assert_eq!(found(&bare, &f, &all(H100)), hit(1, GpuMatch::Uuid), "the UUID wins over bus and ordinal");
        assert_eq!(found(&device(0, Some(C), None), &f, &all(H100)), hit(2, GpuMatch::Uuid));
    }

    const MIG0: &str = "MIG-4b6f3a5e-2f1d-5c3b-9a8e-7d6c5b4a3f21";
    const MIG1: &str = "MIG-5c7a4b6f-3e2d-5d4c-8b9f-8e7d6c5b4a32";

    /// GPU 1 split in two MIG devices.
    fn split() -> Vec<GpuIdentity> {
        let mut all = all(H100);
        all[1].mig_devices = [MIG0, MIG1]
            .iter()
            .enumerate()
            .map(|(i, u)| MigDevice {
                index: i as u32,
                uuid: Some((*u).into()),
                name: None,
                profile: Some("3g.40gb".into()),
                gpu_instance_id: Some(i as u32 + 1),
                compute_instance_id: Some(0),
                memory: Default::default(),
                activity: None,
                activity_unavailable: None,
            })
            .collect();
        all
    }

    fn on_mig(index: u32, uuid: &str, how: GpuMatch) -> Match {
        let mig = Some(MigRef { index, uuid: Some(uuid.into()) });
        Match { gpu: Some(1), how: Some(how), unmatched_reason: None, mig }
    }

    #[test]
    fn a_mig_uuid_is_matched_to_its_mig_device() {
        let f = file(Some(None), None);
        assert_eq!(found(&device(0, Some(MIG1), None), &f, &split()), on_mig(1, MIG1, GpuMatch::Uuid));
        // PyTorch gives a MIG device's UUID bare.
        let bare = device(0, Some(&MIG0[4..].to_uppercase()), None);
        assert_eq!(found(&bare, &f, &split()), on_mig(0, MIG0, GpuMatch::Uuid));
        // One gpuscope does not read is unmatched, saying why.
        let m = found(&device(0, Some(MIG0), None), &f, &all(H100));
        assert_eq!(m.gpu, None);
        let reason = m.unmatched_reason.unwrap();
        assert!(reason.contains("none of the MIG devices gpuscope reads"), "{reason}");
        assert!(!reason.contains("yet"), "{reason}");
    }

    #[test]
    fn a_mig_device_in_cuda_visible_devices_is_ordinal_0() {
        let gpus = split();
        let f = file(Some(Some(MIG1)), None);
        let ctx = Gpus { all: &gpus, watched: &[0, 1, 2], mig: true };
        assert_eq!(match_device(&device(0, None, None), &f, &ctx), on_mig(1, MIG1, GpuMatch::CudaVisibleDevices));
        let f = file(Some(Some(&format!("{MIG0},{MIG1}"))), None);
        assert_eq!(match_device(&device(1, None, None), &f, &ctx), on_mig(1, MIG1, GpuMatch::CudaVisibleDevices));
        // A prefix naming one MIG device is enough; one naming two is not.
        let f = file(Some(Some(&MIG0[..12])), None);
        assert_eq!(match_device(&device(0, None, None), &f, &ctx), on_mig(0, MIG0, GpuMatch::CudaVisibleDevices));
        let f = file(Some(Some("MIG-")), None);
        assert_eq!(match_device(&device(0, None, None), &f, &ctx).gpu, None);
        // On a GPU --gpus leaves out, it is not matched.
        let left_out = Gpus { all: &gpus, watched: &[0], mig: true };
        let f = file(Some(Some(MIG1)), None);
        let m = match_device(&device(0, None, None), &f, &left_out);
        assert_eq!(m.unmatched_reason.as_deref(), Some("on GPU 1, which --gpus leaves out"));
    }

    #[test]
    fn pci_bus_id_in_any_form() {
        let f = file(None, None);
        for bus in ["00000000:28:00.0", "0000:28:00.0", "00000000:28:00.0".to_lowercase().as_str()] {
            assert_eq!(found(&device(0, None, Some(bus)), &f, &all(H100)), hit(1, GpuMatch::PciBusId), "{bus}");
        }
        let unknown = device(0, Some("GPU-ffff"), Some("00000000:99:00.0"));
        let m = found(&unknown, &f, &all(H100));
        let reason = m.unmatched_reason.unwrap();
        assert!(reason.contains("GPU-ffff") && reason.contains("99:00.0") && reason.contains("CUDA_VISIBLE_DEVICES"));
        assert_eq!(parse_pci("3b:00.0"), None);
        assert_eq!(parse_pci("00000000:3B:00.0"), Some((0, 0x3b, 0)));
    }

    #[test]
    fn ordinal_through_cuda_visible_devices() {
        let all = all(H100);
        let f = file(Some(Some("2,0")), None);
        assert_eq!(found(&device(0, None, None), &f, &all), hit(2, GpuMatch::CudaVisibleDevices));
        assert_eq!(found(&device(1, None, None), &f, &all), hit(0, GpuMatch::CudaVisibleDevices));
        let beyond = found(&device(2, None, None), &f, &all).unmatched_reason.unwrap();
        assert!(beyond.contains("cuda:2 is beyond the 2 GPU(s)"), "{beyond}");
        let f = file(Some(Some("GPU-61b8")), None);
        assert_eq!(found(&device(0, None, None), &f, &all), hit(2, GpuMatch::CudaVisibleDevices));
        let f = file(Some(None), None);
        assert_eq!(found(&device(1, None, None), &f, &all), hit(1, GpuMatch::CudaVisibleDevices), "unset: all");
    }

    #[test]
    fn indices_on_mixed_gpus_need_the_pci_order() {
        let mixed = all(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]);
        let m = found(&device(0, None, None), &file(Some(Some("1")), None), &mixed);
        assert!(m.unmatched_reason.unwrap().contains("set CUDA_DEVICE_ORDER=PCI_BUS_ID"));
        let m = found(&device(0, None, None), &file(Some(Some("1")), Some("FASTEST_FIRST")), &mixed);
        assert_eq!(m.gpu, None);
        let f = file(Some(Some("1")), Some("PCI_BUS_ID"));
        assert_eq!(found(&device(0, None, None), &f, &mixed), hit(1, GpuMatch::CudaVisibleDevices));
        // UUIDs name GPUs whatever the order.
        let f = file(Some(Some("GPU-9c04")), None);
        assert_eq!(found(&device(0, None, None), &f, &mixed), hit(1, GpuMatch::CudaVisibleDevices));
    }

    #[test]
    fn pci_order_is_the_bus_order_not_nvml_s() {
        let mut all = all(H100);
        all[0].pci_bus_id = Some("00000000:99:00.0".into());
        let f = file(Some(Some("0")), Some("PCI_BUS_ID"));
        assert_eq!(found(&device(0, None, None), &f, &all).gpu, Some(1));
    }

    #[test]
    fn indices_are_not_mapped_while_a_gpu_is_in_mig_mode() {
        let gpus = Gpus { all: &all(H100), watched: &[0, 1, 2], mig: true };
        let m = match_device(&device(0, None, None), &file(Some(Some("0")), Some("PCI_BUS_ID")), &gpus);
        assert!(m.unmatched_reason.unwrap().contains("MIG mode"));
        let by_uuid = match_device(&device(0, None, None), &file(Some(Some("GPU-61b8")), None), &gpus);
        assert_eq!(by_uuid.gpu, Some(2));
    }

    #[test]
    fn an_old_probe_without_the_variable_is_not_guessed() {
        let m = found(&device(0, None, None), &file(None, None), &all(H100));
        assert!(m.unmatched_reason.unwrap().contains("does not report CUDA_VISIBLE_DEVICES"));
    }

    #[test]
    fn a_gpu_left_out_by_the_selection_is_not_matched() {
        let f = file(Some(None), None);
        let m = match_device(&device(0, Some(A), None), &f, &Gpus { all: &all(H100), watched: &[1, 2], mig: false });
        assert_eq!(m.gpu, None);
        assert_eq!(m.unmatched_reason.as_deref(), Some("on GPU 0, which --gpus leaves out"));
    }
}
