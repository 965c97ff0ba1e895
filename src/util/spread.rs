//! Work that only waits on the CPU spread over as many threads as there
//! are CPUs to run them, never more: a heavy tick's driver calls (a driver
//! call works on its caller's CPU: tests/gpu/nvml_costs.py measured each
//! call's CPU time equal to its wall time on an H100) and the first sight
//! of many processes in /proc (the kernel writes each file as it is read).
//! A ninth thread on eight CPUs only takes turns with the others, and on a
//! two-CPU VM eight threads preempted the one starting them: the last
//! started 7 ms after the first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// `work` over `jobs`, results in the jobs' order. Where `parallel`, the
/// calling thread and up to one fewer helper than the CPUs this process may
/// use take the next job in turn; else (or with one CPU) the calling thread
/// does them all. A helper that cannot be started leaves its share to the
/// threads that did start.
pub fn on_threads<J: Send, R: Send>(jobs: Vec<J>, parallel: bool, work: impl Fn(J) -> R + Sync) -> Vec<R> {
    let threads = if parallel { jobs.len().min(cpus()) } else { 1 };
    if threads < 2 {
        return jobs.into_iter().map(work).collect();
    }
    let slots: Vec<Mutex<(Option<J>, Option<R>)>> = jobs.into_iter().map(|j| Mutex::new((Some(j), None))).collect();
    let next = AtomicUsize::new(0);
    let drain = || {
        while let Some(slot) = slots.get(next.fetch_add(1, Ordering::Relaxed)) {
            let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(job) = slot.0.take() {
                slot.1 = Some(work(job));
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            // Not started: the threads that were take its jobs.
            let _ = std::thread::Builder::new().name("gpuscope-spread".into()).spawn_scoped(scope, drain);
        }
        drain();
    });
    slots.into_iter().filter_map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner).1).collect()
}

/// The CPUs this process may run on, by affinity and cgroup quota; worked
/// out once (it reads cgroup files), though a tick may spread work three
/// times.
fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::thread::ThreadId;

    #[test]
    fn every_job_runs_once_and_results_keep_the_jobs_order() {
        for parallel in [false, true] {
            let ran = AtomicUsize::new(0);
            let out = on_threads((0..9).collect(), parallel, |j: u32| {
                ran.fetch_add(1, Ordering::Relaxed);
                j * 10
            });
            assert_eq!(out, (0..9).map(|j| j * 10).collect::<Vec<_>>());
            assert_eq!(ran.load(Ordering::Relaxed), 9);
        }
    }

    #[test]
    fn no_more_threads_than_cpus_and_none_but_the_caller_unless_parallel() {
        let seen = |parallel| {
            let ids = Mutex::new(HashSet::<ThreadId>::new());
            on_threads((0..32).collect(), parallel, |_: u32| {
                ids.lock().unwrap_or_else(PoisonError::into_inner).insert(std::thread::current().id());
                std::thread::sleep(std::time::Duration::from_millis(1));
            });
            ids.into_inner().unwrap_or_else(PoisonError::into_inner)
        };
        assert_eq!(seen(false), HashSet::from([std::thread::current().id()]));
        let parallel = seen(true);
        assert!(!parallel.is_empty() && parallel.len() <= cpus(), "{} threads on {} CPUs", parallel.len(), cpus());
    }

    #[test]
    fn empty_and_single_jobs_stay_on_the_caller() {
        assert!(on_threads(Vec::<u8>::new(), true, |j| j).is_empty());
        let caller = std::thread::current().id();
        assert_eq!(on_threads(vec![1], true, |_: u8| std::thread::current().id()), vec![caller]);
    }
}
