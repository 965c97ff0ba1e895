//! What the fleet view shows and how keys change it (pure: no I/O). An
//! expanded host is the local dashboard's own `State` over that host's
//! snapshot, read-only: its processes live on another machine.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::fleet::model::{Fleet, HostState, HostStatus};
use crate::tui::keys::{self, InputMode};
use crate::tui::update::{self, Effect};
use crate::tui::{State, TuiOptions};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostSort {
    /// As given on the command line or in the hosts file.
    Given,
    Name,
    /// Unreachable and stale first.
    Status,
    /// Fullest memory first.
    Memory,
    /// Most alerts first.
    Alerts,
}

impl HostSort {
    fn next(self) -> Self {
        match self {
            Self::Given => Self::Name,
            Self::Name => Self::Status,
            Self::Status => Self::Memory,
            Self::Memory => Self::Alerts,
            Self::Alerts => Self::Given,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Self::Given => "as given",
            Self::Name => "name",
            Self::Status => "status",
            Self::Memory => "memory",
            Self::Alerts => "alerts",
        }
    }
}

pub enum Screen {
    Hosts,
    /// `a`: every host's alerts.
    Alerts {
        scroll: usize,
    },
    /// `J`: the jobs across hosts.
    Jobs {
        scroll: usize,
    },
    /// Enter: one host in the local dashboard's widgets.
    Host {
        host: String,
        local: Box<State>,
    },
}

pub struct ViewState {
    pub fleet: Arc<Fleet>,
    pub options: TuiOptions,
    pub selected: usize,
    pub sort: HostSort,
    pub filter: String,
    pub editing_filter: bool,
    pub screen: Screen,
    pub status: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Quit,
    Redraw,
    Same,
}

impl ViewState {
    pub fn new(fleet: Arc<Fleet>, options: TuiOptions) -> Self {
        let options = TuiOptions { read_only: true, ..options };
        Self {
            fleet,
            options,
            selected: 0,
            sort: HostSort::Given,
            filter: String::new(),
            editing_filter: false,
            screen: Screen::Hosts,
            status: None,
        }
    }

    /// New fleet data; an expanded host gets its newest snapshot.
    pub fn on_fleet(&mut self, fleet: Arc<Fleet>) {
        self.fleet = fleet;
        if let Screen::Host { host, local } = &mut self.screen
            && let Some(snap) = self.fleet.hosts.iter().find(|h| &h.host == host).and_then(|h| h.snapshot.clone())
            && !local.latest.as_ref().is_some_and(|s| Arc::ptr_eq(s, &snap))
        {
            local.on_snapshot(snap);
        }
    }

    /// The hosts shown, filtered and sorted.
    pub fn hosts(&self) -> Vec<&HostState> {
        let needle = self.filter.to_lowercase();
        let mut hosts: Vec<&HostState> =
            self.fleet.hosts.iter().filter(|h| needle.is_empty() || matches(h, &needle)).collect();
        match self.sort {
            HostSort::Given => {}
            HostSort::Name => hosts.sort_by(|a, b| a.host.cmp(&b.host)),
            HostSort::Status => hosts.sort_by_key(|h| status_rank(h.status)),
            HostSort::Memory => hosts.sort_by(|a, b| memory_ratio(b).total_cmp(&memory_ratio(a))),
            HostSort::Alerts => hosts.sort_by_key(|h| std::cmp::Reverse(h.alert_count().unwrap_or(0))),
        }
        hosts
    }

    pub fn key(&mut self, key: KeyEvent, now_ms: u64) -> Flow {
        self.status = None;
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Flow::Quit;
        }
        if self.editing_filter {
            return self.filter_key(key);
        }
        if let Screen::Host { local, .. } = &mut self.screen {
            return host_key(local, key, now_ms).unwrap_or_else(|| {
                self.screen = Screen::Hosts;
                Flow::Redraw
            });
        }
        match key.code {
            KeyCode::Char('q') => Flow::Quit,
            KeyCode::Esc | KeyCode::Backspace => self.back(),
            KeyCode::Up | KeyCode::Char('k') => self.scroll(-1),
            KeyCode::Down | KeyCode::Char('j') => self.scroll(1),
            KeyCode::PageUp => self.scroll(-10),
            KeyCode::PageDown => self.scroll(10),
            KeyCode::Enter => self.expand(),
            KeyCode::Char('a') => self.switch(Screen::Alerts { scroll: 0 }),
            KeyCode::Char('J') => self.switch(Screen::Jobs { scroll: 0 }),
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                Flow::Redraw
            }
            KeyCode::Char('/') => {
                self.editing_filter = true;
                Flow::Redraw
            }
            _ => Flow::Same,
        }
    }

    fn filter_key(&mut self, key: KeyEvent) -> Flow {
        match key.code {
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Esc => {
                self.editing_filter = false;
                self.filter.clear();
            }
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) if !c.is_control() && self.filter.len() < 64 => self.filter.push(c),
            _ => return Flow::Same,
        }
        self.selected = 0;
        Flow::Redraw
    }

    fn back(&mut self) -> Flow {
        match self.screen {
            Screen::Hosts if !self.filter.is_empty() => self.filter.clear(),
            Screen::Hosts => return Flow::Same,
            _ => self.screen = Screen::Hosts,
        }
        Flow::Redraw
    }

    fn switch(&mut self, to: Screen) -> Flow {
        let same = matches!(
            (&self.screen, &to),
            (Screen::Alerts { .. }, Screen::Alerts { .. }) | (Screen::Jobs { .. }, Screen::Jobs { .. })
        );
        self.screen = if same { Screen::Hosts } else { to };
        Flow::Redraw
    }

    fn scroll(&mut self, by: isize) -> Flow {
        let shown = self.hosts().len();
        match &mut self.screen {
            Screen::Hosts => self.selected = step(self.selected, by, shown.saturating_sub(1)),
            Screen::Alerts { scroll } | Screen::Jobs { scroll } => *scroll = step(*scroll, by, usize::MAX / 2),
            Screen::Host { .. } => return Flow::Same,
        }
        Flow::Redraw
    }

    fn expand(&mut self) -> Flow {
        let Some(host) = self.hosts().get(self.selected).map(|h| (h.host.clone(), h.snapshot.clone(), h.error.clone()))
        else {
            return Flow::Same;
        };
        let (name, snap, error) = host;
        let Some(snap) = snap else {
            let why =
                error.map_or_else(|| "it has not answered yet".to_string(), |e| format!("it has never answered: {e}"));
            self.status = Some(format!("{name}: nothing to show ({why})"));
            return Flow::Redraw;
        };
        let mut local = State::new(&self.options);
        local.on_snapshot(snap);
        self.screen = Screen::Host { host: name, local: Box::new(local) };
        Flow::Redraw
    }
}

/// A key on an expanded host: the local dashboard's own keys, minus what
/// would act on this machine (signals, the probe tools, the interval).
/// `None`: back to the fleet.
fn host_key(local: &mut State, key: KeyEvent, now_ms: u64) -> Option<Flow> {
    let at_top = local.views.is_empty() && local.filter.is_empty() && local.input_mode() == InputMode::Dashboard;
    if at_top && matches!(key.code, KeyCode::Esc | KeyCode::Backspace | KeyCode::Left) {
        return None;
    }
    let Some(action) = keys::map(key, local.input_mode()) else { return Some(Flow::Same) };
    match update::apply(local, action, now_ms) {
        Some(Effect::Quit) => Some(Flow::Quit),
        Some(Effect::SegmentsClose) | None => Some(Flow::Redraw),
        Some(_) => {
            local.views.retain(|v| {
                matches!(
                    v,
                    crate::tui::state::View::Help
                        | crate::tui::state::View::Detail(_)
                        | crate::tui::state::View::Alerts { .. }
                )
            });
            local.status = Some("not in the fleet view: that acts on the host itself (run gpuscope there)".into());
            Some(Flow::Redraw)
        }
    }
}

fn step(at: usize, by: isize, max: usize) -> usize {
    at.saturating_add_signed(by).min(max)
}

fn matches(h: &HostState, needle: &str) -> bool {
    h.host.to_lowercase().contains(needle)
        || h.snapshot.as_ref().and_then(|s| s.host.hostname.as_ref()).is_some_and(|n| n.to_lowercase().contains(needle))
}

fn status_rank(s: HostStatus) -> u8 {
    match s {
        HostStatus::Unreachable => 0,
        HostStatus::Stale => 1,
        HostStatus::Waiting => 2,
        HostStatus::Ok => 3,
    }
}

fn memory_ratio(h: &HostState) -> f64 {
    h.memory().map_or(-1.0, |(u, t)| if t > 0 { u as f64 / t as f64 } else { -1.0 })
}
