//! The terminal's state while the dashboard runs (raw mode, alternate
//! screen, hidden cursor) and getting it back on every way out: the guard's
//! drop on return and unwinding, and a panic hook that restores before the
//! message is printed, so the message lands on a sane screen.

use std::io::{self, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::{cursor, execute, terminal};

/// Set while the terminal is in the dashboard's state.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

pub struct TerminalGuard(());

impl TerminalGuard {
    pub fn enter() -> io::Result<Self> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        // From here on a failure still leaves through Drop.
        let guard = Self(());
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Undoes `enter`, once; errors are ignored because the terminal may be
/// gone (a dropped SSH connection) and there is nobody left to tell.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(out, cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
        let _ = out.flush();
    }
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_panic_restores_the_terminal_then_reaches_the_previous_hook() {
        let reached = Arc::new(AtomicBool::new(false));
        let seen = reached.clone();
        let original = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |_| seen.store(true, Ordering::SeqCst)));
        install_panic_hook();
        // As if `enter` had run: the hook must undo it before anything prints.
        ACTIVE.store(true, Ordering::SeqCst);
        let result = std::panic::catch_unwind(|| panic!("boom"));
        let _ours = std::panic::take_hook();
        std::panic::set_hook(original);
        assert!(result.is_err());
        assert!(!ACTIVE.load(Ordering::SeqCst), "restored");
        assert!(reached.load(Ordering::SeqCst), "the previous hook still ran");
    }
}
