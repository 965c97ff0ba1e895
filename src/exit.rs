//! Every exit status gpuscope can end with, in one place; the README's
//! "Exit codes" table documents the same numbers, and the man page's EXIT
//! STATUS is written from `MEANINGS`. Each mode's error type maps itself
//! onto these, and nothing else spells a number.

pub const OK: u8 = 0;
/// Something failed while running (an output error other than a closed pipe).
pub const FAILURE: u8 = 1;
/// Bad usage or config, or no usable NVML: nothing was collected.
pub const USAGE: u8 = 2;
/// The driver did not answer before the deadline (`--timeout`): a hung
/// NVML call. Above `check`'s 2, so `[ $? -ge 2 ]` counts it critical.
pub const DRIVER_SILENT: u8 = 3;
/// `fleet -1` / `fleet --json`: some hosts did not answer with a current
/// snapshot (down, stale, or not within --timeout); others did.
pub const FLEET_SOME_DOWN: u8 = 1;
/// `fleet -1` / `fleet --json`: no host answered with a current snapshot.
/// As a silent driver's 3: nothing current was read.
pub const FLEET_NONE_ANSWERING: u8 = 3;
/// `check`: warnings are active.
pub const CHECK_WARNING: u8 = 1;
/// `check`: critical alerts are active.
pub const CHECK_CRITICAL: u8 = 2;
/// `check --health --npd`: node-problem-detector's custom plugin statuses
/// (`pkg/custompluginmonitor/types`: OK 0, NonOK 1, Unknown 2; any other
/// status it reads as Unknown too, so a silent driver's 3 is Unknown).
pub const NPD_OK: u8 = 0;
pub const NPD_NON_OK: u8 = 1;
/// `select`: fewer devices fit than were asked for.
pub const SELECT_SHORT: u8 = 1;
/// `run`: the command exists but could not be started (the shells' 126).
pub const CANNOT_EXECUTE: u8 = 126;
/// `run`: no such command (the shells' 127). Otherwise `run` exits with
/// its command's own status, and with 128 + N where signal N killed it,
/// as the shells report it (`probe::inject::supervise::Ended`).
pub const NOT_FOUND: u8 = 127;

/// What each status says, by status, for the man page (`docs.rs`).
pub const MEANINGS: &[(u8, &str)] = &[
    (OK, "Success. check: no alert is active; check --health: every GPU is healthy (--npd: or only warnings)."),
    (
        FAILURE,
        "Something failed while running (an output error other than a closed pipe; a probe that did not \
         answer). check: warnings are active; check --health: a GPU's health is a warning (--npd: a GPU is \
         critical, node-problem-detector's NonOK). select: fewer devices fit than were asked for. fleet -1 / \
         --json: some hosts are down or stale (not every host answered with a current snapshot).",
    ),
    (
        USAGE,
        "Bad usage or config, no usable NVML (nothing was collected), or a refusal (attach, memviz). \
         check: critical alerts are active; check --health: a GPU's health is critical (--npd: Unknown, as \
         is 3).",
    ),
    (
        DRIVER_SILENT,
        "The driver did not answer within --timeout: a hung NVML call. fleet -1 / --json: no host answered \
         with a current snapshot (every one down or stale).",
    ),
    (CANNOT_EXECUTE, "run: the command exists but could not be started."),
    (
        NOT_FOUND,
        "run: no such command. Otherwise run exits with its command's own status (128 + N where signal N \
         killed it, as the shells report it).",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_meaning() {
        let said: Vec<u8> = MEANINGS.iter().map(|m| m.0).collect();
        for status in [
            OK,
            FAILURE,
            USAGE,
            DRIVER_SILENT,
            CHECK_WARNING,
            CHECK_CRITICAL,
            NPD_OK,
            NPD_NON_OK,
            SELECT_SHORT,
            FLEET_SOME_DOWN,
            FLEET_NONE_ANSWERING,
            CANNOT_EXECUTE,
            NOT_FOUND,
        ] {
            assert!(said.contains(&status), "exit status {status} is not in MEANINGS");
        }
        assert!(said.windows(2).all(|w| w[0] < w[1]), "in order, each once");
    }
}
