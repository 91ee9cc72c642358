use std::io::Write as _;

use super::*;
use serde_json::json;

/// An edge request line arriving at `at`.
fn ours(at: u64) -> Value {
    json!({"correlation_id":"c","correlation":"minted","trace_id":"t","at_ms":at,
        "outcome":"live","status":200,"tier":null,"reason":null,"class":null,
        "notes":[],"notes_dropped":0,"tiers":[],"attempts":1,
        "calls":[{"start_ms":0,"end_ms":25,"end":"ok","status":null,"retry_after_s":null,"probe":false,"hedge":false}],
        "latency_ms":25,"origin_override":false,"policy_version":"r-1","breaker_mode":"CLOSED",
        "service":"s","isolate":"i"})
}

fn file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).expect("written");
    p
}

fn tail_event(line: &Value) -> Value {
    json!({"outcome":"ok","scriptName":"understudy","diagnosticsChannelEvents":[],"exceptions":[],
        "logs":[{"message":[line.to_string()],"level":"log","timestamp":1}],
        "eventTimestamp":1,"event":{"request":{"url":"https://x/","method":"GET"},"response":{"status":200}}})
}

#[test]
fn each_export_format_is_detected_and_its_lines_found() {
    let dir = tempfile::tempdir().expect("dir");
    let plain = format!("{}\n{}\n", ours(1), ours(2));
    let pretty = format!(
        "{}\n{}\n",
        serde_json::to_string_pretty(&tail_event(&ours(3))).unwrap(),
        serde_json::to_string_pretty(&tail_event(&ours(4))).unwrap()
    );
    let compact = format!("{}\n", tail_event(&ours(5)));
    let logpush = format!(
        "{}\n",
        json!({"EventTimestampMs":1,"EventType":"fetch","Outcome":"ok","ScriptName":"understudy",
            "Logs":[{"Level":"log","Message":[ours(6).to_string()],"TimestampMs":1}],"Exceptions":[]})
    );
    let workers_logs = format!(
        "{}\n",
        json!({"$metadata":{"id":"x","message":ours(7).to_string()},"$workers":{"scriptName":"understudy"},
            "source":ours(7),"dataset":"cloudflare-workers","timestamp":1})
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(plain.as_bytes()).unwrap();
    let gzipped = gz.finish().unwrap();
    let paths = vec![
        file(&dir, "plain.ndjson", plain.as_bytes()),
        file(&dir, "tail.json", pretty.as_bytes()),
        file(&dir, "tail-compact.json", compact.as_bytes()),
        file(&dir, "logpush.ndjson", logpush.as_bytes()),
        file(&dir, "workers-logs.json", workers_logs.as_bytes()),
        file(&dir, "plain.ndjson.gz", &gzipped),
    ];
    let r = read(&paths).expect("read");
    let formats: Vec<(Format, bool, u64)> = r
        .files
        .iter()
        .map(|f| (f.format, f.gzip, f.request_lines))
        .collect();
    assert_eq!(
        formats,
        [
            (Format::Ndjson, false, 2),
            (Format::WranglerTail, false, 2),
            (Format::WranglerTail, false, 1),
            (Format::TraceEvents, false, 1),
            (Format::TraceEvents, false, 1),
            (Format::Ndjson, true, 2),
        ]
    );
    let at: Vec<u64> = r.lines.iter().map(|l| l.entry.at_ms).collect();
    assert_eq!(at, [1, 2, 3, 4, 5, 6, 7, 1, 2]);
    assert!(r.skips.is_empty(), "{:?}", r.skips);
    // The pretty-printed events are found at their first line.
    let starts: Vec<u64> = pretty
        .lines()
        .enumerate()
        .filter(|(_, l)| *l == "{")
        .map(|(n, _)| n as u64 + 1)
        .collect();
    assert_eq!((r.lines[2].line, r.lines[3].line), (starts[0], starts[1]));
}

#[test]
fn truncated_and_foreign_records_are_counted_skips_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("dir");
    let full = ours(1).to_string();
    let text = format!(
        "{full}\nnot json at all\n{{\"hello\":1}}\n{}\n{}\n{}\n{}",
        json!({"event":"write_through_failed","correlation_id":"c","binding":"B","error":"e"}),
        tail_event(&ours(2)),
        ours(3),
        &full[..full.len() / 2]
    );
    let p = file(&dir, "mixed.ndjson", text.as_bytes());
    let r = read(std::slice::from_ref(&p)).expect("read");
    assert_eq!(r.files[0].request_lines, 2);
    assert_eq!(r.files[0].edge_events, 1);
    let skipped: Vec<(u64, &str)> = r.skips.iter().map(|s| (s.line, s.why.as_str())).collect();
    assert_eq!(skipped.len(), 4, "{skipped:?}");
    assert_eq!(skipped[0].0, 2);
    assert!(skipped[0].1.starts_with("not JSON"), "{}", skipped[0].1);
    assert_eq!(skipped[1], (3, "not a line of the edge's (a foreign line)"));
    assert_eq!(skipped[2].0, 5);
    assert!(skipped[2].1.contains("wrangler tail"), "{}", skipped[2].1);
    assert_eq!(skipped[3], (7, "a line cut off (truncated JSON)"));
    assert!(r.skips.iter().all(|s| s.file == p));

    // A pretty-printed event cut off at the end.
    let pretty = serde_json::to_string_pretty(&tail_event(&ours(4))).unwrap();
    let cut = format!("{pretty}\n{}", &pretty[..pretty.len() / 2]);
    let r = read(&[file(&dir, "cut.json", cut.as_bytes())]).expect("read");
    assert_eq!(r.files[0].request_lines, 1);
    assert_eq!(r.skips.len(), 1);
    assert!(r.skips[0].why.contains("truncated"), "{:?}", r.skips);
}

#[test]
fn a_file_that_holds_no_line_of_the_edge_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("dir");
    let empty = file(&dir, "empty.ndjson", b"");
    let e = read(std::slice::from_ref(&empty)).unwrap_err();
    assert!(e.contains("empty.ndjson") && e.contains("empty"), "{e}");
    let csv = file(&dir, "logs.csv", b"at,outcome\n1,live\n");
    let e = read(&[csv]).unwrap_err();
    assert!(e.contains("logs.csv:1") && e.contains("not JSON"), "{e}");
    let foreign = file(
        &dir,
        "other.ndjson",
        b"{\"level\":\"info\",\"msg\":\"hi\"}\n",
    );
    let e = read(&[foreign]).unwrap_err();
    assert!(
        e.contains("other.ndjson") && e.contains("none of its 1 records"),
        "{e}"
    );
    let e = read(&[dir.path().join("missing.ndjson")]).unwrap_err();
    assert!(
        e.contains("missing.ndjson") && e.contains("cannot read"),
        "{e}"
    );
    let binary = file(&dir, "bin", &[0xff, 0xfe, 0x00, 0x81]);
    let e = read(&[binary]).unwrap_err();
    assert!(e.contains("bin:1") && e.contains("UTF-8"), "{e}");
}
