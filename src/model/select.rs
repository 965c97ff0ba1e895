//! `--gpus 0,2` or `--gpus GPU-5ea1,GPU-77`: which devices to watch.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSelector {
    Index(u32),
    /// Case-insensitive prefix of the UUID, with or without the "GPU-".
    UuidPrefix(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("empty GPU selector in {0:?}")]
    Empty(String),
    #[error("no GPU matches {selector:?}; these exist: {available}")]
    NoMatch { selector: String, available: String },
    #[error("GPU selector {selector:?} is ambiguous: it matches {matches}")]
    Ambiguous { selector: String, matches: String },
}

impl fmt::Display for GpuSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Index(i) => write!(f, "{i}"),
            Self::UuidPrefix(p) => f.write_str(p),
        }
    }
}

/// Parses a comma-separated list; digits are indices, anything else a UUID
/// prefix.
pub fn parse_selectors(spec: &str) -> Result<Vec<GpuSelector>, SelectError> {
    spec.split(',')
        .map(str::trim)
        .map(|part| match part {
            "" => Err(SelectError::Empty(spec.to_string())),
            p => Ok(p.parse().map_or_else(|_| GpuSelector::UuidPrefix(p.to_string()), GpuSelector::Index)),
        })
        .collect()
}

fn uuid_matches(prefix: &str, uuid: &str) -> bool {
    let norm = |s: &str| s.trim_start_matches("GPU-").trim_start_matches("gpu-").to_ascii_lowercase();
    norm(uuid).starts_with(&norm(prefix))
}

/// Positions into `devices` (index, uuid) of the selected GPUs, in device
/// order, each once. An empty selector list selects every device.
pub fn select_gpus(selectors: &[GpuSelector], devices: &[(u32, Option<&str>)]) -> Result<Vec<usize>, SelectError> {
    if selectors.is_empty() {
        return Ok((0..devices.len()).collect());
    }
    let mut chosen = vec![false; devices.len()];
    for sel in selectors {
        let hits: Vec<usize> = devices
            .iter()
            .enumerate()
            .filter(|(_, (index, uuid))| match sel {
                GpuSelector::Index(i) => i == index,
                GpuSelector::UuidPrefix(p) => uuid.is_some_and(|u| uuid_matches(p, u)),
            })
            .map(|(pos, _)| pos)
            .collect();
        match hits.as_slice() {
            [] => {
                return Err(SelectError::NoMatch { selector: sel.to_string(), available: describe(devices) });
            }
            [one] => chosen[*one] = true,
            many => {
                let matches = many.iter().map(|&p| describe(&devices[p..=p])).collect::<Vec<_>>().join(", ");
                return Err(SelectError::Ambiguous { selector: sel.to_string(), matches });
            }
        }
    }
    Ok(chosen.iter().enumerate().filter(|(_, c)| **c).map(|(p, _)| p).collect())
}

fn describe(devices: &[(u32, Option<&str>)]) -> String {
    if devices.is_empty() {
        return "none".into();
    }
    devices.iter().map(|(i, u)| format!("{i} ({})", u.unwrap_or("uuid unknown"))).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEVS: [(u32, Option<&str>); 3] =
        [(0, Some("GPU-5ea1c0de-aaaa")), (1, Some("GPU-77aa0000-bbbb")), (2, Some("GPU-77ab0000-cccc"))];

    #[test]
    fn indices_and_prefixes() {
        let sel = parse_selectors("2, gpu-5EA1").unwrap();
        assert_eq!(sel, vec![GpuSelector::Index(2), GpuSelector::UuidPrefix("gpu-5EA1".into())]);
        assert_eq!(select_gpus(&sel, &DEVS).unwrap(), vec![0, 2]);
        assert_eq!(select_gpus(&parse_selectors("77ab").unwrap(), &DEVS).unwrap(), vec![2]);
    }

    #[test]
    fn empty_selects_all_and_duplicates_collapse() {
        assert_eq!(select_gpus(&[], &DEVS).unwrap(), vec![0, 1, 2]);
        assert_eq!(select_gpus(&parse_selectors("1,1").unwrap(), &DEVS).unwrap(), vec![1]);
    }

    #[test]
    fn errors_name_the_selector() {
        assert_eq!(parse_selectors("0,,1"), Err(SelectError::Empty("0,,1".into())));
        let err = select_gpus(&parse_selectors("7").unwrap(), &DEVS).unwrap_err();
        assert!(err.to_string().contains("no GPU matches \"7\""), "{err}");
        let err = select_gpus(&parse_selectors("GPU-77").unwrap(), &DEVS).unwrap_err();
        assert!(matches!(err, SelectError::Ambiguous { .. }), "{err}");
    }
}
