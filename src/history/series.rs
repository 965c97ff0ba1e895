//! One series: the recent past at full resolution, then coarser tiers of
//! time-aligned buckets, each keeping min / max / mean per field so a peak
//! survives aggregation. Every tier is a ring with a capacity it never
//! passes, so a series' memory is bounded whatever the interval and the
//! run's length (it grows to that bound as the tiers fill). The raw tier
//! is not kept while each bucket of the next holds one sample, at an
//! interval of a second or more: those buckets are the raw samples (see
//! `Series::deferred`).
//!
//! A ring is kept by column, not by bucket: most fields of most series are
//! never available (an unprobed process has no allocator figures, an
//! unprobed GPU no reserved or allocated), and a bucket-shaped ring would
//! pay 14 bytes per bucket for each of them all the same. A field's column
//! is only allocated once the field has a value, so a series costs what it
//! records; readers still see whole buckets, with the missing fields
//! unavailable as before.

/// One field over a bucket. `n == 0`: every sample was unavailable, and so
/// is the bucket. `f32` halves the memory; bytes lose nothing a chart or a
/// threshold can see (a MiB-multiple below 16 TiB is exact). The count is
/// 16 bits, packed after the three values: 14 bytes where a 32-bit count
/// took 16, and aggregates are most of a store (every process's coarsest
/// tier). It saturates past 65,535 samples in one bucket (at the 10 ms
/// shortest interval, buckets of 11 minutes: a window of 44 hours for a
/// GPU), where the running mean then weighs each new sample 1/65,535.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, packed(2))]
pub struct Agg {
    min: f32,
    max: f32,
    mean: f32,
    n: u16,
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
        self.mean += (v - self.mean) / f32::from(self.n);
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
        u32::from(self.n)
    }
}

/// Samples of one time slot; `t_ms` is the newest sample's, so a bucket of
/// one sample sits exactly where the raw point did. Rings keep no buckets:
/// they make one from their columns for each reader, as a copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket<const N: usize> {
    pub t_ms: u64,
    fields: [Agg; N],
}

impl<const N: usize> Bucket<N> {
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

/// One field's column: a value per slot of its ring, in the cheapest form
/// that holds what came. One `f32` per bucket (NaN: unavailable) for as
/// long as no bucket has had two values, as in a raw tier, or a one-second
/// tier at a one-second interval. A value and its count (6 bytes) while
/// every bucket's values were all the same: a GPU's total memory, an idle
/// process's, a caching allocator's reserved memory between its rare
/// changes, where min, max and mean are that one value. Whole `Agg`s (14
/// bytes) from the first bucket whose values differ. At a one-second
/// interval that is under a third of the bytes of all but the coarsest
/// tier, and under half of those of a steady field's coarsest. The ring
/// keeps which slots hold which buckets; a column is slots alone.
#[derive(Debug, Clone)]
enum Column {
    Single(Box<[f32]>),
    Level(Box<[Level]>),
    Aggregated(Box<[Agg]>),
}

/// Samples of one bucket that all had the same value: `n` of `v`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, packed(2))]
struct Level {
    v: f32,
    n: u16,
}

impl Level {
    const NONE: Self = Self { v: 0.0, n: 0 };

    fn of(v: f32) -> Self {
        if v.is_nan() { Self::NONE } else { Self { v, n: 1 } }
    }

    fn agg(self) -> Agg {
        let Self { v, n } = self;
        if n == 0 { Agg::NONE } else { Agg { min: v, max: v, mean: v, n } }
    }
}

impl Column {
    /// Every slot without a value.
    fn new(slots: usize) -> Self {
        Self::Single(vec![f32::NAN; slots].into_boxed_slice())
    }

    fn empty(&mut self, slot: usize) {
        match self {
            Self::Single(c) => set(c, slot, f32::NAN),
            Self::Level(c) => set(c, slot, Level::NONE),
            Self::Aggregated(c) => set(c, slot, Agg::NONE),
        }
    }

    /// Adds `value` to the bucket in `slot`, taking the next form where
    /// the one held cannot say what the bucket now holds.
    fn add(&mut self, slot: usize, value: Option<f64>) {
        let Some(v) = value.filter(|v| v.is_finite()) else { return };
        let v32 = v as f32;
        match self {
            Self::Single(c) => match c.get(slot).copied() {
                Some(held) if held.is_nan() => set(c, slot, v32),
                Some(held) if held == v32 => {
                    let mut level: Box<[Level]> = c.iter().map(|v| Level::of(*v)).collect();
                    set(&mut level, slot, Level { v: v32, n: 2 });
                    *self = Self::Level(level);
                }
                Some(_) => self.aggregate(slot, v),
                None => {}
            },
            Self::Level(c) => {
                let Some(Level { v: held, n }) = c.get(slot).copied() else { return };
                if n == 0 {
                    set(c, slot, Level { v: v32, n: 1 });
                } else if held == v32 {
                    set(c, slot, Level { v: held, n: n.saturating_add(1) });
                } else {
                    self.aggregate(slot, v);
                }
            }
            Self::Aggregated(c) => {
                if let Some(a) = c.get_mut(slot) {
                    a.add(Some(v));
                }
            }
        }
    }

    /// Whole aggregates from now on, `v` added to the bucket in `slot`.
    fn aggregate(&mut self, slot: usize, v: f64) {
        let mut whole: Box<[Agg]> = (0..self.slots()).map(|i| self.get(i)).collect();
        if let Some(a) = whole.get_mut(slot) {
            a.add(Some(v));
        }
        *self = Self::Aggregated(whole);
    }

    fn slots(&self) -> usize {
        match self {
            Self::Single(c) => c.len(),
            Self::Level(c) => c.len(),
            Self::Aggregated(c) => c.len(),
        }
    }

    /// The same buckets in `slots` slots, oldest first (see `regrow`).
    fn regrow(&mut self, head: usize, slots: usize) {
        match self {
            Self::Single(c) => *c = regrow(std::mem::take(c), head, slots, f32::NAN),
            Self::Level(c) => *c = regrow(std::mem::take(c), head, slots, Level::NONE),
            Self::Aggregated(c) => *c = regrow(std::mem::take(c), head, slots, Agg::NONE),
        }
    }

    fn get(&self, slot: usize) -> Agg {
        match self {
            Self::Single(c) => c.get(slot).map_or(Agg::NONE, |v| Level::of(*v).agg()),
            Self::Level(c) => c.get(slot).map_or(Agg::NONE, |l| l.agg()),
            Self::Aggregated(c) => c.get(slot).copied().unwrap_or(Agg::NONE),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Self::Single(c) => size_of_val::<[f32]>(c),
            Self::Level(c) => size_of_val::<[Level]>(c),
            Self::Aggregated(c) => size_of_val::<[Agg]>(c),
        }
    }
}

fn set<T>(column: &mut [T], slot: usize, value: T) {
    if let Some(held) = column.get_mut(slot) {
        *held = value;
    }
}

/// One tier's buckets, in a circle of slots: the oldest bucket in slot
/// `head`, the next ones after it, `len` of them. The times and every
/// column share that one index, so a bucket in or out moves two numbers
/// rather than a `VecDeque` per column (each 32 bytes of head, length and
/// capacity of its own). A column that does not exist reads as unavailable
/// throughout.
///
/// The slots double as buckets come (from `FIRST_SLOTS`) up to the tier's
/// length, and never past it: a series holds room for about what it has
/// recorded, not for the whole window from its first sample. A dashboard
/// opened a minute ago on 512 processes would otherwise hold ten minutes'
/// worth of coarse buckets for each, nearly all of them empty.
#[derive(Debug, Clone)]
struct Ring<const N: usize> {
    tier: Tier,
    head: usize,
    len: usize,
    /// Each bucket's newest sample time, as an offset in milliseconds from
    /// `base_ms`: half the bytes of whole timestamps. A ring spans at most
    /// its length times its bucket width; where that passes `u32::MAX` ms
    /// (49 days: a one-day interval's 64 one-second buckets), the oldest
    /// times go as a full ring's would.
    base_ms: u64,
    times: Box<[u32]>,
    fields: [Option<Column>; N],
    /// Nothing was ever dropped: the ring holds the series from its start.
    complete: bool,
}

/// The slots a ring starts with: a growing ring copies its buckets about
/// as many times over as it holds (one doubling after another), so this
/// only spares the first, smallest copies.
pub(super) const FIRST_SLOTS: usize = 4;

/// `old`, every slot of which holds a bucket, the oldest in slot `head`:
/// the same buckets oldest first, in `slots` slots with `fill` in the rest.
fn regrow<T: Copy>(old: Box<[T]>, head: usize, slots: usize, fill: T) -> Box<[T]> {
    let mut v = old.into_vec();
    if head < v.len() {
        v.rotate_left(head);
    }
    v.reserve_exact(slots.saturating_sub(v.len()));
    v.resize(slots.max(v.len()), fill);
    v.into_boxed_slice()
}

impl<const N: usize> Ring<N> {
    fn new(tier: Tier) -> Self {
        Self {
            tier,
            head: 0,
            len: 0,
            base_ms: 0,
            times: Box::default(),
            fields: std::array::from_fn(|_| None),
            complete: true,
        }
    }

    /// The most buckets the ring holds, and slots it ever has.
    fn max_len(&self) -> usize {
        self.tier.len.max(1)
    }

    /// The slot of the `i`th bucket, oldest first (`i` at most `len`,
    /// which is at most the slots there are).
    fn slot(&self, i: usize) -> usize {
        let s = self.head + i;
        if s >= self.times.len() { s - self.times.len() } else { s }
    }

    fn offset_at(&self, i: usize) -> Option<u32> {
        (i < self.len).then(|| self.times.get(self.slot(i)).copied()).flatten()
    }

    fn time(&self, i: usize) -> Option<u64> {
        self.offset_at(i).map(|o| self.base_ms + u64::from(o))
    }

    fn front(&self) -> Option<u64> {
        self.time(0)
    }

    fn back(&self) -> Option<u64> {
        self.len.checked_sub(1).and_then(|i| self.time(i))
    }

    fn pop_front(&mut self) {
        if self.len > 0 {
            self.head = self.slot(1);
            self.len -= 1;
        }
        self.complete = false;
    }

    /// The offset of `t_ms`, moving the base up to the oldest time held
    /// where it no longer fits; `None` where it fits only without the
    /// oldest (the caller drops it and asks again). Times only grow.
    fn offset(&mut self, t_ms: u64) -> Option<u32> {
        if self.len == 0 {
            self.base_ms = t_ms;
        }
        if let Ok(o) = u32::try_from(t_ms - self.base_ms) {
            return Some(o);
        }
        let oldest = self.front().unwrap_or(t_ms);
        let fits = u32::try_from(t_ms - oldest).ok()?;
        // Within u32: every offset held is at least the oldest's.
        let shift = u32::try_from(oldest - self.base_ms).unwrap_or(u32::MAX);
        for i in 0..self.len {
            let slot = self.slot(i);
            if let Some(o) = self.times.get_mut(slot) {
                *o -= shift;
            }
        }
        self.base_ms = oldest;
        Some(fits)
    }

    /// The index of the first bucket whose time is `from_ms` or later.
    fn first_from(&self, from_ms: u64) -> usize {
        let Some(o) = from_ms.checked_sub(self.base_ms) else { return 0 };
        let o = u32::try_from(o).unwrap_or(u32::MAX);
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.offset_at(mid).is_some_and(|t| t < o) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn push(&mut self, t_ms: u64, values: &[Option<f64>; N]) {
        let w = self.tier.width_ms;
        let same_bucket = w > 0 && self.back().is_some_and(|b| b / w == t_ms / w);
        // Drop before adding, so the ring never grows past its length.
        if !same_bucket && self.len >= self.max_len() {
            self.pop_front();
        }
        let offset = loop {
            match self.offset(t_ms) {
                Some(o) => break o,
                None => self.pop_front(),
            }
        };
        if !(same_bucket && self.len > 0) {
            if self.len >= self.times.len() {
                self.grow();
            }
            self.len += 1;
            let slot = self.slot(self.len - 1);
            self.fields.iter_mut().flatten().for_each(|c| c.empty(slot));
        }
        let slot = self.slot(self.len - 1);
        if let Some(t) = self.times.get_mut(slot) {
            *t = offset;
        }
        let slots = self.times.len();
        for (column, v) in self.fields.iter_mut().zip(values) {
            if column.is_none() && v.is_some_and(f64::is_finite) {
                // The buckets before the field's first value had none.
                *column = Some(Column::new(slots));
            }
            if let Some(c) = column {
                c.add(slot, *v);
            }
        }
    }

    /// Twice the slots (at least `FIRST_SLOTS`), at most the tier's
    /// length, the buckets held moved to the front. Called only with every
    /// slot taken, so there is always one more (the ring drops its oldest
    /// before taking a bucket beyond its length).
    fn grow(&mut self) {
        let slots = (self.times.len() * 2).max(FIRST_SLOTS).min(self.max_len());
        self.times = regrow(std::mem::take(&mut self.times), self.head, slots, 0);
        for column in self.fields.iter_mut().flatten() {
            column.regrow(self.head, slots);
        }
        self.head = 0;
    }

    fn clear(&mut self) {
        (self.head, self.len) = (0, 0);
        self.fields = std::array::from_fn(|_| None);
        self.complete = true;
    }

    /// The `i`th bucket, oldest first.
    fn bucket(&self, i: usize) -> Option<Bucket<N>> {
        let t_ms = self.time(i)?;
        let slot = self.slot(i);
        let fields = self.fields.each_ref().map(|c| c.as_ref().map_or(Agg::NONE, |c| c.get(slot)));
        Some(Bucket { t_ms, fields })
    }

    /// The buckets from the `start`th on, oldest first.
    fn buckets(&self, start: usize) -> impl DoubleEndedIterator<Item = Bucket<N>> + Clone + '_ {
        (start..self.len).filter_map(|i| self.bucket(i))
    }

    /// One field of the buckets from the `start`th on, oldest first, the
    /// others not read.
    fn field_from(&self, start: usize, field: usize) -> impl Iterator<Item = Agg> + '_ {
        let column = self.fields.get(field).and_then(Option::as_ref);
        (start..self.len).filter_map(move |i| {
            self.time(i)?;
            Some(column.map_or(Agg::NONE, |c| c.get(self.slot(i))))
        })
    }

    /// Whether the ring reaches back to `from_ms`.
    fn covers(&self, from_ms: u64) -> bool {
        let w = self.tier.width_ms.max(1);
        self.complete || self.front().is_some_and(|t| t - t % w <= from_ms)
    }

    /// Buckets the ring has room for without allocating.
    fn capacity(&self) -> usize {
        self.times.len()
    }

    /// What the ring's columns take on the heap.
    fn heap_bytes(&self) -> usize {
        size_of_val::<[u32]>(&self.times) + self.fields.iter().flatten().map(Column::heap_bytes).sum::<usize>()
    }
}

#[derive(Debug, Clone)]
pub struct Series<const N: usize> {
    rings: Vec<Ring<N>>,
    /// The raw tier, not kept yet. Until two samples fall in one bucket of
    /// the next tier, each of its buckets is one sample as it came, and it
    /// holds at least as many: a raw ring would copy its newest. At a
    /// one-second interval or longer, the dashboard's default, that is for
    /// good, and each of 512 processes spares its raw ring (about 260
    /// bytes with its columns).
    deferred: Option<Tier>,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

impl<const N: usize> Series<N> {
    /// `tiers` from finest to coarsest.
    pub fn new(tiers: &[Tier]) -> Self {
        let defer = matches!(tiers, [raw, next, ..] if raw.width_ms == 0 && next.width_ms > 0 && next.len >= raw.len);
        let (deferred, kept) = match tiers.split_first() {
            Some((raw, rest)) if defer => (Some(*raw), rest),
            _ => (None, tiers),
        };
        Self { rings: kept.iter().map(|t| Ring::new(*t)).collect(), deferred, first_ms: None, last_ms: None }
    }

    /// Adds the tiers of `tiers` finer than the finest kept, empty: for a
    /// series started with its coarsest tier alone that now wants detail
    /// (see `Store::record`). They hold the series from now on, and are
    /// read where they reach back far enough.
    pub fn refine(&mut self, tiers: &[Tier]) {
        let finest = self.rings.first().map_or(u64::MAX, |r| r.tier.width_ms);
        if self.deferred.is_some() || tiers.first().is_none_or(|t| t.width_ms >= finest) {
            return;
        }
        let finer: Vec<Tier> = tiers.iter().filter(|t| t.width_ms < finest).copied().collect();
        let mut fine = Self::new(&finer);
        let from_start = self.last_ms.is_none();
        fine.rings.iter_mut().for_each(|r| r.complete = from_start);
        fine.rings.reserve_exact(self.rings.len());
        fine.rings.append(&mut self.rings);
        self.rings = fine.rings;
        self.deferred = fine.deferred;
    }

    /// Adds a sample at `t_ms`. Time going backwards (a clock step) starts
    /// the series afresh rather than mixing two timelines.
    pub fn push(&mut self, t_ms: u64, values: &[Option<f64>; N]) {
        if self.last_ms.is_some_and(|last| last >= t_ms) {
            self.clear();
        }
        if let (Some(raw), Some(last), Some(next)) = (self.deferred, self.last_ms, self.rings.first())
            && last / next.tier.width_ms.max(1) == t_ms / next.tier.width_ms.max(1)
        {
            self.keep_raw(raw);
        }
        self.first_ms.get_or_insert(t_ms);
        self.last_ms = Some(t_ms);
        self.rings.iter_mut().for_each(|r| r.push(t_ms, values));
    }

    /// Starts the deferred raw ring with the newest buckets of the next
    /// tier, each of them one sample still: what the raw ring would hold.
    fn keep_raw(&mut self, tier: Tier) {
        let mut raw = Ring::new(tier);
        if let Some(next) = self.rings.first() {
            let start = next.len.saturating_sub(raw.max_len());
            for b in next.buckets(start) {
                raw.push(b.t_ms, &b.fields.map(|a| a.mean()));
            }
            raw.complete = next.complete && start == 0;
        }
        self.rings.reserve_exact(1);
        self.rings.insert(0, raw);
        self.deferred = None;
    }

    fn clear(&mut self) {
        self.rings.iter_mut().for_each(Ring::clear);
        self.first_ms = None;
        self.last_ms = None;
    }

    /// The finest buckets that reach back to `from_ms` (else the coarsest
    /// there are), from the first whose newest sample is at `from_ms` or
    /// later. Times only grow, so the start is found by bisection.
    pub fn since(&self, from_ms: u64) -> impl DoubleEndedIterator<Item = Bucket<N>> + Clone + '_ {
        let (ring, start) = self.start_of(from_ms);
        ring.into_iter().flat_map(move |r| r.buckets(start))
    }

    /// The ring `since(from_ms)` reads, and its first bucket there.
    fn start_of(&self, from_ms: u64) -> (Option<&Ring<N>>, usize) {
        let ring = self.ring_for(from_ms);
        (ring, ring.map_or(0, |r| r.first_from(from_ms)))
    }

    fn ring_for(&self, from_ms: u64) -> Option<&Ring<N>> {
        self.rings.iter().find(|r| r.covers(from_ms)).or(self.rings.last())
    }

    /// Whether some bucket held ever had a value of `field`: a field
    /// never recorded (activity, on boards without it) is known to be
    /// empty without reading every bucket.
    pub fn records(&self, field: usize) -> bool {
        self.rings.iter().any(|r| r.fields.get(field).is_some_and(Option::is_some))
    }

    /// The width of the buckets `since(from_ms)` gives (0: raw samples).
    /// While the raw ring is deferred, the first ring's buckets are each
    /// one sample: raw, as the raw ring's would be.
    pub fn width_since(&self, from_ms: u64) -> u64 {
        let ring = self.ring_for(from_ms);
        let first = self.deferred.is_some() && ring.zip(self.rings.first()).is_some_and(|(r, f)| std::ptr::eq(r, f));
        if first { 0 } else { ring.map_or(0, |r| r.tier.width_ms) }
    }

    /// Buckets no older than `span_ms` before the newest sample.
    pub fn recent(&self, span_ms: u64) -> impl DoubleEndedIterator<Item = Bucket<N>> + Clone + '_ {
        self.since(self.span_start(span_ms))
    }

    /// Where the last `span_ms` before the newest sample begin.
    fn span_start(&self, span_ms: u64) -> u64 {
        self.last_ms.map_or(0, |t| t.saturating_sub(span_ms))
    }

    /// `recent(span_ms)`'s buckets' `field` alone, as `b.get(field)` of
    /// each: a rule that judges one figure over its window each tick, for
    /// each of hundreds of processes, has no use for the others.
    pub fn recent_field(&self, span_ms: u64, field: usize) -> impl Iterator<Item = Agg> + '_ {
        let (ring, start) = self.start_of(self.span_start(span_ms));
        ring.into_iter().flat_map(move |r| r.field_from(start, field))
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
        self.rings.iter().map(|r| r.len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.last_ms.is_none()
    }

    /// What the raw ring takes beside the others, once kept.
    #[cfg(test)]
    pub fn ring_bytes() -> usize {
        size_of::<Ring<N>>()
    }

    /// Each tier kept with its buckets, oldest first.
    #[cfg(test)]
    pub fn tiers(&self) -> impl Iterator<Item = (Tier, Vec<Bucket<N>>)> + '_ {
        self.rings.iter().map(|r| (r.tier, r.buckets(0).collect()))
    }

    /// Each tier with the buckets it holds and the slots it has.
    #[cfg(test)]
    pub fn slots(&self) -> impl Iterator<Item = (Tier, usize, usize)> + '_ {
        self.rings.iter().map(|r| (r.tier, r.len, r.capacity()))
    }

    /// Buckets the rings have room for without allocating.
    pub fn capacity(&self) -> usize {
        self.rings.iter().map(Ring::capacity).sum()
    }

    /// Bytes the series holds on the heap: its rings and their columns, by
    /// capacity. The series' own few words are its owner's to count.
    pub fn heap_bytes(&self) -> usize {
        self.rings.capacity() * size_of::<Ring<N>>() + self.rings.iter().map(Ring::heap_bytes).sum::<usize>()
    }
}
