//! Which readings an output shows, so that the driver is asked for those
//! alone. Every output gets a GPU's identity and state, memory,
//! utilisation, temperature, power draw and enforced limit, performance
//! state, MIG mode and devices, NVLink and the process lists: the alerts'
//! rules and every view read them. The groups here are what some outputs
//! never show. JSON, a recording and the exporter show all of them; `-1`
//! all but the maximum clocks, the per-process samples, the settings and
//! the PCIe link;
//! a query what its fields show (`query::gpu_fields::wants`); the
//! dashboard the per-process samples (its UTIL% and GMBW% columns) and the
//! activity counters, and the clocks and PCIe rates only while it shows
//! them (`sources::OnScreen`); `check`, whose report is the alerts, the
//! activity counters alone (two rules read them).

use crate::model::{Bar1Memory, Clocks, Ecc, Gpu, MaxClocks, Pcie, PcieLink, RemappedRows};
use crate::sources::OnScreen;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    /// The maximum clocks: on a GPU's first tick, four calls of about
    /// 1.4 ms of the driver's CPU each (`boards.rs`).
    pub max_clocks: bool,
    /// Each process's SM use: every tick, 2.5 ms of the driver's CPU for
    /// each GPU running a process (tests/gpu/nvml_costs.py).
    pub process_samples: bool,
    /// The current SM, memory, graphics and video clocks, and why they are
    /// held down: five calls a tick.
    pub clocks: bool,
    /// PCIe rates: two field-value calls a tick, 0.3 ms each (`pcie.rs`).
    pub pcie: bool,
    /// The PCIe link's generation and width and its replay counter: three
    /// calls a tick, two more on a GPU's first (`link.rs`).
    pub pcie_link: bool,
    /// The fan's speed: 160 µs a call, every tick.
    pub fan: bool,
    /// The encoder's and decoder's utilisation.
    pub codecs: bool,
    /// ECC mode and error totals, pages pending retirement, remapped rows,
    /// BAR1, the recovery action and NVLink's error totals: nine calls
    /// every 10 s (`slow.rs`); and why the clocks are held down, one call
    /// a tick.
    pub health: bool,
    /// The serial number, persistence and compute modes, the power
    /// management limit, and accounting.
    pub settings: bool,
    /// The activity counters (GPM, `gpm.rs`): two calls a GPU and a GPU
    /// instance a tick, on boards that have them.
    pub activity: bool,
    /// A one-shot's activity: its figures need a second sample at least
    /// 0.1 s after the first, which the tick waits for (`--activity`).
    pub activity_wait: bool,
    /// The driver's events (Xid, ECC): a thread of its own that waits on
    /// them (`events.rs`), for the outputs that keep running; a one-shot
    /// is over before any could come.
    pub events: bool,
    /// The energy counter: one ordinary call a tick (about 2 µs).
    pub energy: bool,
}

impl Wanted {
    pub const ALL: Self = Self {
        max_clocks: true,
        process_samples: true,
        clocks: true,
        pcie: true,
        pcie_link: true,
        fan: true,
        codecs: true,
        health: true,
        settings: true,
        activity: true,
        activity_wait: false,
        events: true,
        energy: true,
    };
    pub const NONE: Self = Self {
        max_clocks: false,
        process_samples: false,
        clocks: false,
        pcie: false,
        pcie_link: false,
        fan: false,
        codecs: false,
        health: false,
        settings: false,
        activity: false,
        activity_wait: false,
        events: false,
        energy: false,
    };
    /// What the dashboard always shows: each GPU's activity and health,
    /// its driver events, its processes' SM use, and its energy (the
    /// detail view). Its clocks and PCIe rates it shows only where a GPU
    /// line has room for them (on a Hopper board, with its activity
    /// columns, from 110 and 138 columns, then in the split layout from
    /// 220 and 276; never at 80) or in the detail view: those it asks for
    /// while they are on screen (`sources::OnScreen`, `tui::steer`).
    /// Nothing else it keeps reads them: the history does not, it records
    /// nothing, and the health verdict reads why the clocks are held
    /// down, which `health` asks.
    pub const DASHBOARD: Self =
        Self { process_samples: true, activity: true, health: true, events: true, energy: true, ..Self::NONE };
    /// What `-1`'s table shows.
    pub const TABLE: Self = Self {
        clocks: true,
        pcie: true,
        fan: true,
        codecs: true,
        health: true,
        activity: true,
        events: true,
        ..Self::NONE
    };
    /// What `check` judges: the alerts, of which two read the activity,
    /// and the health verdict, which reads the health counters and the
    /// driver's events.
    pub const ALERTS: Self = Self { activity: true, health: true, events: true, ..Self::NONE };

    /// What either asks.
    pub const fn or(self, other: Self) -> Self {
        Self {
            max_clocks: self.max_clocks || other.max_clocks,
            process_samples: self.process_samples || other.process_samples,
            clocks: self.clocks || other.clocks,
            pcie: self.pcie || other.pcie,
            pcie_link: self.pcie_link || other.pcie_link,
            fan: self.fan || other.fan,
            codecs: self.codecs || other.codecs,
            health: self.health || other.health,
            settings: self.settings || other.settings,
            activity: self.activity || other.activity,
            activity_wait: self.activity_wait || other.activity_wait,
            events: self.events || other.events,
            energy: self.energy || other.energy,
        }
    }

    /// These, and of the readings the dashboard asks only while it shows
    /// them, those `shown` says are on screen.
    pub const fn showing(self, shown: OnScreen) -> Self {
        Self { clocks: self.clocks || shown.clocks, pcie: self.pcie || shown.pcie, ..self }
    }

    /// `gpu` as a source asking only these would have read it: every
    /// reading of a group not asked unknown. What a test compares an
    /// output with, to show that it shows nothing it does not ask.
    pub fn blank(self, gpu: &mut Gpu) {
        if !self.max_clocks {
            gpu.max_clocks = MaxClocks::default();
        }
        if !self.process_samples {
            gpu.process_utilization = None;
        }
        if !self.clocks {
            gpu.clocks = Clocks::default();
        }
        // The health verdict reads why the clocks are held down.
        if !self.clocks && !self.health {
            gpu.throttle_reasons = None;
        }
        if !self.pcie {
            gpu.pcie = Pcie::default();
        }
        if !self.pcie_link {
            gpu.pcie_link = PcieLink::default();
        }
        if !self.fan {
            gpu.fan_percent = None;
        }
        if !self.codecs {
            gpu.utilization.encoder = None;
            gpu.utilization.decoder = None;
        }
        if !self.health {
            gpu.ecc = Ecc::default();
            gpu.remapped_rows = RemappedRows::default();
            gpu.bar1_memory = Bar1Memory::default();
            gpu.recovery_action = None;
            gpu.nvlink_errors = None;
        }
        if !self.events {
            gpu.driver_events = Vec::new();
            gpu.xid_counts = Vec::new();
        }
        if !self.energy {
            gpu.energy_mj = None;
        }
        if !self.settings {
            gpu.serial = None;
            gpu.persistence_mode = None;
            gpu.compute_mode = None;
            gpu.power_management_limit_w = None;
            gpu.accounting = None;
        }
        if !self.activity {
            gpu.activity = None;
            gpu.activity_unavailable = Some(crate::model::ActivityUnavailable::NotRead);
            for m in &mut gpu.mig_devices {
                m.activity = None;
                m.activity_unavailable = Some(crate::model::ActivityUnavailable::NotRead);
            }
        }
    }
}
