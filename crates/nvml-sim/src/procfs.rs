//! Process names for PIDs the scenario does not name, read the way NVML
//! does: from the running process itself.

use std::fs;

/// `argv[0]`, or `comm` when the command line is empty (kernel threads,
/// zombies); `None` when the process does not exist.
pub(crate) fn process_name(pid: u32) -> Option<String> {
    let dir = format!("/proc/{pid}");
    if let Ok(cmdline) = fs::read(format!("{dir}/cmdline")) {
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        if !argv0.is_empty() {
            return Some(String::from_utf8_lossy(argv0).into_owned());
        }
    }
    let comm = fs::read_to_string(format!("{dir}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_process_and_not_a_missing_one() {
        let name = process_name(std::process::id()).unwrap();
        let exe = std::env::current_exe().unwrap();
        let file = exe.file_name().unwrap().to_str().unwrap();
        assert!(name.ends_with(file), "{name} vs {file}");
        assert_eq!(process_name(0), None);
    }
}
