//! The two text exposition formats: Prometheus 0.0.4 and OpenMetrics 1.0.
//! They differ in little, but each difference breaks a scraper: how a
//! counter's or info's family is named in `# TYPE`, `# UNIT` lines, which
//! characters `# HELP` escapes, and the closing `# EOF`.

use std::fmt::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`, what Prometheus has always read.
    Text,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Text => "text/plain; version=0.0.4; charset=utf-8",
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// What closes a complete exposition.
    pub fn trailer(self) -> &'static str {
        match self {
            Self::Text => "",
            Self::OpenMetrics => "# EOF\n",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// Sampled as `<name>_total`.
    Counter,
    /// Constant 1 carrying labels, sampled as `<name>_info`.
    Info,
}

impl Kind {
    /// What each sample's name adds to the family's.
    fn suffix(self) -> &'static str {
        match self {
            Self::Gauge => "",
            Self::Counter => "_total",
            Self::Info => "_info",
        }
    }
}

/// A metric family. `name` is the family's name in OpenMetrics terms:
/// without the `_total` or `_info` its samples carry.
#[derive(Debug)]
pub struct Def {
    pub name: &'static str,
    pub kind: Kind,
    /// The unit the name ends with, for OpenMetrics' `# UNIT`.
    pub unit: Option<&'static str>,
    pub help: &'static str,
}

impl Def {
    /// The name every sample of this family has.
    pub fn sample_name(&self) -> String {
        format!("{}{}", self.name, self.kind.suffix())
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Self::Int(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Self::Int(v.into())
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Self::Float(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Self::Int(v.into())
    }
}

pub struct Encoder {
    format: Format,
    out: String,
}

impl Encoder {
    pub fn new(format: Format) -> Self {
        Self { format, out: String::with_capacity(16 * 1024) }
    }

    /// Starts a family; its header is written with its first sample, so a
    /// family with no known value leaves no trace.
    pub fn family<'a>(&'a mut self, def: &'static Def) -> Family<'a> {
        Family { enc: self, def, started: false }
    }

    /// The body so far, without the trailer: more families may follow.
    pub fn finish(self) -> String {
        self.out
    }
}

pub struct Family<'a> {
    enc: &'a mut Encoder,
    def: &'static Def,
    started: bool,
}

impl Family<'_> {
    /// One sample; `None` (an unknown reading) writes nothing. Labels with
    /// an empty value are left out: Prometheus treats them as absent anyway.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: Option<impl Into<Value>>) {
        let Some(value) = value else { return };
        if !self.started {
            self.header();
            self.started = true;
        }
        let out = &mut self.enc.out;
        out.push_str(self.def.name);
        out.push_str(self.def.kind.suffix());
        let mut sep = '{';
        for (name, value) in labels.iter().filter(|(_, v)| !v.is_empty()) {
            out.push(sep);
            sep = ',';
            out.push_str(name);
            out.push_str("=\"");
            escape_into(out, value, true);
            out.push('"');
        }
        if sep == ',' {
            out.push('}');
        }
        out.push(' ');
        write_value(out, value.into());
        out.push('\n');
    }

    fn header(&mut self) {
        let def = self.def;
        let (format, out) = (self.enc.format, &mut self.enc.out);
        let (type_name, kind) = match (format, def.kind) {
            (Format::Text, Kind::Info) => (def.sample_name(), "gauge"),
            (Format::Text, Kind::Counter) => (def.sample_name(), "counter"),
            (_, Kind::Gauge) => (def.name.to_string(), "gauge"),
            (Format::OpenMetrics, Kind::Counter) => (def.name.to_string(), "counter"),
            (Format::OpenMetrics, Kind::Info) => (def.name.to_string(), "info"),
        };
        out.push_str("# HELP ");
        out.push_str(&type_name);
        out.push(' ');
        // 0.0.4 leaves quotes in HELP as they are; OpenMetrics escapes them.
        escape_into(out, def.help, format == Format::OpenMetrics);
        let _ = writeln!(out, "\n# TYPE {type_name} {kind}");
        if let (Format::OpenMetrics, Some(unit)) = (format, def.unit) {
            let _ = writeln!(out, "# UNIT {type_name} {unit}");
        }
    }
}

fn escape_into(out: &mut String, s: &str, quotes: bool) {
    // Nearly every value needs no escaping: copy it whole.
    if !s.contains(['\\', '\n', '"']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quotes => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

fn write_value(out: &mut String, value: Value) {
    let _ = match value {
        Value::Int(v) => write!(out, "{v}"),
        Value::Float(v) if v.is_nan() => write!(out, "NaN"),
        Value::Float(v) if v.is_infinite() => write!(out, "{}", if v > 0.0 { "+Inf" } else { "-Inf" }),
        // Display never uses an exponent and round-trips exactly.
        Value::Float(v) => write!(out, "{v}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    static BYTES: Def = Def {
        name: "t_memory_bytes",
        kind: Kind::Gauge,
        unit: Some("bytes"),
        help: "Memory \"used\", in bytes\\ok\nsecond line.",
    };
    static ERRORS: Def = Def { name: "t_errors", kind: Kind::Counter, unit: None, help: "Errors." };
    static BUILD: Def = Def { name: "t_build", kind: Kind::Info, unit: None, help: "Build." };

    fn encode(format: Format) -> String {
        let mut enc = Encoder::new(format);
        let mut f = enc.family(&BYTES);
        f.sample(&[("gpu", "0"), ("command", "a\"b\\c\nd")], Some(5u64));
        f.sample(&[("gpu", "1"), ("user", "")], None::<u64>);
        f.sample(&[("gpu", "2"), ("user", "")], Some(0.25));
        enc.family(&ERRORS).sample(&[], Some(3u64));
        enc.family(&BUILD).sample(&[("version", "1.0")], Some(1u64));
        let mut absent = enc.family(&ERRORS);
        absent.sample(&[], None::<f64>);
        let mut out = enc.finish();
        out.push_str(format.trailer());
        out
    }

    #[test]
    fn text_format_names_counters_by_their_samples_and_has_no_eof() {
        assert_eq!(
            encode(Format::Text),
            "# HELP t_memory_bytes Memory \"used\", in bytes\\\\ok\\nsecond line.\n\
             # TYPE t_memory_bytes gauge\n\
             t_memory_bytes{gpu=\"0\",command=\"a\\\"b\\\\c\\nd\"} 5\n\
             t_memory_bytes{gpu=\"2\"} 0.25\n\
             # HELP t_errors_total Errors.\n\
             # TYPE t_errors_total counter\n\
             t_errors_total 3\n\
             # HELP t_build_info Build.\n\
             # TYPE t_build_info gauge\n\
             t_build_info{version=\"1.0\"} 1\n"
        );
    }

    #[test]
    fn openmetrics_names_families_without_suffix_and_ends_with_eof() {
        assert_eq!(
            encode(Format::OpenMetrics),
            "# HELP t_memory_bytes Memory \\\"used\\\", in bytes\\\\ok\\nsecond line.\n\
             # TYPE t_memory_bytes gauge\n\
             # UNIT t_memory_bytes bytes\n\
             t_memory_bytes{gpu=\"0\",command=\"a\\\"b\\\\c\\nd\"} 5\n\
             t_memory_bytes{gpu=\"2\"} 0.25\n\
             # HELP t_errors Errors.\n\
             # TYPE t_errors counter\n\
             t_errors_total 3\n\
             # HELP t_build Build.\n\
             # TYPE t_build info\n\
             t_build_info{version=\"1.0\"} 1\n\
             # EOF\n"
        );
    }

    #[test]
    fn special_floats_use_the_formats_spelling() {
        let mut out = String::new();
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e21, 0.1 + 0.2, 1.0] {
            write_value(&mut out, Value::Float(v));
            out.push(' ');
        }
        assert_eq!(out, "NaN +Inf -Inf 1000000000000000000000 0.30000000000000004 1 ");
    }
}
