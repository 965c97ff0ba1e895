//! `--help-query-gpu` and `--help-query-compute-apps`: the fields gpuscope
//! answers, in the layout of nvidia-smi's own lists.

use std::fmt::Write as _;

use super::{APP_FIELDS, GPU_FIELDS};

pub fn help_gpu() -> String {
    list("--query-gpu=", GPU_FIELDS.iter().map(|f| (f.names, f.help)))
}

pub fn help_compute_apps() -> String {
    list("--query-compute-apps=", APP_FIELDS.iter().map(|f| (f.names, f.help)))
}

fn list<'a>(switch: &str, fields: impl Iterator<Item = (&'a [&'a str], &'a str)>) -> String {
    let mut out = format!("List of valid properties to query for the switch \"{switch}\":\n\n");
    for (names, help) in fields {
        let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        let _ = writeln!(out, "{}\n{help}\n", quoted.join(" or "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_name_and_alias() {
        let text = help_gpu();
        assert!(text.starts_with("List of valid properties to query for the switch \"--query-gpu=\":\n\n"));
        assert!(text.contains("\"name\" or \"gpu_name\"\n"), "{text}");
        for f in GPU_FIELDS {
            assert!(f.names.iter().all(|n| text.contains(&format!("\"{n}\""))));
        }
        assert!(help_compute_apps().contains("\"used_gpu_memory\" or \"used_memory\"\n"));
    }
}
