//! The dashboard's ways into a probed process: its live segment map (`m`),
//! PyTorch's memory-viewer snapshot (`M`), and starting a probe in a
//! running interpreter (`A`). Each decides here, from the snapshot, whether
//! it can apply; what reaches outside comes back as an effect that the run
//! loop carries out off the UI task.

use crate::model::{Process, ProcessAllocator};
use crate::probe::segmap::{MapState, MapUpdate};
use crate::tui::rows::RowKey;
use crate::tui::state::{SegmentsView, State, View};
use crate::tui::update::{Effect, selected_key};

/// Asked about when the process has no recent OOM to go by.
pub const DEFAULT_REQUEST: u64 = 1 << 30;
const MIN_REQUEST: u64 = 512;
const MAX_REQUEST: u64 = 1 << 40;
/// The probe sends at most 512 segments.
pub const MAX_SCROLL: usize = 512;

/// The process the key acts on: the detail view's, else the selected row's.
fn subject(state: &State) -> Option<(RowKey, &Process)> {
    let key = match state.top() {
        Some(View::Detail(view)) => Some(view.key),
        _ => selected_key(state),
    }?;
    let process = state.shown()?.processes.iter().find(|p| p.pid == key.pid)?;
    Some((key, process))
}

/// `--demo`'s processes are made up, and their PIDs may name an unrelated
/// process here (`pid_max` is 4194304 under systemd): nothing that reaches
/// a process by its PID may act on them.
pub fn simulated(state: &State) -> bool {
    state.shown().is_some_and(|s| s.simulated)
}

fn refuse_simulated(state: &mut State, pid: u32, what: &str) -> bool {
    if !simulated(state) {
        return false;
    }
    state.status = Some(format!("PID {pid} is a simulated process (--demo): {what}"));
    true
}

/// Live only: a recorded PID is not today's process.
fn live(state: &mut State, what: &str) -> bool {
    if state.replay.is_some() {
        state.status = Some(format!("replay: {what} needs the live process (a recorded PID is not today's)"));
        return false;
    }
    true
}

fn torch_probe<'a>(state: &mut State, process: &'a Process) -> Option<&'a ProcessAllocator> {
    let pid = process.pid;
    let Some(alloc) = process.allocator.as_ref() else {
        state.status = Some(format!(
            "PID {pid} has no gpuscope probe: start it under `gpuscope run` (A attaches on Python 3.14+)"
        ));
        return None;
    };
    if &*alloc.framework != "torch" {
        state.status = Some(format!("PID {pid} runs {}: only PyTorch's allocator can be asked", alloc.framework));
        return None;
    }
    Some(alloc)
}

pub fn open_map(state: &mut State) -> Option<Effect> {
    if !live(state, "the segment map") {
        return None;
    }
    let (key, process) = subject(state)?;
    let process = process.clone();
    let alloc = torch_probe(state, &process)?;
    if alloc.backend.as_deref() == Some("cudaMallocAsync") {
        state.status = Some(format!("PID {}: cudaMallocAsync keeps no segments of its own to map", key.pid));
        return None;
    }
    let device = alloc.devices.iter().find(|d| d.gpu == Some(key.gpu));
    let Some(ordinal) = device.and_then(|d| d.ordinal) else {
        state.status = Some(format!("PID {}'s probe reports no device on GPU {}", key.pid, key.gpu));
        return None;
    };
    // The demo's map is drawn from the figures its probe reports, so that
    // it says what the details say.
    let demo = if simulated(state) {
        let Some(map) = device.and_then(|d| crate::probe::files::demo::segment_map(key.pid, d)) else {
            refuse_simulated(state, key.pid, "its map needs a real job");
            return None;
        };
        Some(map)
    } else {
        None
    };
    // The question after an OOM is whether its request would fit now.
    let request = alloc
        .last_oom
        .iter()
        .rev()
        .find(|o| o.device == Some(ordinal))
        .and_then(|o| o.requested)
        .unwrap_or(DEFAULT_REQUEST);
    state.views.retain(|v| !matches!(v, View::Segments(_)));
    state.views.push(View::Segments(SegmentsView { key, ordinal, request, scroll: 0 }));
    if let Some(map) = demo {
        // The demo's answer, drawn as a probe's would be; no probe is asked.
        state.segmap = Some(MapUpdate { pid: key.pid, ordinal, state: MapState::Ready(map.into()) });
        return None;
    }
    state.segmap = Some(MapUpdate { pid: key.pid, ordinal, state: MapState::Waiting });
    Some(Effect::SegmentsOpen { pid: key.pid, ordinal })
}

pub fn resize_request(state: &mut State, bigger: bool) {
    if let Some(View::Segments(view)) = state.views.last_mut() {
        view.request = if bigger { view.request.saturating_mul(2) } else { view.request / 2 };
        view.request = view.request.clamp(MIN_REQUEST, MAX_REQUEST);
    }
}

pub fn memviz(state: &mut State) -> Option<Effect> {
    if !live(state, "a memory snapshot") {
        return None;
    }
    let (_, process) = subject(state)?;
    let process = process.clone();
    torch_probe(state, &process)?;
    if refuse_simulated(state, process.pid, "M needs a real PyTorch job") {
        return None;
    }
    state.status = Some(format!("asking PID {}'s probe for PyTorch's memory snapshot...", process.pid));
    Some(Effect::Memviz(process.pid))
}

pub fn attach(state: &mut State) -> Option<Effect> {
    if !live(state, "attaching") {
        return None;
    }
    if state.read_only {
        state.status = Some("read-only (--read-only): gpuscope starts no probe in other processes".into());
        return None;
    }
    let (_, process) = subject(state)?;
    let (pid, probed, other_namespace) = (process.pid, process.allocator.is_some(), process.other_namespace);
    if refuse_simulated(state, pid, "nothing to attach to") {
        return None;
    }
    if probed {
        state.status = Some(format!("PID {pid} already has a gpuscope probe"));
        return None;
    }
    if other_namespace {
        state.status = Some(format!("PID {pid} is the host's, not this PID namespace's: nothing to attach to"));
        return None;
    }
    state.status = Some(format!("starting the probe in PID {pid}..."));
    Some(Effect::Attach(pid))
}

pub fn environ(state: &mut State) -> Option<Effect> {
    if !live(state, "the environment") {
        return None;
    }
    let (_, process) = subject(state)?;
    let pid = process.pid;
    if simulated(state) {
        // The demo's own variables, never `/proc/PID/environ`.
        let Some(vars) = crate::sources::demo_host::environment(pid) else {
            refuse_simulated(state, pid, "no environment to read");
            return None;
        };
        state.views.retain(|v| !matches!(v, View::Environ { .. }));
        state.views.push(View::Environ { pid, vars: Some(Ok(vars)) });
        return None;
    }
    if process.other_namespace {
        state.status = Some(format!("PID {pid} is the host's, not this PID namespace's: its environment is not here"));
        return None;
    }
    state.views.retain(|v| !matches!(v, View::Environ { .. }));
    state.views.push(View::Environ { pid, vars: None });
    Some(Effect::Environ(pid))
}

/// The status line after `M`.
pub fn memviz_outcome(pid: u32, result: Result<std::path::PathBuf, crate::probe::memviz::MemvizError>) -> String {
    match result {
        Ok(path) => {
            format!("PID {pid}: PyTorch memory snapshot at {} (open it in pytorch.org/memory_viz)", path.display())
        }
        Err(e) => format!("memviz: {e}"),
    }
}

/// The status line after `A`.
pub fn attach_outcome(pid: u32, result: Result<(), crate::probe::attach::AttachError>) -> String {
    match result {
        Ok(()) => format!("probe started in PID {pid}: its figures appear once it uses CUDA"),
        Err(e) => format!("attach: {e}"),
    }
}
