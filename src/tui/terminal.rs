//! The terminal's state while the dashboard runs (raw mode, alternate
//! screen, hidden cursor, mouse capture unless `--no-mouse`) and getting it back on every way out: the guard's
//! drop on return and unwinding, and a panic hook that restores before the
//! message is printed, so the message lands on a sane screen.

use std::io::{self, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::{cursor, execute, terminal};

/// Set while the terminal is in the dashboard's state.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether the dashboard takes the mouse: capture is turned on again after
/// a stop and off on every way out, as raw mode is.
static MOUSE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

pub struct TerminalGuard(());

impl TerminalGuard {
    pub fn enter(mouse: bool) -> io::Result<Self> {
        install_panic_hook();
        MOUSE.store(mouse, Ordering::SeqCst);
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        // From here on a failure still leaves through Drop.
        let guard = Self(());
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        capture_mouse()?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Ctrl-Z or SIGTSTP: hands the terminal back as it was (cooked mode,
/// the normal screen, a cursor), stops this process the way SIGTSTP would
/// have, and on `fg` (SIGCONT) takes the terminal again. The caller redraws
/// everything: the screen is whatever the shell left.
pub fn suspend() -> io::Result<bool> {
    if !job_control() {
        return Ok(false);
    }
    restore();
    // SAFETY: raise(2) only sends a signal to this process; SIGSTOP cannot
    // be caught, so it returns once something sends SIGCONT.
    unsafe { libc::raise(libc::SIGSTOP) };
    reenter().map(|()| true)
}

/// Whether a shell will resume us: the parent (the shell) is in this
/// session but another process group, as with an interactive shell's
/// jobs. Stopped without one (started by ssh directly, a script without
/// job control), nothing would ever send SIGCONT.
fn job_control() -> bool {
    // SAFETY: these calls only read process ids.
    unsafe {
        let parent = libc::getppid();
        let (group, parent_group) = (libc::getpgrp(), libc::getpgid(parent));
        parent_group >= 0 && parent_group != group && libc::getsid(parent) == libc::getsid(0)
    }
}

/// Raw mode, the alternate screen and a hidden cursor again, after a stop
/// (ours, or a SIGSTOP from outside that gave no chance to clean up).
pub fn reenter() -> io::Result<()> {
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
    capture_mouse()
}

fn capture_mouse() -> io::Result<()> {
    if MOUSE.load(Ordering::SeqCst) { execute!(io::stdout(), EnableMouseCapture) } else { Ok(()) }
}

/// Undoes `enter`, once; errors are ignored because the terminal may be
/// gone (a dropped SSH connection) and there is nobody left to tell.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        // Off whether or not it was asked for: harmless, and a shell left
        // with mouse reporting on prints escape codes at every click.
        let _ = execute!(out, DisableMouseCapture, cursor::Show, terminal::LeaveAlternateScreen);
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
