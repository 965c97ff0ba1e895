//! Bounded history: one series per GPU and per (process, GPU), trimmed to a
//! time window and a hard cap on points, so memory stays bounded however
//! long gpuscope runs and however short the interval.

use std::collections::{HashMap, VecDeque};

/// At a 100 ms interval, ten minutes is 6 000 points; this cap bounds a
/// series even when the window is set very long.
pub const MAX_POINTS: usize = 10_000;

#[derive(Debug, Clone)]
pub struct Series<T> {
    points: VecDeque<(u64, T)>,
    window_ms: u64,
}

impl<T> Series<T> {
    pub fn new(window_ms: u64) -> Self {
        Self { points: VecDeque::new(), window_ms }
    }

    /// Adds a sample at `t_ms`. Time going backwards (a clock step) starts
    /// the series afresh rather than mixing two timelines.
    pub fn push(&mut self, t_ms: u64, value: T) {
        if self.points.back().is_some_and(|(last, _)| *last >= t_ms) {
            self.points.clear();
        }
        self.points.push_back((t_ms, value));
        let oldest = t_ms.saturating_sub(self.window_ms);
        while self.points.front().is_some_and(|(t, _)| *t < oldest) || self.points.len() > MAX_POINTS {
            self.points.pop_front();
        }
    }

    /// Samples no older than `span_ms` before the newest. Times only grow
    /// (see `push`), so the start is found by bisection: rules call this for
    /// every process on every tick.
    pub fn recent(&self, span_ms: u64) -> impl DoubleEndedIterator<Item = &(u64, T)> + Clone {
        let from = self.points.back().map_or(0, |(t, _)| t.saturating_sub(span_ms));
        let start = self.points.partition_point(|(t, _)| *t < from);
        self.points.range(start..)
    }

    pub fn last(&self) -> Option<&(u64, T)> {
        self.points.back()
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Time from the oldest to the newest sample.
    pub fn span_ms(&self) -> u64 {
        match (self.points.front(), self.points.back()) {
            (Some((a, _)), Some((b, _))) => b - a,
            _ => 0,
        }
    }
}

/// Series keyed by something that comes and goes (GPUs, processes): keys
/// not seen in a snapshot are dropped with their series.
#[derive(Debug)]
pub struct Table<K, T> {
    series: HashMap<K, Series<T>>,
    window_ms: u64,
}

impl<K: std::hash::Hash + Eq + Clone, T> Table<K, T> {
    pub fn new(window_ms: u64) -> Self {
        Self { series: HashMap::new(), window_ms }
    }

    pub fn push(&mut self, key: K, t_ms: u64, value: T) {
        let window = self.window_ms;
        self.series.entry(key).or_insert_with(|| Series::new(window)).push(t_ms, value);
    }

    pub fn get(&self, key: &K) -> Option<&Series<T>> {
        self.series.get(key)
    }

    pub fn retain_keys(&mut self, keep: impl Fn(&K) -> bool) {
        self.series.retain(|k, _| keep(k));
    }

    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    pub fn total_points(&self) -> usize {
        self.series.values().map(Series::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_to_window_and_restarts_on_clock_steps() {
        let mut s = Series::new(1_000);
        for t in (0..5_000).step_by(100) {
            s.push(t, t);
        }
        assert_eq!(s.span_ms(), 1_000);
        assert_eq!(s.recent(300).count(), 4);
        s.push(10, 10);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn never_exceeds_the_cap() {
        let mut s = Series::new(u64::MAX);
        for t in 0..(MAX_POINTS as u64 + 500) {
            s.push(t, ());
        }
        assert_eq!(s.len(), MAX_POINTS);
    }
}
