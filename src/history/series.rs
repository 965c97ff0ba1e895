//! One series: the recent past at full resolution, then coarser tiers of
//! time-aligned buckets, each keeping min / max / mean per field so a peak
//! survives aggregation. Every tier is a ring with a fixed capacity, so a
//! series' memory depends on neither the interval nor the run's length.

use std::collections::VecDeque;

/// One field over a bucket. `n == 0`: every sample was unavailable, and so
/// is the bucket. `f32` halves the memory; bytes lose nothing a chart or a
/// threshold can see (a MiB-multiple below 16 TiB is exact).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Agg {
    min: f32,
    max: f32,
    mean: f32,
    n: u32,
}

impl Agg {
    pub const NONE: Self = Self { min: 0.0, max: 0.0, mean: 0.0, n: 0 };

    pub fn add(&mut self, value: Option<f64>) {
        let Some(v) = value.filter(|v| v.is_finite()) else { return };
        let v = v as f32;
        if self.n == 0 {
            *self = Self { min: v, max: v, mean: v, n: 1 };
            return;
        }
        self.n = self.n.saturating_add(1);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        // A running mean, not a sum: a sum of f32 loses small values.
        self.mean += (v - self.mean) / self.n as f32;
    }

    pub fn min(&self) -> Option<f64> {
        (self.n > 0).then_some(f64::from(self.min))
    }

    pub fn max(&self) -> Option<f64> {
        (self.n > 0).then_some(f64::from(self.max))
    }

    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then_some(f64::from(self.mean))
    }

    /// Samples that were available.
    pub fn count(&self) -> u32 {
        self.n
    }
}

/// Samples of one time slot; `t_ms` is the newest sample's, so a bucket of
/// one sample sits exactly where the raw point did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket<const N: usize> {
    pub t_ms: u64,
    fields: [Agg; N],
}

impl<const N: usize> Bucket<N> {
    fn new(t_ms: u64, values: &[Option<f64>; N]) -> Self {
        let mut b = Self { t_ms, fields: [Agg::NONE; N] };
        b.add(t_ms, values);
        b
    }

    fn add(&mut self, t_ms: u64, values: &[Option<f64>; N]) {
        self.t_ms = t_ms;
        self.fields.iter_mut().zip(values).for_each(|(f, v)| f.add(*v));
    }

    pub fn get(&self, field: usize) -> Agg {
        self.fields.get(field).copied().unwrap_or(Agg::NONE)
    }
}

/// A tier's bucket width (0: every sample its own) and how many it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub width_ms: u64,
    pub len: usize,
}

#[derive(Debug, Clone)]
struct Ring<const N: usize> {
    tier: Tier,
    buckets: VecDeque<Bucket<N>>,
    /// Nothing was ever dropped: the ring holds the series from its start.
    complete: bool,
}

impl<const N: usize> Ring<N> {
    fn new(tier: Tier) -> Self {
        Self { tier, buckets: VecDeque::new(), complete: true }
    }

    fn push(&mut self, t_ms: u64, values: &[Option<f64>; N]) {
        let w = self.tier.width_ms;
        if let Some(b) = self.buckets.back_mut().filter(|b| w > 0 && b.t_ms / w == t_ms / w) {
            b.add(t_ms, values);
            return;
        }
        // Drop before adding, so the ring never grows past its length.
        if self.buckets.len() >= self.tier.len.max(1) {
            self.buckets.pop_front();
            self.complete = false;
        }
        if self.buckets.capacity() == 0 {
            self.buckets.reserve_exact(self.tier.len.max(1));
        }
        self.buckets.push_back(Bucket::new(t_ms, values));
    }

    /// Whether the ring reaches back to `from_ms`.
    fn covers(&self, from_ms: u64) -> bool {
        let w = self.tier.width_ms.max(1);
        self.complete || self.buckets.front().is_some_and(|b| b.t_ms - b.t_ms % w <= from_ms)
    }
}

#[derive(Debug, Clone)]
pub struct Series<const N: usize> {
    rings: Vec<Ring<N>>,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

impl<const N: usize> Series<N> {
    /// `tiers` from finest to coarsest.
    pub fn new(tiers: &[Tier]) -> Self {
        Self { rings: tiers.iter().map(|t| Ring::new(*t)).collect(), first_ms: None, last_ms: None }
    }

    /// Adds a sample at `t_ms`. Time going backwards (a clock step) starts
    /// the series afresh rather than mixing two timelines.
    pub fn push(&mut self, t_ms: u64, values: &[Option<f64>; N]) {
        if self.last_ms.is_some_and(|last| last >= t_ms) {
            self.clear();
        }
        self.first_ms.get_or_insert(t_ms);
        self.last_ms = Some(t_ms);
        self.rings.iter_mut().for_each(|r| r.push(t_ms, values));
    }

    fn clear(&mut self) {
        for r in &mut self.rings {
            r.buckets.clear();
            r.complete = true;
        }
        self.first_ms = None;
        self.last_ms = None;
    }

    /// The finest buckets that reach back to `from_ms` (else the coarsest
    /// there are), from the first whose newest sample is at `from_ms` or
    /// later. Times only grow, so the start is found by bisection.
    pub fn since(&self, from_ms: u64) -> impl DoubleEndedIterator<Item = &Bucket<N>> + Clone {
        let buckets = self.ring_for(from_ms).map(|r| &r.buckets);
        let start = buckets.map_or(0, |b| b.partition_point(|b| b.t_ms < from_ms));
        buckets.into_iter().flat_map(move |b| b.range(start..))
    }

    fn ring_for(&self, from_ms: u64) -> Option<&Ring<N>> {
        self.rings.iter().find(|r| r.covers(from_ms)).or(self.rings.last())
    }

    /// The width of the buckets `since(from_ms)` gives (0: raw samples).
    pub fn width_since(&self, from_ms: u64) -> u64 {
        self.ring_for(from_ms).map_or(0, |r| r.tier.width_ms)
    }

    /// Buckets no older than `span_ms` before the newest sample.
    pub fn recent(&self, span_ms: u64) -> impl DoubleEndedIterator<Item = &Bucket<N>> + Clone {
        self.since(self.last_ms.map_or(0, |t| t.saturating_sub(span_ms)))
    }

    pub fn last_ms(&self) -> Option<u64> {
        self.last_ms
    }

    /// Time from the first sample since the series (re)started to the newest.
    pub fn span_ms(&self) -> u64 {
        match (self.first_ms, self.last_ms) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        }
    }

    /// Buckets held in all tiers.
    pub fn len(&self) -> usize {
        self.rings.iter().map(|r| r.buckets.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.last_ms.is_none()
    }

    /// Each tier with its buckets, oldest first.
    #[cfg(test)]
    pub fn tiers(&self) -> impl Iterator<Item = (Tier, &VecDeque<Bucket<N>>)> {
        self.rings.iter().map(|r| (r.tier, &r.buckets))
    }

    /// Buckets the rings have room for without allocating.
    pub fn capacity(&self) -> usize {
        self.rings.iter().map(|r| r.buckets.capacity()).sum()
    }
}
