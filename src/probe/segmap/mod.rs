//! The live segment map: a probed PyTorch process's caching allocator, one
//! segment at a time, as its own probe reads it from
//! `torch.cuda.memory_snapshot()` when the dashboard asks (see
//! `requester.rs`: only while the map is open, at most once a second).

mod requester;

use serde::Deserialize;

pub use requester::{MapState, MapUpdate, Requester};

/// The probe's answer, `<pid>-<ticks>.segments.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SegmentMap {
    pub id: Option<String>,
    /// "done" or "error".
    pub state: String,
    pub error: Option<String>,
    pub device: Option<u32>,
    pub taken_unix_ms: Option<u64>,
    #[serde(default)]
    pub pools: Vec<Pool>,
    /// Address order within each pool ("large" before "small").
    #[serde(default)]
    pub segments: Vec<Segment>,
    /// The probe stopped walking blocks at its bound (50,000).
    #[serde(default)]
    pub truncated: bool,
    /// Segments past the probe's bound (512, the smallest left out).
    #[serde(default)]
    pub segments_left_out: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Pool {
    pub pool: String,
    pub segments: u64,
    pub total: u64,
    pub allocated: u64,
    pub inactive_split: u64,
    /// Bytes in wholly free segments: cache `empty_cache()` could return.
    pub free: u64,
    pub largest_free_block: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Segment {
    pub pool: String,
    pub address: Option<u64>,
    pub total: u64,
    pub allocated: u64,
    pub inactive_split: u64,
    /// Every inactive byte of the segment (split or not).
    pub free: u64,
    pub largest_free_block: u64,
    /// Adjacent blocks of one class, in address order.
    pub runs: Vec<(RunClass, u64)>,
}

/// What a run of blocks is. PyTorch's block states
/// (c10/cuda/CUDACachingAllocator.cpp, `snapshot()`): `active_allocated`
/// holds a tensor; `active_pending_free` was freed but waits on recorded
/// stream events and cannot be reused yet; `inactive` is free, and counts
/// as inactive split when its segment holds other blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum RunClass {
    #[serde(rename = "a")]
    Allocated,
    #[serde(rename = "p")]
    PendingFree,
    #[serde(rename = "s")]
    InactiveSplit,
    #[serde(rename = "f")]
    Free,
    /// Past the probe's bound of runs per segment: the rest, merged.
    #[serde(rename = "m")]
    Mixed,
}

/// PyTorch's allocation size rules (c10/cuda/CUDACachingAllocator.cpp):
/// sizes are rounded up to `kMinBlockSize` (512 B), and a request of at
/// most `kSmallSize` (1 MiB) is served from the small pool, larger ones
/// from the large pool.
const MIN_BLOCK: u64 = 512;
const SMALL_SIZE: u64 = 1 << 20;

/// Whether an allocation of `requested` bytes would be served from a
/// cached block, without a new `cudaMalloc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    pub pool: &'static str,
    /// The request as the allocator rounds it.
    pub rounded: u64,
    pub largest_free_block: u64,
    pub fits: bool,
}

impl SegmentMap {
    /// A cached block fits when one in the request's pool is at least the
    /// rounded size (best fit, then split). Left out: the stream a block
    /// belongs to, and `max_split_size_mb`, which stops blocks larger than
    /// it from serving smaller requests; both can only make a fit rarer.
    pub fn fit(&self, requested: u64) -> Fit {
        let rounded = requested.max(1).div_ceil(MIN_BLOCK).saturating_mul(MIN_BLOCK);
        let pool = if rounded <= SMALL_SIZE { "small" } else { "large" };
        let largest_free_block =
            self.pools.iter().filter(|p| p.pool == pool).map(|p| p.largest_free_block).max().unwrap_or(0);
        Fit { pool, rounded, largest_free_block, fits: largest_free_block >= rounded }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> SegmentMap {
        serde_json::from_str(
            r#"{"format":"gpuscope-segments","version":1,"id":"x","state":"done","error":null,"device":0,
            "taken_unix_ms":1,"pools":[
              {"pool":"large","segments":2,"total":31457280,"allocated":4194304,"inactive_split":5242880,
               "free":20971520,"largest_free_block":20971520},
              {"pool":"small","segments":1,"total":2097152,"allocated":524288,"inactive_split":1572864,
               "free":0,"largest_free_block":1572864}],
            "segments":[{"pool":"large","address":1,"total":10485760,"allocated":4194304,"inactive_split":5242880,
              "free":5242880,"split":true,"largest_free_block":3145728,
              "runs":[["a",4194304],["s",2097152],["p",1048576],["s",3145728]]}],
            "truncated":false,"segments_left_out":0}"#,
        )
        .unwrap()
    }

    #[test]
    fn reads_the_probes_answer() {
        let m = map();
        assert_eq!(m.pools.len(), 2);
        assert_eq!(m.segments[0].runs[2], (RunClass::PendingFree, 1 << 20));
    }

    #[test]
    fn a_request_fits_in_its_own_pool_only() {
        let m = map();
        let big = m.fit(20 << 20);
        assert!(big.fits && big.pool == "large");
        assert!(!m.fit((20 << 20) + 1).fits, "rounded up past the largest block");
        let small = m.fit(1 << 20);
        assert_eq!((small.pool, small.fits), ("small", true));
        assert_eq!(m.fit(1).rounded, 512);
        assert_eq!(m.fit(1000).rounded, 1024);
        let none = SegmentMap { pools: Vec::new(), ..m };
        assert!(!none.fit(1).fits);
    }
}
