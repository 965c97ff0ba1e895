//! A hasher for the maps the collector and the analyzer rebuild or look up
//! on every tick, all keyed by small integers: PIDs, GPU indices, and keys
//! made of them (`ProcKey`).
//!
//! The standard map's SipHash resists keys chosen to collide, which is
//! worth its cost for strings from outside; a PID is assigned by the
//! kernel, not chosen by anyone who could aim at a bucket. Profiled, SipHash
//! was a tenth of the analyzer's time per tick. This is the
//! multiply-and-rotate hash rustc uses for its own integer-keyed tables:
//! one rotate, one xor and one multiply per word.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by integers, or by small structs of them.
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;
/// A set of integers, or of small structs of them.
pub type IntSet<K> = HashSet<K, BuildHasherDefault<IntHasher>>;

/// An odd constant with bits spread evenly (2^64 over the golden ratio,
/// made odd): multiplying by it mixes every bit of a word into the high
/// bits, which the map's table uses for its tags.
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

#[derive(Debug, Default, Clone, Copy)]
pub struct IntHasher(u64);

impl IntHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SPREAD);
    }
}

impl Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::ProcKey;
    use std::hash::{BuildHasher, Hash};

    fn hash(v: impl Hash) -> u64 {
        BuildHasherDefault::<IntHasher>::default().hash_one(v)
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
        // The table takes its tag from the top 7 bits and the bucket from
        // the low ones: both must vary across a run of consecutive PIDs.
        let hashes: Vec<u64> = (4000u32..4512).map(hash).collect();
        let tags: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        assert!(tags.len() > 100, "{}", tags.len());
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
