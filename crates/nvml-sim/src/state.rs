//! The process-global driver state: init reference count, the scenario in
//! force, and the polling that picks up edits to the scenario file.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::code::{self, FUNCTION_NOT_FOUND, Outcome, UNINITIALIZED, UNKNOWN, nvmlReturn_t};
use crate::scenario::Scenario;
use crate::source::{Fingerprint, Source};
use crate::{cost, timing};

/// Bounds the cost of watching the file for callers that poll NVML in a
/// tight loop, while still letting tests see an edit almost at once.
const RECHECK_INTERVAL: Duration = Duration::from_millis(10);

static STATE: Mutex<State> = Mutex::new(State { live: None });

pub(crate) struct State {
    /// `Some` exactly while NVML is initialised.
    live: Option<Live>,
}

struct Live {
    refcount: u32,
    scenario: Scenario,
    source: Source,
    started: Instant,
    /// `started` by the wall clock, in microseconds since 1970.
    started_unix_us: i64,
    last_check: Instant,
    /// The file version last acted on, loaded or reported as broken, so
    /// that a broken file is complained about once rather than per call.
    seen: Option<Fingerprint>,
}

/// What a call sees: the scenario and the time at which to evaluate it.
pub(crate) struct Ctx<'a> {
    pub scenario: &'a Scenario,
    /// Seconds since init: what every reading is a function of.
    pub t: f64,
    /// The same moment by the wall clock, in microseconds since 1970, as
    /// NVML stamps a field value (`nvmlFieldValue_t.timestamp`).
    pub unix_us: i64,
}

/// A panic inside a call poisons the mutex; the state itself stays
/// consistent (every update is a single assignment), so keep using it.
pub(crate) fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    pub(crate) fn init(&mut self, function: &str) -> Outcome {
        if let Some(live) = &mut self.live {
            live.refresh();
            if live.scenario.hides(function) {
                return Err(FUNCTION_NOT_FOUND);
            }
            if let Some(err) = live.scenario.init_error {
                return Err(code::init_error(err));
            }
            live.refcount += 1;
            return Ok(());
        }
        let source = Source::from_env();
        let seen = source.fingerprint();
        let scenario = source.load().map_err(|message| {
            eprintln!("{message}");
            UNKNOWN
        })?;
        timing::set_init_hangs(scenario.hang_init);
        if scenario.hides(function) {
            return Err(FUNCTION_NOT_FOUND);
        }
        if let Some(err) = scenario.init_error {
            return Err(code::init_error(err));
        }
        timing::set_delay_ms(scenario.call_delay_ms);
        cost::apply(&scenario);
        let now = Instant::now();
        timing::set_hang(now, scenario.hang_after_s);
        let started_unix_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        self.live = Some(Live { refcount: 1, scenario, source, started: now, started_unix_us, last_check: now, seen });
        Ok(())
    }

    /// Succeeds even while the scenario fails the driver: a client giving up
    /// on a broken session must still be able to close it.
    pub(crate) fn shutdown(&mut self, function: &str) -> Outcome {
        let live = self.live.as_mut().ok_or(UNINITIALIZED)?;
        live.refresh();
        if live.scenario.hides(function) {
            return Err(FUNCTION_NOT_FOUND);
        }
        live.refcount -= 1;
        if live.refcount == 0 {
            self.live = None;
            timing::set_delay_ms(0);
            timing::set_hang(Instant::now(), None);
            cost::stop();
        }
        Ok(())
    }

    /// The gate every call but init and shutdown passes: initialised,
    /// scenario current, the function not hidden by the scenario, and the
    /// driver not failed by it (`init_error` set while running stands for a
    /// driver unloaded or upgraded under a live client).
    pub(crate) fn ready(&mut self, function: &str) -> Result<Ctx<'_>, nvmlReturn_t> {
        let live = self.live.as_mut().ok_or(UNINITIALIZED)?;
        live.refresh();
        if live.scenario.hides(function) {
            return Err(FUNCTION_NOT_FOUND);
        }
        if let Some(err) = live.scenario.init_error {
            return Err(code::init_error(err));
        }
        let elapsed = live.started.elapsed();
        let unix_us = live.started_unix_us.saturating_add(i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX));
        Ok(Ctx { scenario: &live.scenario, t: elapsed.as_secs_f64(), unix_us })
    }
}

impl Live {
    fn refresh(&mut self) {
        if !self.source.watched() || self.last_check.elapsed() < RECHECK_INTERVAL {
            return;
        }
        self.last_check = Instant::now();
        let current = self.source.fingerprint();
        if current == self.seen {
            return;
        }
        self.seen = current;
        match self.source.load() {
            Ok(scenario) => {
                timing::set_delay_ms(scenario.call_delay_ms);
                if scenario.call_log != self.scenario.call_log
                    || scenario.realistic_costs != self.scenario.realistic_costs
                {
                    cost::apply(&scenario);
                }
                timing::set_hang(self.started, scenario.hang_after_s);
                timing::set_init_hangs(scenario.hang_init);
                self.scenario = scenario;
            }
            Err(message) => eprintln!("{message}; keeping the previous scenario"),
        }
    }
}
