//! Everything about the allocator probe, the Python module
//! (`assets/gpuscope_probe.py`) that runs inside training processes and
//! publishes their allocator's figures: getting it in (`inject/`: `gpuscope
//! run`, `gpuscope probe`; `attach/`: into a running Python 3.14+
//! process), reading what it publishes each tick (`files/`, the
//! `ProbeSource` the collector asks beside the GPU and host sources), and
//! asking it for more (`memviz.rs`: PyTorch's memory-viewer snapshot;
//! `segmap/`: the dashboard's live segment map).
//!
//! It uses `util/`, `model/` and, for what it reads of `/proc` and how
//! names are cleaned, `sources/`; nothing under `sources/` uses it.

pub mod attach;
pub mod files;
pub mod inject;
pub mod memviz;
pub mod segmap;
