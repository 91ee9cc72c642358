//! The simulated origin over real loopback HTTP: every fault as a client sees it, scripts,
//! the live control API, and the `understudy origin` binary's start-up contract (the first
//! stdout line carries the URL) that the Node end-to-end tests rely on.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use understudy_lab::origin::{
    Behavior, Fault, OriginConfig, OriginHandle, OriginServer, Outcome, Script, Stats,
};

// ---- A small HTTP/1.1 client: one request per connection, `Connection: close` ----

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Time from sending the request to having the whole head.
    head_at: Duration,
    /// Time from sending the request to having the whole body.
    done_at: Duration,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).expect("write");
    s
}

fn read_reply(mut s: TcpStream, started: Instant) -> std::io::Result<Reply> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head_at = started.elapsed();
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut body = buf[head_end..].to_vec();
    s.read_to_end(&mut body)?;
    let done_at = started.elapsed();
    let reply = Reply {
        status,
        headers,
        body,
        head_at,
        done_at,
    };
    if let Some(len) = reply.header("content-length") {
        assert_eq!(
            reply.body.len(),
            len.parse::<usize>().unwrap(),
            "whole body"
        );
    }
    Ok(reply)
}

fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let started = Instant::now();
    let s = send(addr, method, path, headers, body);
    read_reply(s, started)
}

fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[], "").expect("a reply")
}

fn origin() -> OriginHandle {
    OriginServer::spawn("127.0.0.1:0".parse().unwrap(), None).expect("origin starts")
}

fn origin_with(fault: Fault) -> OriginHandle {
    let o = origin();
    o.set_fault(fault).unwrap();
    o
}

/// Polls the stats until `done` holds (or 3 s pass): the origin records a disconnect as
/// soon as it notices, which is shortly after the client closes.
fn wait_for(o: &OriginHandle, done: impl Fn(&Stats) -> bool) -> Stats {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let s = o.stats();
        if done(&s) || Instant::now() > deadline {
            return s;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A file named `name` holding `text`, in a directory removed with the returned guard.
fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    (dir, p)
}

// ---- Healthy answers ----

#[test]
fn healthy_answer_has_the_model_shape_and_echoes_the_request() {
    let o = origin();
    let r = request(
        o.addr(),
        "POST",
        "/v1/recommend?limit=3",
        &[
            ("Content-Type", "application/json"),
            ("X-Correlation-ID", "corr-42"),
            ("Authorization", "Bearer super-secret-token"),
            ("Idempotency-Key", "idem-7"),
        ],
        r#"{"params":{"user":"u-1","category":"shoes"}}"#,
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert_eq!(v["model"], "sim-1");
    assert_eq!(v["request"], 1);
    assert_eq!(v["echo"]["params"]["category"], "shoes");
    assert_eq!(v["echo"]["query"], "limit=3");
    let items = v["items"].as_array().unwrap();
    assert!(items.len() >= 3);
    for item in items {
        assert!(item["sku"].is_string() && item["title"].is_string() && item["score"].is_f64());
    }

    let again = get(o.addr(), "/anything").json();
    assert_eq!(again["request"], 2);
    assert_eq!(again["items"], v["items"], "deterministic items");

    let stats = wait_for(&o, |s| s.completed == 2);
    assert_eq!(
        (stats.requests, stats.completed, stats.disconnected),
        (2, 2, 0)
    );
    assert_eq!(stats.by_fault.get("healthy"), Some(&2));
    let first = &stats.recent[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.path, "/v1/recommend");
    assert_eq!(first.correlation_id.as_deref(), Some("corr-42"));
    assert_eq!(first.idempotency_key.as_deref(), Some("idem-7"));
    assert!(first.auth);
    assert!(!stats.recent[1].auth);
    assert_eq!(first.outcome, Outcome::Completed);
    let over_http = get(o.addr(), "/__origin/stats").body;
    assert!(!String::from_utf8_lossy(&over_http).contains("super-secret-token"));
}

#[test]
fn base_latency_applies_to_every_answer() {
    let mut c = OriginConfig::new("127.0.0.1:0".parse().unwrap());
    c.base_latency = Duration::from_millis(60);
    let o = OriginServer::spawn_with(c).unwrap();
    let r = get(o.addr(), "/");
    assert_eq!(r.status, 200);
    assert!(r.head_at >= Duration::from_millis(60), "{:?}", r.head_at);
}

// ---- Faults ----

#[test]
fn latency_delays_the_headers_by_at_least_the_configured_time() {
    let o = origin_with(Fault::Latency { ms: 150 });
    let r = get(o.addr(), "/");
    assert_eq!(r.status, 200);
    assert!(r.head_at >= Duration::from_millis(150), "{:?}", r.head_at);
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 3);
    assert_eq!(o.stats().by_fault.get("latency"), Some(&1));
}

#[test]
fn hang_holds_until_the_client_leaves_and_then_counts_a_disconnect() {
    let o = origin_with(Fault::Hang);
    let mut s = send(o.addr(), "POST", "/v1/recommend", &[], r#"{"params":{}}"#);
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 64];
    let e = s.read(&mut buf).expect_err("no answer while hanging");
    assert!(
        matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{e:?}"
    );
    let stats = o.stats();
    assert_eq!(
        (stats.requests, stats.in_flight, stats.disconnected),
        (1, 1, 0)
    );
    drop(s);
    let stats = wait_for(&o, |s| s.disconnected == 1);
    assert_eq!(
        (stats.disconnected, stats.in_flight, stats.completed),
        (1, 0, 0)
    );
    assert_eq!(stats.recent[0].outcome, Outcome::Disconnected);
}

#[test]
fn status_faults_answer_with_a_json_error() {
    let o = origin();
    for code in [500u16, 502, 503, 408] {
        o.set_fault(Fault::Status { code: code.into() }).unwrap();
        let r = get(o.addr(), "/");
        assert_eq!(r.status, code);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.json()["error"]["code"], format!("SIMULATED_{code}"));
    }
    assert_eq!(o.stats().by_fault.get("status"), Some(&4));
}

#[test]
fn rate_limited_answers_429_with_retry_after() {
    let o = origin_with(Fault::RateLimited { retry_after_s: 7 });
    let r = get(o.addr(), "/");
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("7"));
    assert_eq!(r.json()["error"]["code"], "RATE_LIMITED");
}

#[test]
fn reset_is_seen_by_the_client_as_a_connection_error() {
    let o = origin_with(Fault::Reset);
    let e = request(o.addr(), "POST", "/", &[], "{}")
        .err()
        .expect("a connection error");
    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e:?}");
    let stats = wait_for(&o, |s| s.resets == 1);
    assert_eq!(
        (stats.resets, stats.disconnected, stats.completed),
        (1, 0, 0)
    );
    assert_eq!(stats.recent[0].outcome, Outcome::Reset);
}

#[test]
fn slow_body_sends_headers_at_once_and_completes_only_after_the_drip() {
    let o = origin_with(Fault::SlowBody { ms: 300, chunks: 3 });
    let r = get(o.addr(), "/");
    assert_eq!(r.status, 200);
    assert!(
        r.head_at < Duration::from_millis(150),
        "head at {:?}",
        r.head_at
    );
    assert!(
        r.done_at >= Duration::from_millis(300),
        "done at {:?}",
        r.done_at
    );
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 3);
    assert_eq!(wait_for(&o, |s| s.completed == 1).completed, 1);
}

#[test]
fn slow_body_abandoned_midway_counts_as_disconnected() {
    let o = origin_with(Fault::SlowBody {
        ms: 2000,
        chunks: 20,
    });
    let mut s = send(o.addr(), "GET", "/", &[], "");
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    drop(s);
    let stats = wait_for(&o, |s| s.disconnected == 1);
    assert_eq!((stats.disconnected, stats.completed), (1, 0));
}

#[test]
fn broken_bodies_are_broken_in_the_promised_way() {
    let o = origin_with(Fault::Malformed);
    let r = get(o.addr(), "/");
    assert_eq!(r.status, 200);
    assert!(
        serde_json::from_slice::<Value>(&r.body).is_err(),
        "malformed must not parse"
    );

    o.set_fault(Fault::Empty).unwrap();
    let r = get(o.addr(), "/");
    assert_eq!(
        (r.status, r.json()["items"].clone()),
        (200, serde_json::json!([]))
    );

    o.set_fault(Fault::WrongShape).unwrap();
    let r = get(o.addr(), "/");
    assert_eq!(r.status, 200);
    assert!(r.json().get("items").is_none());

    o.set_fault(Fault::Huge {
        bytes: 3 * 1024 * 1024,
    })
    .unwrap();
    let r = get(o.addr(), "/");
    assert_eq!(r.status, 200);
    assert!(r.body.len() >= 3 * 1024 * 1024, "{}", r.body.len());
    assert!(r.json()["items"].as_array().unwrap().len() > 1000);
}

#[test]
fn delay_applies_before_any_fault() {
    let o = origin();
    o.set_fault(Behavior {
        fault: Fault::Status { code: 503 },
        delay_ms: 100,
    })
    .unwrap();
    let r = get(o.addr(), "/");
    assert_eq!(r.status, 503);
    assert!(r.head_at >= Duration::from_millis(100), "{:?}", r.head_at);
}

// ---- Scripts ----

#[test]
fn script_ranges_select_the_fault_by_request_number() {
    let script = Script::parse(
        r#"{"rules": [
            {"requests": {"from": 2, "to": 3}, "fault": {"kind": "status", "code": 503}},
            {"requests": {"from": 5}, "fault": {"kind": "rate_limited", "retry_after_s": 2}}
        ]}"#,
        "test",
    )
    .unwrap();
    let o = OriginServer::spawn("127.0.0.1:0".parse().unwrap(), Some(script)).unwrap();
    let statuses: Vec<u16> = (0..6).map(|_| get(o.addr(), "/").status).collect();
    assert_eq!(statuses, vec![200, 503, 503, 200, 429, 429]);
    let stats = o.stats();
    assert_eq!(stats.by_fault.get("status"), Some(&2));
    assert_eq!(stats.by_fault.get("rate_limited"), Some(&2));
}

#[test]
fn script_phases_select_the_fault_by_time_since_start() {
    let script = Script::parse(
        r#"{"rules": [{"seconds": {"from": 0, "to": 0.25}, "fault": {"kind": "status", "code": 502}}]}"#,
        "test",
    )
    .unwrap();
    let o = OriginServer::spawn("127.0.0.1:0".parse().unwrap(), Some(script)).unwrap();
    assert_eq!(get(o.addr(), "/").status, 502);
    std::thread::sleep(Duration::from_millis(260));
    assert_eq!(get(o.addr(), "/").status, 200);
}

#[test]
fn bad_scripts_are_rejected_with_their_file_and_message() {
    let cases = [
        (
            "kind.json",
            r#"{"rules":[{"requests":{"from":1},"fault":{"kind":"explode"}}]}"#,
            "unknown variant `explode`",
        ),
        (
            "overlap.json",
            r#"{"rules":[{"requests":{"from":12,"to":20},"fault":{"kind":"hang"}},{"requests":{"from":15,"to":30},"fault":{"kind":"reset"}}]}"#,
            "rules[1]: requests 15-30 overlaps rules[0]",
        ),
        (
            "inverted.json",
            r#"{"rules":[{"requests":{"from":20,"to":12},"fault":{"kind":"hang"}}]}"#,
            "inverted range",
        ),
        (
            "negative.json",
            r#"{"rules":[{"requests":{"from":1},"fault":{"kind":"latency","ms":-10}}]}"#,
            "negative number -10",
        ),
        (
            "unbounded.json",
            r#"{"default":{"fault":{"kind":"latency","ms":3600000}}}"#,
            "10 minutes",
        ),
        (
            "syntax.json",
            "{\"rules\": [\n  {\"requests\": }\n]}",
            "syntax.json:2:",
        ),
    ];
    for (name, text, want) in cases {
        let (_dir, path) = temp_file(name, text);
        let e = Script::from_file(&path).unwrap_err().to_string();
        assert!(e.contains(name), "names the file: {e}");
        assert!(e.contains(want), "{name}: got {e}, want {want}");
    }
    let missing = Script::from_file(std::path::Path::new("/nonexistent/script.json")).unwrap_err();
    assert!(missing
        .to_string()
        .contains("/nonexistent/script.json: cannot read the script"));
}

// ---- Live control ----

#[test]
fn live_control_overrides_the_script_until_cleared() {
    let script = Script::parse(r#"{"default": {"fault": {"kind": "empty"}}}"#, "test").unwrap();
    let o = OriginServer::spawn("127.0.0.1:0".parse().unwrap(), Some(script)).unwrap();
    let a = o.addr();
    assert_eq!(get(a, "/").json()["items"], serde_json::json!([]));

    let set = request(
        a,
        "PUT",
        "/__origin/fault",
        &[],
        r#"{"kind":"status","code":503}"#,
    )
    .unwrap();
    assert_eq!(set.status, 200, "{}", String::from_utf8_lossy(&set.body));
    assert_eq!(get(a, "/").status, 503);
    assert_eq!(
        get(a, "/__origin/fault").json()["override"]["fault"]["kind"],
        "status"
    );

    let set = request(
        a,
        "POST",
        "/__origin/fault",
        &[],
        r#"{"fault":{"kind":"rate_limited","retry_after_s":3},"delay_ms":0}"#,
    )
    .unwrap();
    assert_eq!(set.status, 200);
    assert_eq!(get(a, "/").header("retry-after"), Some("3"));

    assert_eq!(
        request(a, "DELETE", "/__origin/fault", &[], "")
            .unwrap()
            .status,
        200
    );
    assert_eq!(get(a, "/").json()["items"], serde_json::json!([]));

    let stats: Stats = serde_json::from_slice(&get(a, "/__origin/stats").body).unwrap();
    assert_eq!(stats.requests, 4, "control requests are not model requests");
    assert_eq!(stats.by_fault.get("empty"), Some(&2));
    assert_eq!(stats.override_behavior, None);

    assert_eq!(
        request(a, "POST", "/__origin/reset", &[], "")
            .unwrap()
            .status,
        200
    );
    let stats = o.stats();
    assert_eq!((stats.requests, stats.recent.len()), (0, 0));
    assert_eq!(
        get(a, "/").json()["request"],
        1,
        "numbering restarts after a reset"
    );
}

#[test]
fn bad_control_requests_get_400_with_a_message() {
    let o = origin();
    let a = o.addr();
    let r = request(a, "PUT", "/__origin/fault", &[], "{not json").unwrap();
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().contains("not JSON"));
    let r = request(a, "PUT", "/__origin/fault", &[], r#"{"kind":"teleport"}"#).unwrap();
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]
        .as_str()
        .unwrap()
        .contains("unknown variant `teleport`"));
    let r = request(
        a,
        "PUT",
        "/__origin/fault",
        &[],
        r#"{"kind":"latency","ms":700000}"#,
    )
    .unwrap();
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().contains("10 minutes"));
    assert_eq!(
        request(a, "DELETE", "/__origin/stats", &[], "")
            .unwrap()
            .status,
        405
    );
    assert_eq!(get(a, "/__origin/nope").status, 404);
    assert_eq!(o.stats().requests, 0);
    assert!(o.set_fault(Fault::Latency { ms: 700_000 }).is_err());
}

// ---- Life cycle ----

#[test]
fn refuses_non_loopback_addresses() {
    let e = OriginServer::spawn("0.0.0.0:0".parse().unwrap(), None).unwrap_err();
    assert!(e.to_string().contains("loopback only"), "{e}");
}

#[test]
fn shutdown_closes_hanging_connections() {
    let o = origin_with(Fault::Hang);
    let a = o.addr();
    let mut s = send(a, "GET", "/", &[], "");
    let _ = wait_for(&o, |s| s.in_flight == 1);
    o.shutdown();
    let mut buf = Vec::new();
    // The connection ends (EOF or reset) instead of hanging on.
    let _ = s.read_to_end(&mut buf);
    assert!(buf.is_empty());
    assert!(TcpStream::connect(a).is_err(), "no longer listening");
}

#[test]
fn binary_prints_its_url_first_and_serves_until_killed() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["origin", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("origin listening on http://")
        .expect(&line)
        .to_string();
    let addr: SocketAddr = url.parse().unwrap();
    let r = get(addr, "/v1/x");
    assert_eq!(r.status, 200);
    assert_eq!(get(addr, "/__origin/stats").json()["requests"], 1);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn binary_rejects_a_bad_script_and_a_public_address() {
    let (_dir, bad) = temp_file(
        "bin-bad.json",
        r#"{"rules":[{"requests":{"from":3,"to":1},"fault":{"kind":"hang"}}]}"#,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["origin", "--listen", "127.0.0.1:0", "--script"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bin-bad.json") && err.contains("inverted range"),
        "{err}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args(["origin", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback only"));
}
