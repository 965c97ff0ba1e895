//! Prometheus's HTTP API, the part the fleet uses: instant queries
//! (`GET /api/v1/query`) answered with a vector. Bodies come from the
//! network: anything but a well-formed vector is an error with a reason,
//! never a panic; a value that is not a finite number is no value.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One series of an instant vector: its labels (`__name__` included) and
/// its value where finite.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: Option<f64>,
}

impl Sample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }

    pub fn name(&self) -> &str {
        self.label("__name__").unwrap_or("")
    }
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Series>,
}

#[derive(Deserialize)]
struct Series {
    metric: BTreeMap<String, String>,
    /// `[unix seconds, "value"]`.
    value: (serde_json::Value, String),
}

/// The request path of an instant query for `promql`, under `prefix`
/// (a Prometheus served below a path, e.g. `/prometheus`).
pub fn query_path(prefix: &str, promql: &str) -> String {
    format!("{prefix}/api/v1/query?query={}", percent_encode(promql))
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(char::from(b)),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The samples of an instant-vector answer, or why there are none.
pub fn parse_vector(body: &[u8]) -> Result<Vec<Sample>, String> {
    let answer: Answer = serde_json::from_slice(body).map_err(|e| short(format!("not a Prometheus answer: {e}")))?;
    if answer.status != "success" {
        let kind = answer.error_type.unwrap_or_default();
        return Err(short(format!("Prometheus: {kind}: {}", answer.error.unwrap_or_default())));
    }
    let data = answer.data.ok_or("Prometheus: an answer without data")?;
    if data.result_type != "vector" {
        return Err(short(format!("Prometheus: a {} where a vector was expected", data.result_type)));
    }
    Ok(data
        .result
        .into_iter()
        .map(|s| Sample { labels: s.metric, value: s.value.1.parse::<f64>().ok().filter(|v| v.is_finite()) })
        .collect())
}

fn short(mut why: String) -> String {
    if why.len() > 200 {
        let mut end = 200;
        while !why.is_char_boundary(end) {
            end -= 1;
        }
        why.truncate(end);
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_vector_an_error_and_odd_values() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"up","instance":"a:1"},"value":[1700000000.5,"1"]},
            {"metric":{"instance":"b:1"},"value":[1700000000.5,"NaN"]}]}}"#;
        let v = parse_vector(body).unwrap();
        assert_eq!((v[0].name(), v[0].label("instance"), v[0].value), ("up", Some("a:1"), Some(1.0)));
        assert_eq!(v[1].value, None, "NaN is no value");
        let err = br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        assert_eq!(parse_vector(err).unwrap_err(), "Prometheus: bad_data: parse error at char 3");
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(parse_vector(matrix).unwrap_err().contains("a matrix where a vector"));
        assert!(parse_vector(b"<html>").unwrap_err().starts_with("not a Prometheus answer"));
    }

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(query_path("", "up{a=\"b\"}"), "/api/v1/query?query=up%7Ba%3D%22b%22%7D");
        assert_eq!(query_path("/prom", "x"), "/prom/api/v1/query?query=x");
    }

    proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_vector(&body);
        }

        #[test]
        fn arbitrary_json_never_panics(text in "[\\[\\]{}\",:0-9a-zA-Z_ .é]{0,300}") {
            let _ = parse_vector(text.as_bytes());
        }

        #[test]
        fn arbitrary_vectors_never_panic(
            name in "\\PC{0,20}", value in "\\PC{0,12}", ts in any::<f64>(), status in "(success|error|x)"
        ) {
            let body = serde_json::json!({"status": status, "error": value, "data": {"resultType": "vector",
                "result": [{"metric": {"__name__": name, "instance": value}, "value": [ts, value]}]}});
            let _ = parse_vector(body.to_string().as_bytes());
        }
    }
}
