//! A map kept as a vector sorted by key, for the per-process state that
//! lives from tick to tick (history series, the rules' running state).
//! A hash table sized for 512 processes keeps room for as many again, and
//! a vector grown by doubling likewise; this one grows by an eighth, so it
//! holds about what it has. Lookups bisect; an insert shifts the entries
//! after it, which happens only when a process is first seen.

#[derive(Debug, Clone)]
pub struct SortedMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: Ord + Copy, V> SortedMap<K, V> {
    fn find(&self, key: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.find(key).ok().and_then(|i| self.0.get(i)).map(|(_, v)| v)
    }

    /// The value of `key`, made by `make` where there is none yet.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&key) {
            Ok(i) => i,
            Err(i) => {
                if self.0.len() == self.0.capacity() {
                    self.0.reserve_exact(self.0.len() / 8 + 1);
                }
                self.0.insert(i, (key, make()));
                i
            }
        };
        // An entry's index: found, or just inserted there.
        &mut self.0[i].1
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.find(key).ok().map(|i| self.0.remove(i).1)
    }

    /// Keeps the entries `keep` says yes to; the room given back once fewer
    /// than half of it are used, so a node that had many processes once
    /// does not keep their room.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
        if self.0.len() < self.0.capacity() / 2 {
            self.0.shrink_to(self.0.len() + self.0.len() / 8);
        }
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + '_ {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.0.iter().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::SortedMap;

    #[test]
    fn entries_stay_in_key_order_whatever_the_order_of_inserts() {
        let mut m = SortedMap::default();
        for k in [5u32, 1, 9, 3, 7] {
            *m.get_or_insert_with(k, || 0) += k;
        }
        *m.get_or_insert_with(3, || 100) += 1;
        assert_eq!(m.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(), [(1, 1), (3, 4), (5, 5), (7, 7), (9, 9)]);
        assert_eq!(m.get(&7), Some(&7));
        assert_eq!(m.get(&2), None);
        assert_eq!(m.remove(&5), Some(5));
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn room_grows_by_an_eighth_and_goes_back_when_most_entries_leave() {
        let mut m = SortedMap::default();
        for k in 0..512u32 {
            m.get_or_insert_with(k, || ());
        }
        // Doubling would hold room for 512 more at the next insert.
        assert!(m.capacity() < 512 + 512 / 8 + 2, "capacity {}", m.capacity());
        m.get_or_insert_with(512, || ());
        assert!(m.capacity() < 513 + 513 / 8 + 2, "capacity {}", m.capacity());
        m.retain(|k, _| *k < 100);
        assert_eq!(m.len(), 100);
        assert!(m.capacity() < 200, "capacity {} for 100 entries", m.capacity());
    }
}
