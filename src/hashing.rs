//! The maps the collector and the analyzer rebuild or look up on every
//! tick, all keyed by small integers: PIDs, GPU indices, and keys made of
//! them (`ProcKey`).
//!
//! The standard map's SipHash resists keys chosen to collide, which is
//! worth its cost for strings from outside; a PID is assigned by the
//! kernel, not chosen by anyone who could aim at a bucket. Profiled, SipHash
//! was a tenth of the analyzer's time per tick. rustc-hash's `FxHasher` is
//! the multiply-and-rotate hash rustc uses for its own integer-keyed
//! tables.

/// A map keyed by integers, or by small structs of them.
pub type IntMap<K, V> = rustc_hash::FxHashMap<K, V>;
/// A set of integers, or of small structs of them.
pub type IntSet<K> = rustc_hash::FxHashSet<K>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::ProcKey;
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hash};

    fn hash(v: impl Hash) -> u64 {
        rustc_hash::FxBuildHasher.hash_one(v)
    }

    #[test]
    fn keys_that_differ_in_any_field_hash_apart() {
        let key = |pid, start_ms, gpu| ProcKey { pid, start_ms, gpu };
        let keys = [key(1, None, 0), key(1, Some(0), 0), key(1, None, 1), key(2, None, 0), key(1, Some(1), 0)];
        let hashes: HashSet<u64> = keys.iter().map(hash).collect();
        assert_eq!(hashes.len(), keys.len());
        assert_eq!(hash(key(7, Some(3), 2)), hash(key(7, Some(3), 2)));
    }

    #[test]
    fn consecutive_pids_spread_over_the_tags_and_the_buckets() {
        // The table takes the bucket from the low bits: a run of
        // consecutive PIDs must land in as many buckets. Its tag (the top 7
        // bits) only filters the 16 slots of a probe, so it need only vary:
        // FxHasher rotates its best bits into the low ones (26 of them), and
        // these 512 PIDs get 69 of the 128 tags.
        let hashes: Vec<u64> = (4000u32..4512).map(hash).collect();
        let tags: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        assert!(tags.len() >= 64, "{}", tags.len());
        assert_eq!(buckets.len(), 512);
    }

    #[test]
    fn bytes_hash_by_every_byte() {
        assert_ne!(hash([1u8, 2, 3].as_slice()), hash([1u8, 2, 4].as_slice()));
        assert_ne!(hash([0u8; 9].as_slice()), hash([0u8; 8].as_slice()));
    }

    #[test]
    fn maps_work_as_maps() {
        let mut m: IntMap<u32, &str> = IntMap::default();
        m.insert(1, "a");
        m.insert(2, "b");
        assert_eq!(m.get(&1), Some(&"a"));
        assert_eq!(m.remove(&2), Some("b"));
        assert_eq!(m.len(), 1);
    }
}
