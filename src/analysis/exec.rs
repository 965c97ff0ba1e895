//! `[alerts] exec`: a user command run for each raised alert, with the
//! alert as JSON on its standard input. Collection never waits for it: the
//! runs go to a small pool (at most `MAX_RUNNING` at once, then a bounded
//! queue, then counted drops), so a storm of alerts is not a storm of
//! processes. Each run is a process group of its own, and a run that
//! outlives `TIME_LIMIT` is killed with everything it started.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::model::{Alert, AlertKind};

pub const TIME_LIMIT: Duration = Duration::from_secs(30);
pub const MAX_RUNNING: usize = 4;
pub const MAX_QUEUED: usize = 64;
/// How often a run is checked for its end, its time limit, or a kill.
const POLL: Duration = Duration::from_millis(20);

pub struct ExecHook {
    argv: Vec<String>,
    min_interval: Duration,
    last: HashMap<(AlertKind, Option<u32>, Option<u32>), Instant>,
    pool: Arc<Pool>,
}

impl ExecHook {
    pub fn new(argv: &[String], min_interval: Duration) -> Option<Self> {
        Self::with_pool(argv, min_interval, POOL.clone())
    }

    pub fn with_pool(argv: &[String], min_interval: Duration, pool: Arc<Pool>) -> Option<Self> {
        (!argv.is_empty()).then(|| Self { argv: argv.to_vec(), min_interval, last: HashMap::new(), pool })
    }

    /// Runs the command for `alert`, unless it ran for the same alert key
    /// less than `min_interval` ago.
    pub fn fire(&mut self, alert: &Alert) {
        let key = (alert.kind, alert.gpu, alert.pid);
        if self.last.get(&key).is_some_and(|t| t.elapsed() < self.min_interval) {
            return;
        }
        self.last.insert(key, Instant::now());
        let Ok(input) = crate::output::json::to_vec(alert) else { return };
        self.pool.submit(Job { argv: self.argv.clone(), input });
    }
}

struct Job {
    argv: Vec<String>,
    input: Vec<u8>,
}

/// Runs hooks a few at a time.
pub struct Pool {
    state: Mutex<PoolState>,
    changed: Condvar,
    max_running: usize,
    max_queued: usize,
    time_limit: Duration,
}

#[derive(Default)]
struct PoolState {
    running: usize,
    queue: VecDeque<Job>,
    counts: Counts,
    /// No new runs: the process is about to exit.
    closed: bool,
    /// Kill every run now.
    kill: bool,
}

/// What became of the hook runs asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub finished: u64,
    /// Killed at the time limit, or because gpuscope was exiting.
    pub killed: u64,
    /// Not run: the queue was full, the program could not start, or
    /// gpuscope was exiting.
    pub dropped: u64,
}

/// The process's pool: the cap holds across everything that fires hooks.
static POOL: LazyLock<Arc<Pool>> = LazyLock::new(|| Pool::new(MAX_RUNNING, MAX_QUEUED, TIME_LIMIT));

impl Pool {
    pub fn new(max_running: usize, max_queued: usize, time_limit: Duration) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(PoolState::default()),
            changed: Condvar::new(),
            max_running,
            max_queued,
            time_limit,
        })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A worker that panicked left counts, not broken invariants.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn submit(self: &Arc<Self>, job: Job) {
        let mut s = self.lock();
        if s.closed {
            s.counts.dropped += 1;
        } else if s.running < self.max_running {
            s.running += 1;
            drop(s);
            let pool = self.clone();
            if std::thread::Builder::new().name("alert-hook".into()).spawn(move || pool.work(job)).is_err() {
                let mut s = self.lock();
                s.running -= 1;
                s.counts.dropped += 1;
            }
        } else if s.queue.len() < self.max_queued {
            s.queue.push_back(job);
        } else {
            s.counts.dropped += 1;
        }
    }

    /// Runs `job`, then whatever is queued, then leaves.
    fn work(&self, mut job: Job) {
        loop {
            let outcome = self.run(&job);
            let mut s = self.lock();
            match outcome {
                Outcome::Finished => s.counts.finished += 1,
                Outcome::Killed => s.counts.killed += 1,
                Outcome::NotStarted => s.counts.dropped += 1,
            }
            match s.queue.pop_front() {
                Some(next) if !s.kill => job = next,
                other => {
                    s.counts.dropped += u64::from(other.is_some());
                    s.running -= 1;
                    self.changed.notify_all();
                    return;
                }
            }
        }
    }

    fn run(&self, job: &Job) -> Outcome {
        let Some((program, args)) = job.argv.split_first() else { return Outcome::NotStarted };
        // Its output would land on gpuscope's terminal or JSON stream. Its
        // own process group: the time limit reaches what it starts too.
        let spawned = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        let Ok(mut child) = spawned else { return Outcome::NotStarted };
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(&job.input);
            let _ = stdin.write_all(b"\n");
        }
        let started = Instant::now();
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return Outcome::Finished;
            }
            if started.elapsed() >= self.time_limit || self.lock().kill {
                kill_group(&mut child);
                return Outcome::Killed;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Takes no new runs, waits up to `wait` for those under way and
    /// queued, then kills what is left (and its process groups).
    pub fn finish(&self, wait: Duration) -> Counts {
        let deadline = Instant::now() + wait;
        let mut s = self.lock();
        s.closed = true;
        while s.running > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                s.kill = true;
                let queued = s.queue.len() as u64;
                s.queue.clear();
                s.counts.dropped += queued;
                // Each run notices the kill within one poll.
                let grace = Instant::now() + Duration::from_secs(2);
                while s.running > 0 && Instant::now() < grace {
                    s = self.changed.wait_timeout(s, POLL).map_or_else(|e| e.into_inner().0, |r| r.0);
                }
                break;
            }
            s = self.changed.wait_timeout(s, left).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        s.counts
    }

    pub fn counts(&self) -> Counts {
        self.lock().counts
    }
}

enum Outcome {
    Finished,
    Killed,
    NotStarted,
}

fn kill_group(child: &mut Child) {
    if let Ok(pgid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative PID signals that process group,
        // which this run created (process_group(0)) and nothing else joins.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Ends the process's hook runs before gpuscope exits: one-shot modes wait
/// up to `wait` for the runs their alerts started; then what is left is
/// killed with its process group, so no hook outlives gpuscope unwatched.
/// Says on stderr what did not run to its end.
pub fn finish_hooks(wait: Duration) -> Counts {
    let counts = POOL.finish(wait);
    if counts.killed > 0 || counts.dropped > 0 {
        crate::output::stderr::say!(
            "gpuscope: [alerts] exec: {} runs finished, {} killed (time limit or exit), {} not run (queue full, \
             not startable, or exiting)",
            counts.finished,
            counts.killed,
            counts.dropped
        );
    }
    counts
}

/// The program `[alerts] exec` names, as it will be run: a path, or the
/// first match on `PATH`; it must be a file this user may execute.
pub fn resolve(program: &str) -> Result<PathBuf, String> {
    if program.contains('/') {
        return executable(Path::new(program)).map(|()| PathBuf::from(program));
    }
    let dirs = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    let mut first_problem = None;
    for dir in dirs {
        let candidate = dir.join(program);
        match executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if candidate.exists() => first_problem = first_problem.or(Some(e)),
            Err(_) => {}
        }
    }
    Err(first_problem.unwrap_or_else(|| format!("cannot find the program {program:?} (not on PATH)")))
}

fn executable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot find the program {:?}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{:?} is not a file", path.display()));
    }
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{:?} has a NUL byte in its name", path.display()))?;
    // SAFETY: a valid C string; access(2) only reads it. X_OK honours root's
    // rule (some execute bit must be set) as exec will.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err(format!("{:?} is not executable by this user (chmod +x it?)", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
