//! `e`: the variables of the selected process that decide how it uses its
//! GPUs, read from `/proc/PID/environ` (as the process started; the kernel
//! lets only its owner or root read it). Read on the blocking pool, never
//! on the UI task.

use std::path::Path;

/// What ML engineers look for first: device visibility, allocator
/// settings, the distributed job, threads, and the scheduler's job.
const PREFIXES: &[&str] = &[
    "CUDA_",
    "NVIDIA_VISIBLE_DEVICES",
    "PYTORCH_",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_",
    "NCCL_",
    "OMP_NUM_THREADS",
    "XLA_",
    "JAX_",
    "TF_GPU_",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_PROCID",
    "GPUSCOPE_",
];
/// More than this is not a real environment worth reading.
const MAX_BYTES: u64 = 4 << 20;

/// The interesting variables, sorted, or why they cannot be read.
pub fn read(pid: u32) -> Result<Vec<(String, String)>, String> {
    read_in(Path::new("/proc"), pid)
}

fn read_in(proc_root: &Path, pid: u32) -> Result<Vec<(String, String)>, String> {
    use std::io::Read;
    let path = proc_root.join(pid.to_string()).join("environ");
    let mut raw = Vec::new();
    let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            format!("PID {pid}'s environment is readable only by its owner or root")
        }
        std::io::ErrorKind::NotFound => format!("PID {pid} is not visible from here (exited, or another namespace)"),
        _ => format!("{}: {e}", path.display()),
    })?;
    file.take(MAX_BYTES).read_to_end(&mut raw).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut vars: Vec<(String, String)> = raw
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let text = String::from_utf8_lossy(entry);
            let (k, v) = text.split_once('=')?;
            PREFIXES.iter().any(|p| k.starts_with(p)).then(|| (k.to_string(), v.to_string()))
        })
        .collect();
    vars.sort();
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_decides_gpu_use_and_says_why_not() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("42");
        std::fs::create_dir(&dir).unwrap();
        let env = b"HOME=/root\0CUDA_VISIBLE_DEVICES=2,3\0RANK=1\0PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\0PATH=/bin\0";
        std::fs::write(dir.join("environ"), env).unwrap();
        let vars = read_in(root.path(), 42).unwrap();
        let keys: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF", "RANK"]);
        assert_eq!(vars[0].1, "2,3");
        assert!(read_in(root.path(), 43).unwrap_err().contains("not visible"));
    }

    #[test]
    fn our_own_environment_reads() {
        let vars = read(std::process::id()).unwrap();
        assert!(vars.iter().all(|(k, _)| PREFIXES.iter().any(|p| k.starts_with(p))));
    }
}
