//! Human units for people; JSON keeps raw bytes.

const KIB: f64 = 1024.0;

/// Binary units, one decimal from GiB up: "512 MiB", "63.2 GiB".
pub fn bytes(b: u64) -> String {
    let b = b as f64;
    let units = [("GiB", KIB.powi(3)), ("TiB", KIB.powi(4))];
    if b < KIB.powi(3) {
        return match b {
            b if b < KIB => format!("{b:.0} B"),
            b if b < KIB * KIB => format!("{:.0} KiB", b / KIB),
            b => format!("{:.0} MiB", b / (KIB * KIB)),
        };
    }
    let (name, size) = if b < units[1].1 { units[0] } else { units[1] };
    format!("{:.1} {name}", b / size)
}

/// Pairs of figures share the unit of the larger: "63.2/79.6 GiB".
pub fn bytes_pair(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b >= (1 << 30) => {
            let g = KIB.powi(3);
            format!("{:.1}/{:.1} GiB", a as f64 / g, b as f64 / g)
        }
        (a, b) => format!("{}/{}", opt(a, bytes), opt(b, bytes)),
    }
}

pub fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "n/a".to_string(), f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(2048), "2 KiB");
        assert_eq!(bytes(512 << 20), "512 MiB");
        assert_eq!(bytes(80 << 30), "80.0 GiB");
        assert_eq!(bytes(3 << 40), "3.0 TiB");
        assert_eq!(bytes_pair(Some(1 << 30), Some(80 << 30)), "1.0/80.0 GiB");
        assert_eq!(bytes_pair(None, Some(512 << 20)), "n/a/512 MiB");
    }
}
