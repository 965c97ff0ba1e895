//! A simulated `libnvidia-ml.so`.
//!
//! Built as a `cdylib`, this library exports NVML's C functions with their
//! real ABI, so gpuscope can load it through `nvml-wrapper` and exercise
//! its real NVML code on machines without a GPU: in tests, and behind
//! `gpuscope --demo`. What the "driver" reports comes from a TOML scenario
//! named by `GPUSCOPE_SIM_SCENARIO` (see `scenarios/demo.toml`, the
//! built-in default, for the format). Each copy of the `.so` loaded from a
//! different path has its own state, its count of calls included.

mod api;
mod call;
mod code;
mod cost;
mod gpm;
mod procfs;
mod scenario;
mod source;
mod state;
mod timing;
mod value;

pub use api::*;
pub use cost::COSTS_ENV;
pub use scenario::DEMO_SCENARIO;
pub use source::SCENARIO_ENV;
