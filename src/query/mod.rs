//! nvidia-smi's query mode: `--query-gpu=FIELDS` and
//! `--query-compute-apps=FIELDS` with `--format=csv[,noheader][,nounits]`,
//! written byte for byte as nvidia-smi writes them, from the same
//! snapshot every other mode reads.

mod app_fields;
mod cell;
mod gpu_fields;
mod help;

use std::fmt::Write as _;

use crate::collect::Reads;
use crate::model::{ProcessType, Snapshot};
use crate::sources::nvml::Wanted;
pub use app_fields::APP_FIELDS;
use app_fields::{AppField, AppRow};
pub use cell::Cell;
pub use gpu_fields::GPU_FIELDS;
use gpu_fields::{GpuField, Row};
pub use help::{help_compute_apps, help_gpu};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Gpu,
    ComputeApps,
}

/// `--format=csv[,noheader][,nounits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    pub header: bool,
    pub units: bool,
}

#[derive(Clone)]
enum Column {
    Gpu(&'static GpuField, String),
    App(&'static AppField, String),
}

impl Column {
    fn header(&self) -> (&str, Option<&'static str>) {
        match self {
            Self::Gpu(f, h) => (h, f.unit),
            Self::App(f, h) => (h, f.unit),
        }
    }
}

/// A parsed query: what to print and how.
#[derive(Clone)]
pub struct Query {
    pub target: Target,
    pub format: Format,
    columns: Vec<Column>,
}

impl std::fmt::Debug for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.columns.iter().map(|c| c.header().0).collect();
        f.debug_struct("Query")
            .field("target", &self.target)
            .field("format", &self.format)
            .field("fields", &names)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// nvidia-smi's own words (on stdout, then an empty line; exit 2),
    /// which scripts may look for.
    #[error("Field \"{0}\" is not a valid field to query.")]
    UnknownField(String),
    #[error("--format: {0:?} is not one of csv, noheader, nounits")]
    FormatOption(String),
    #[error("--format must include csv (the only format nvidia-smi's query mode has): --format=csv")]
    FormatNotCsv,
}

pub fn parse_format(spec: &str) -> Result<Format, QueryError> {
    let mut format = Format { header: true, units: true };
    let mut csv = false;
    for opt in spec.split(',').map(str::trim) {
        match opt {
            "csv" => csv = true,
            "noheader" => format.header = false,
            "nounits" => format.units = false,
            other => return Err(QueryError::FormatOption(other.to_string())),
        }
    }
    if !csv {
        return Err(QueryError::FormatNotCsv);
    }
    Ok(format)
}

impl Query {
    pub fn parse(target: Target, fields: &str, format: Format) -> Result<Self, QueryError> {
        let columns = fields
            .split(',')
            .map(str::trim)
            .map(|name| {
                let found = match target {
                    Target::Gpu => gpu_fields::find(name).map(|(f, h)| Column::Gpu(f, h)),
                    Target::ComputeApps => app_fields::find(name).map(|(f, h)| Column::App(f, h)),
                };
                found.ok_or_else(|| QueryError::UnknownField(name.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { target, format, columns })
    }

    /// What the driver must be asked for the columns' values, beyond what
    /// every output reads: no query field is a process's SM use, and the
    /// compute apps' fields are the process lists' and names.
    pub fn wanted(&self) -> Wanted {
        self.columns.iter().fold(Wanted::NONE, |w, c| match c {
            Column::Gpu(f, _) => w.or(gpu_fields::wants(f)),
            Column::App(..) => w,
        })
    }

    /// What the rows show besides the GPUs: a compute app's name comes
    /// from the host (its command line) or the driver; no column is a
    /// probe's.
    pub fn reads(&self) -> Reads {
        match self.target {
            Target::Gpu => Reads::NONE,
            Target::ComputeApps => Reads::PROCESSES,
        }
    }

    /// The header line, with each unit in brackets (kept under `nounits`,
    /// as nvidia-smi does).
    pub fn header(&self) -> String {
        let mut line = String::new();
        for (i, col) in self.columns.iter().enumerate() {
            if i > 0 {
                line.push_str(", ");
            }
            let (name, unit) = col.header();
            line.push_str(name);
            if let Some(u) = unit {
                let _ = write!(line, " [{u}]");
            }
        }
        line.push('\n');
        line
    }

    /// The rows of one snapshot: one per GPU, or one per compute process
    /// per GPU it runs on.
    pub fn rows(&self, snap: &Snapshot) -> String {
        let timestamp = timestamp(snap.time.time_unix_ms);
        let mut out = String::new();
        match self.target {
            Target::Gpu => {
                for gpu in &snap.gpus {
                    let row = Row { snap, gpu, timestamp: &timestamp };
                    self.line(&mut out, |c| match c {
                        Column::Gpu(f, _) => f.cell(&row),
                        Column::App(..) => Cell::NotAvailable,
                    });
                }
            }
            Target::ComputeApps => {
                for gpu in &snap.gpus {
                    for process in &snap.processes {
                        let Some(on) = process.gpus.iter().find(|g| g.index == gpu.index) else { continue };
                        if on.kind == ProcessType::Graphics {
                            continue;
                        }
                        let row = AppRow { gpu, process, on, timestamp: &timestamp };
                        self.line(&mut out, |c| match c {
                            Column::App(f, _) => (f.read)(&row),
                            Column::Gpu(..) => Cell::NotAvailable,
                        });
                    }
                }
            }
        }
        out
    }

    fn line(&self, out: &mut String, cell: impl Fn(&Column) -> Cell) {
        for (i, col) in self.columns.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            cell(col).write(col.header().1, self.format.units, out);
        }
        out.push('\n');
    }
}

/// nvidia-smi's timestamp: local time, `YYYY/MM/DD HH:MM:SS.mmm`.
pub fn timestamp(unix_ms: u64) -> String {
    let Ok(t) = libc::time_t::try_from(unix_ms / 1000) else { return "[N/A]".into() };
    // SAFETY: `tm` is plain old data that localtime_r fills in; both
    // pointers are valid for the call, and localtime_r is thread-safe.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return "[N/A]".into();
        }
        tm
    };
    format!(
        "{:04}/{:02}/{:02} {:02}:{:02}:{:02}.{:03}",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        unix_ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_options() {
        assert_eq!(parse_format("csv").unwrap(), Format { header: true, units: true });
        assert_eq!(parse_format("csv,noheader,nounits").unwrap(), Format { header: false, units: false });
        assert_eq!(parse_format("noheader"), Err(QueryError::FormatNotCsv));
        assert_eq!(parse_format("csv,xml"), Err(QueryError::FormatOption("xml".into())));
    }

    #[test]
    fn headers_carry_units_even_without_them_in_values() {
        let f = parse_format("csv,nounits").unwrap();
        let q = Query::parse(Target::Gpu, "index,gpu_name,memory.used,utilization.gpu,temperature.gpu,power.draw", f);
        assert_eq!(
            q.unwrap().header(),
            "index, name, memory.used [MiB], utilization.gpu [%], temperature.gpu, power.draw [W]\n"
        );
        let q = Query::parse(Target::ComputeApps, "pid,name,used_memory", f).unwrap();
        assert_eq!(q.header(), "pid, process_name, used_gpu_memory [MiB]\n");
    }

    #[test]
    fn an_unknown_field_is_named_as_nvidia_smi_names_it() {
        let f = parse_format("csv").unwrap();
        let err = Query::parse(Target::Gpu, "index,cuda_version", f).unwrap_err();
        assert_eq!(err.to_string(), "Field \"cuda_version\" is not a valid field to query.");
        assert!(Query::parse(Target::ComputeApps, "memory.used", f).is_err(), "a GPU field is not an app field");
    }

    #[test]
    fn timestamp_form() {
        let t = timestamp(1_700_000_000_123);
        let b = t.as_bytes();
        assert_eq!(t.len(), 23, "{t}");
        assert_eq!((b[4], b[7], b[10], b[13], b[16], b[19]), (b'/', b'/', b' ', b':', b':', b'.'));
        assert!(t.ends_with(".123"), "{t}");
    }
}
