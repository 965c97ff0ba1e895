//! A pretend training process: `tests/probe/standin/run_trainer.py` with
//! the real probe over a stand-in torch, whose allocator figures come from
//! a JSON script the test can rewrite while it runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `python3 run_trainer.py ARGS`, ready for `Trainer::start`.
pub fn python_trainer(args: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(repo("tests/probe/standin/run_trainer.py")).args(args);
    cmd
}

/// Replaces the stand-in's script the way its reader expects: write
/// aside, rename.
pub fn write_script(path: &Path, script: &Value) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, script.to_string()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A pretend trainer (`cmd` runs run_trainer.py); stopped with SIGTERM on
/// drop, so its probe cleans up.
pub struct Trainer {
    pub child: Child,
    pids_file: PathBuf,
}

impl Trainer {
    pub fn start(script: &Path, probe_dir: &Path, mut cmd: Command) -> Self {
        let pids_file = script.with_extension(format!("pids-{}", rand_suffix()));
        cmd.arg("--script")
            .arg(script)
            .arg("--pids-file")
            .arg(&pids_file)
            .env("GPUSCOPE_PROBE_DIR", probe_dir)
            .env("GPUSCOPE_PROBE_INTERVAL", "0.1")
            .env("RANK", "0")
            .env("WORLD_SIZE", "2")
            .env("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512")
            .env_remove("PYTHONPATH")
            .stdin(Stdio::null());
        Self { child: cmd.spawn().unwrap(), pids_file }
    }

    /// `role` → pid, once `n` processes have said they are ready.
    pub fn pids(&self, n: usize) -> Vec<(String, u32)> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&self.pids_file).unwrap_or_default();
            let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
            if lines.len() >= n {
                return lines
                    .iter()
                    .map(|v| (v["role"].as_str().unwrap().to_string(), v["pid"].as_u64().unwrap() as u32))
                    .collect();
            }
            assert!(Instant::now() < deadline, "trainer never became ready: {text:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn pid_of(&self, role: &str, n: usize) -> u32 {
        self.pids(n).into_iter().find(|(r, _)| r == role).unwrap().1
    }
}

impl Drop for Trainer {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

pub fn wait_for_probe_file(dir: &Path, pid: u32) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{pid}-")));
        if let Some(p) = found.filter(|p| p.extension().is_some_and(|e| e == "json")) {
            return p;
        }
        assert!(Instant::now() < deadline, "no probe file for {pid} in {}", dir.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}
