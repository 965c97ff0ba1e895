//! A process is identified by PID *and* start time, so a recycled PID never
//! inherits another process's figures.

use std::path::Path;

/// Field 22 of `/proc/PID/stat`: the start time in clock ticks since boot.
/// `None` when there is no such process.
pub fn start_ticks(proc_root: &Path, pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    parse_start_ticks(&stat)
}

fn parse_start_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may itself contain
    // spaces and parentheses: count fields from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts at field 3 (state); starttime is field 22.
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_start_time_past_a_hostile_name() {
        let stat = "4242 (evil) 1 2 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 200";
        assert_eq!(parse_start_ticks(stat), Some(987654));
        assert_eq!(parse_start_ticks("garbage"), None);
    }

    #[test]
    fn this_process_has_a_start_time() {
        let me = start_ticks(Path::new("/proc"), std::process::id());
        assert!(me.is_some_and(|t| t > 0));
        assert_eq!(start_ticks(Path::new("/proc"), u32::MAX - 3), None);
    }
}
