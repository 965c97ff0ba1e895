//! Short human forms for cells that have only a few columns.

/// "40.1G", "512M", "3K", "0": binary units in at most six columns.
pub fn bytes_short(b: u64) -> String {
    let (scaled, unit) = crate::util::units::binary(b);
    scaled.with(["", "K", "M", "G", "T"][unit])
}

/// "0.4s", "12s", "3m12s", "10m", "2h03m", "5d02h".
/// An interval as people say it, to the millisecond and never rounded:
/// "250ms", "2s", "1.875s" (not humantime's "1s 875ms").
pub fn interval(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => {
            let text = format!("{}.{:03}", ms / 1000, ms % 1000);
            format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
        }
        _ => duration_short(u64::try_from(ms).unwrap_or(u64::MAX)),
    }
}

pub fn duration_short(ms: u64) -> String {
    let mut out = String::with_capacity(8);
    push_duration_short(&mut out, ms);
    out
}

/// `duration_short` onto the end of `out`, from integers (a process
/// table's TIME column writes one a row): "4.2s", "42s", "5m", "5m07s",
/// "3h", "3h05m", "2d", "2d07h".
pub fn push_duration_short(out: &mut String, ms: u64) {
    let s = ms / 1000;
    // The larger unit's size in seconds, and the smaller's.
    let (unit, big_unit, part, small_unit) = match s {
        0..10 => {
            crate::util::units::push_fixed(out, ms as f64 / 1000.0, true);
            return out.push('s');
        }
        10..60 => (1, 's', 1, 's'),
        60..3600 => (60, 'm', 1, 's'),
        3600..86_400 => (3600, 'h', 60, 'm'),
        _ => (86_400, 'd', 3600, 'h'),
    };
    let mut digits = itoa::Buffer::new();
    out.push_str(digits.format(s / unit));
    out.push(big_unit);
    // The smaller unit, in two digits, unless the larger is exact.
    if !s.is_multiple_of(unit) {
        let small = s % unit / part;
        if small < 10 {
            out.push('0');
        }
        out.push_str(digits.format(small));
        out.push(small_unit);
    }
}

pub fn percent(v: Option<u32>) -> String {
    let Some(v) = v else { return NA.into() };
    let mut out = String::with_capacity(4);
    out.push_str(itoa::Buffer::new().format(v));
    out.push('%');
    out
}

/// An activity counter's share of the time, whole: "6%", "n/a".
pub fn activity(v: Option<f64>) -> String {
    let Some(v) = v else { return NA.into() };
    let mut out = String::with_capacity(4);
    crate::util::units::push_fixed(&mut out, v, false);
    out.push('%');
    out
}

/// What a cell says for a figure that is unavailable.
pub const NA: &str = "n/a";

pub fn or_na<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| NA.into(), f)
}

/// `or_na` onto the end of `out`.
pub fn or_na_into<T>(out: &mut String, v: Option<T>, f: impl FnOnce(&mut String, T)) {
    match v {
        Some(v) => f(out, v),
        None => out.push_str(NA),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms() {
        assert_eq!(bytes_short(0), "0");
        assert_eq!(bytes_short(512 << 20), "512M");
        assert_eq!(bytes_short(80 << 30), "80.0G");
        assert_eq!(duration_short(400), "0.4s");
        assert_eq!(duration_short(12_000), "12s");
        assert_eq!(duration_short(192_000), "3m12s");
        assert_eq!(duration_short(7_380_000), "2h03m");
        assert_eq!(duration_short(9 * 86_400_000), "9d");
        assert_eq!(duration_short(600_000), "10m");
        assert_eq!(duration_short(90_000_000), "1d01h");
        assert_eq!(percent(None), "n/a");
        assert_eq!(activity(Some(6.4)), "6%");
        assert_eq!(activity(Some(99.6)), "100%");
        assert_eq!(activity(None), "n/a", "unavailable, never 0%");
    }

    /// What `duration_short` wrote when it went through `format!`.
    fn duration_by_format(ms: u64) -> String {
        let s = ms / 1000;
        match s {
            0..10 => format!("{:.1}s", ms as f64 / 1000.0),
            10..60 => format!("{s}s"),
            60..3600 if s.is_multiple_of(60) => format!("{}m", s / 60),
            60..3600 => format!("{}m{:02}s", s / 60, s % 60),
            3600..86_400 if s.is_multiple_of(3600) => format!("{}h", s / 3600),
            3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
            _ if s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
            _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
        }
    }

    #[test]
    fn durations_are_what_format_wrote_at_every_edge() {
        let edges = [0, 1, 49, 50, 51, 949, 950, 951, 9_949, 9_950, 9_999, 10_000, 59_999, 60_000, 61_000, 3_599_999];
        let more = [3_600_000, 3_601_000, 3_660_000, 86_399_999, 86_400_000, 86_401_000, 90_000_000, u64::MAX];
        for ms in edges.into_iter().chain(more).chain((0..20_000).step_by(7)) {
            assert_eq!(duration_short(ms), duration_by_format(ms), "{ms} ms");
        }
    }

    proptest::proptest! {
        #[test]
        fn durations_are_what_format_wrote(ms in proptest::prelude::any::<u64>(), short in 0u64..200_000_000) {
            proptest::prop_assert_eq!(duration_short(ms), duration_by_format(ms));
            proptest::prop_assert_eq!(duration_short(short), duration_by_format(short));
        }
    }

    /// What `bytes_short` wrote when it formatted floats.
    fn by_float(b: u64) -> String {
        let (f, k) = (b as f64, 1024.0_f64);
        match f {
            f if f >= k.powi(4) => format!("{:.1}T", f / k.powi(4)),
            f if f >= k.powi(3) => format!("{:.1}G", f / k.powi(3)),
            f if f >= k.powi(2) => format!("{:.0}M", f / k.powi(2)),
            f if f >= k => format!("{:.0}K", f / k),
            _ => format!("{b}"),
        }
    }

    proptest::proptest! {
        #[test]
        fn short_bytes_are_what_float_formatting_wrote(b in proptest::prelude::any::<u64>(), k in 0u64..4096, shift in 0u32..44) {
            // Random sizes, and halves of a digit at every scale (ties).
            for b in [b, b >> 24, (k << shift) / 20, (k << shift) / 2, u64::MAX - k] {
                proptest::prop_assert_eq!(bytes_short(b), by_float(b));
            }
        }
    }
}
