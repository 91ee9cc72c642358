//! The breaker's own log, read from the admin status endpoint during a drill: every
//! transition with its time, half-open trials included (the `X-Breaker-Mode` header shows
//! only the mode each request saw).

use std::time::Duration;

use serde_json::Value;

use super::observe::{self, SeenTransition};

/// A mode as the status endpoint writes it — its name (`OPEN`) or the core's `Mode`
/// (`Open`) — in the seed's vocabulary for this breaker (`rate`: seed 000's names).
pub fn status_mode(m: Option<&str>, rate: bool) -> &'static str {
    match (m.map(str::trim), rate) {
        (Some("Healthy"), false) => "CLOSED",
        (Some("Open"), false) => "OPEN",
        (Some("Probing"), false) => "HALF_OPEN",
        (Some("Healthy"), true) => "PRIMARY_HEALTHY",
        (Some("Open"), true) => "DEGRADED_FALLBACK",
        (Some("Probing"), true) => "RECOVERING_PROBE",
        _ => observe::mode_name(m),
    }
}

/// Reads breaker transitions from an admin status document, wherever it keeps them: an
/// array `transitions` of `{at_ms|at, from, to}` with epoch-ms times. Also the current mode.
pub fn parse_status(
    doc: &Value,
    start_epoch_ms: u64,
    rate: bool,
) -> (Option<&'static str>, Vec<SeenTransition>) {
    fn find<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
        match v {
            Value::Object(m) => m.get(key).or_else(|| m.values().find_map(|x| find(x, key))),
            _ => None,
        }
    }
    let mode = Some(status_mode(find(doc, "mode").and_then(Value::as_str), rate))
        .filter(|m| *m != "UNKNOWN");
    let mut out = Vec::new();
    if let Some(Value::Array(ts)) = find(doc, "transitions") {
        for t in ts {
            let at = t
                .get("at_ms")
                .or_else(|| t.get("at"))
                .and_then(Value::as_f64);
            let from = status_mode(t.get("from").and_then(Value::as_str), rate);
            let to = status_mode(t.get("to").and_then(Value::as_str), rate);
            if let (Some(at), false) = (at, from == "UNKNOWN" || to == "UNKNOWN") {
                out.push(SeenTransition {
                    at_ms: at - start_epoch_ms as f64,
                    from,
                    to,
                    evidence: t.get("evidence").cloned(),
                });
            }
        }
    }
    (mode, out)
}

/// Merges transitions from successive status reads (each holds the last few), in time order.
pub fn merge(into: &mut Vec<SeenTransition>, more: Vec<SeenTransition>) {
    for t in more {
        if !into
            .iter()
            .any(|x| (x.at_ms - t.at_ms).abs() < 0.5 && x.from == t.from && x.to == t.to)
        {
            into.push(t);
        }
    }
    into.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
}

pub async fn status_once(addr: std::net::SocketAddr, path: &str, token: &str) -> Option<Value> {
    use http_body_util::BodyExt;
    let r = tokio::time::timeout(Duration::from_secs(2), async {
        let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let (mut send, c) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .ok()?;
        tokio::spawn(async move {
            let _ = c.await;
        });
        let req = hyper::Request::builder()
            .uri(path)
            .header("host", addr.to_string())
            .header("authorization", format!("Bearer {token}"))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .ok()?;
        let res = send.send_request(req).await.ok()?;
        if !res.status().is_success() {
            return None;
        }
        let b = res.into_body().collect().await.ok()?.to_bytes();
        serde_json::from_slice::<Value>(&b).ok()
    })
    .await;
    r.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_documents_give_transitions_relative_to_the_start() {
        let doc = json!({"breaker": {"mode": "OPEN", "transitions": [
            {"at": 1_000_500, "from": "CLOSED", "to": "OPEN",
             "evidence": {"calls": 3, "failures": 3, "timeouts": 0, "p95_ms": null}},
            {"at_ms": 1_004_500, "from": "OPEN", "to": "HALF_OPEN"},
            {"at": 1_004_600, "from": "??", "to": "OPEN"},
            {"at_ms": 1_005_000, "from": "Probing", "to": "Healthy"}
        ]}});
        let (mode, t) = parse_status(&doc, 1_000_000, false);
        assert_eq!(mode, Some("OPEN"));
        assert_eq!(t.len(), 3);
        assert_eq!((t[0].at_ms, t[0].from, t[0].to), (500.0, "CLOSED", "OPEN"));
        assert_eq!(
            t[0].evidence,
            Some(json!({"calls": 3, "failures": 3, "timeouts": 0, "p95_ms": null})),
            "the evidence is kept"
        );
        assert_eq!(t[1].evidence, None);
        assert_eq!(
            (t[2].from, t[2].to),
            ("HALF_OPEN", "CLOSED"),
            "the core's Debug names"
        );
        let (_, r) = parse_status(&doc, 1_000_000, true);
        assert_eq!(
            (r[2].from, r[2].to),
            ("RECOVERING_PROBE", "PRIMARY_HEALTHY")
        );
        let mut all = t.clone();
        merge(&mut all, t);
        assert_eq!(all.len(), 3, "re-reads do not duplicate");
    }
}
