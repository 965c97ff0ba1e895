//! Command lines with invisible formatting characters (a bidirectional
//! override, zero-width spaces) and wide characters (CJK, emoji), through
//! `-1` and `--json`: the table shows a mark for each invisible character
//! and stays within 80 columns by display width; the JSON keeps the text
//! faithful but writes those characters as `\uXXXX` escapes.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Sim, assert_success};
use unicode_width::UnicodeWidthStr;

const INVISIBLE: [char; 6] = ['\u{202E}', '\u{2066}', '\u{200B}', '\u{200F}', '\u{FEFF}', '\u{2060}'];

/// A real process whose command line is `ARG 60` (`sleep` under another
/// name), killed on drop.
struct Process(std::process::Child);

impl Process {
    fn spawn(arg: &str) -> Self {
        let child =
            std::process::Command::new("bash").args(["-c", "exec -a \"$1\" sleep 60", "bash", arg]).spawn().unwrap();
        Self(child)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The simulated GPU lists each process.
fn scenario(procs: &[Process]) -> String {
    let mut s = String::from("[[gpu]]\nname = \"H100\"\n");
    for p in procs {
        s.push_str(&format!("[[gpu.process]]\npid = {}\nused_mib = 1000\n", p.0.id()));
    }
    s
}

#[test]
fn invisible_characters_are_marked_in_the_table_and_escaped_in_json() {
    let spoof = "ev\u{202E}yp.t\u{2066}x\u{200B}y\u{200F}\u{FEFF}\u{2060}";
    let procs = [Process::spawn(spoof)];
    let sim = Sim::new(&scenario(&procs));
    let out = sim.gpuscope().arg("-1").output().unwrap();
    assert_success(&out);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(!table.chars().any(|c| INVISIBLE.contains(&c)), "{table:?}");
    assert!(table.contains("ev\u{FFFD}yp.t\u{FFFD}x\u{FFFD}y\u{FFFD}\u{FFFD}\u{FFFD} 60"), "{table}");

    for args in [&["--json"][..], &["--json", "--watch", "--count", "1"]] {
        let out = sim.gpuscope().args(args).output().unwrap();
        assert_success(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.chars().any(|c| INVISIBLE.contains(&c)), "{args:?}: raw invisible characters");
        assert!(text.contains("ev\\u202eyp.t\\u2066x\\u200by"), "{args:?}");
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        let command = v["processes"][0]["command"].as_str().unwrap();
        assert_eq!(command, format!("{spoof} 60"), "{args:?}: the JSON is faithful");
    }
}

#[test]
fn wide_characters_keep_the_table_within_80_columns() {
    let cjk = format!("python3 训练脚本_{}.py --数据集 {}", "模型".repeat(20), "图像".repeat(10));
    let emoji = format!("python3 🚀train.py --tag {}", "🔥😀".repeat(30));
    let mixed = format!("ｆｕｌｌｗｉｄｔｈ {} é\u{0301} {}", "한국어".repeat(8), "ab数".repeat(15));
    let procs = [Process::spawn(&cjk), Process::spawn(&emoji), Process::spawn(&mixed)];
    let sim = Sim::new(&scenario(&procs));
    let out = sim.gpuscope().arg("-1").output().unwrap();
    assert_success(&out);
    let table = String::from_utf8(out.stdout).unwrap();
    for line in table.lines() {
        assert!(line.width() <= 80, "{} columns: {line}", line.width());
    }
    for start in ["python3 训练脚本_", "python3 🚀train.py", "ｆｕｌｌ"] {
        let line = table.lines().find(|l| l.contains(start)).unwrap_or_else(|| panic!("{start}:\n{table}"));
        assert!(line.ends_with("..."), "cut with a mark: {line}");
        assert!(line.width() >= 77, "cut by width, not by characters: {} columns: {line}", line.width());
    }
}
