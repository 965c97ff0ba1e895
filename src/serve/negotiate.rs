//! Which exposition format a scraper asked for in its `Accept` header.
//! Prometheus asks for OpenMetrics 1.0.0 first, then 0.0.1, then the
//! 0.0.4 text; curl and old scrapers send nothing or `*/*` and get text.

use super::encode::Format;

/// OpenMetrics when the client names it (version 1.0.0 or none) at least
/// as highly as the 0.0.4 text; wildcards alone get the text.
pub fn format_for(accept: &str) -> Format {
    let (mut text_q, mut om_q) = (0.0f32, 0.0f32);
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let (mut q, mut version) = (1.0f32, None);
        for param in parts {
            let (key, value) = param.split_once('=').unwrap_or((param, ""));
            match key.trim().to_ascii_lowercase().as_str() {
                "q" => q = value.trim().parse().unwrap_or(0.0),
                "version" => version = Some(value.trim().trim_matches('"').to_string()),
                _ => {}
            }
        }
        match (media.as_str(), version.as_deref()) {
            ("application/openmetrics-text", None | Some("1.0.0")) => om_q = om_q.max(q),
            ("text/plain", None | Some("0.0.4")) => text_q = text_q.max(q),
            _ => {}
        }
    }
    if om_q > 0.0 && om_q >= text_q { Format::OpenMetrics } else { Format::Text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_gets_openmetrics_others_get_text() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(format_for(prometheus), Format::OpenMetrics);
        assert_eq!(format_for("application/openmetrics-text"), Format::OpenMetrics);
        assert_eq!(format_for("Application/OpenMetrics-Text; Version=\"1.0.0\""), Format::OpenMetrics);
        assert_eq!(format_for(""), Format::Text);
        assert_eq!(format_for("*/*"), Format::Text);
        assert_eq!(format_for("text/plain;version=0.0.4"), Format::Text);
    }

    #[test]
    fn quality_and_version_are_respected() {
        let prefers_text = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5";
        assert_eq!(format_for(prefers_text), Format::Text);
        assert_eq!(format_for("application/openmetrics-text;q=0"), Format::Text);
        // A version we do not write is not what the client asked for.
        assert_eq!(format_for("application/openmetrics-text;version=0.0.1"), Format::Text);
        assert_eq!(format_for("application/openmetrics-text, */*;q=1"), Format::OpenMetrics);
        assert_eq!(format_for("text/plain, application/openmetrics-text"), Format::OpenMetrics);
    }
}
