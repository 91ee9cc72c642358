//! The edge's log lines as users can export them, each file's format detected from its
//! first record, gzip accepted:
//! - **plain NDJSON** of the edge's lines (workerd's stdout, `understudy drill --logs`,
//!   a Workers Logs query exported line by line);
//! - **`wrangler tail --format json`**: one event per invocation, pretty-printed over
//!   several lines (or compacted one per line), the edge's line a string in `logs[].message`;
//! - **Workers Trace Events** (Logpush, one event per line): the line in `Logs[].Message`;
//!   and Workers Logs events, whose JSON message Workers Logs parsed into `source`.
//!
//! Nothing is dropped silently and nothing panics: a truncated or foreign record is a
//! counted skip naming its file and line; a file with no line of the edge's, an empty one,
//! or one that cannot be read is an error naming it.

use std::io::{BufRead, BufReader, Read as _};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::line::{kind, Kind, Line};

/// How a file's records are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// One edge line per line.
    Ndjson,
    /// `wrangler tail --format json`.
    WranglerTail,
    /// Workers Trace Events (Logpush) or Workers Logs events.
    TraceEvents,
}

impl Format {
    pub fn describe(self) -> &'static str {
        match self {
            Format::Ndjson => "plain NDJSON",
            Format::WranglerTail => "wrangler tail --format json",
            Format::TraceEvents => "Workers Trace Events / Workers Logs",
        }
    }
}

/// A record left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skip {
    pub file: PathBuf,
    pub line: u64,
    pub why: String,
}

/// A request line and where it came from.
#[derive(Debug, Clone)]
pub struct Sourced {
    pub file: usize,
    pub line: u64,
    pub entry: Line,
}

/// What one file held.
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    pub path: PathBuf,
    pub format: Format,
    pub gzip: bool,
    /// Records read (lines, or events).
    pub records: u64,
    /// Request lines of the edge found in them.
    pub request_lines: u64,
    /// The edge's other lines (`{"event": …}`), which hold no request.
    pub edge_events: u64,
}

#[derive(Debug, Default)]
pub struct Read {
    pub files: Vec<FileSummary>,
    pub lines: Vec<Sourced>,
    pub skips: Vec<Skip>,
}

/// Reads every file; an error names the file (and line) that could not be read.
pub fn read(paths: &[PathBuf]) -> Result<Read, String> {
    let mut out = Read::default();
    for (n, p) in paths.iter().enumerate() {
        read_file(p, n, &mut out)?;
    }
    Ok(out)
}

/// Longest record taken (a Logpush event holds at most 256 KB of logs).
const MAX_RECORD: usize = 1 << 20;

fn read_file(path: &Path, index: usize, out: &mut Read) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    let mut file = std::fs::File::open(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let mut magic = [0u8; 2];
    let got = file
        .read(&mut magic)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let gzip = got == 2 && magic == [0x1f, 0x8b];
    let reader: Box<dyn BufRead> = if gzip {
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    };
    let mut summary = FileSummary {
        path: path.to_path_buf(),
        format: Format::Ndjson,
        gzip,
        records: 0,
        request_lines: 0,
        edge_events: 0,
    };
    let mut detected: Option<Format> = None;
    // A pretty-printed event being gathered: its first line and its text so far.
    let mut pending: Option<(u64, String)> = None;
    let skip = |line: u64, why: String, skips: &mut Vec<Skip>| {
        skips.push(Skip {
            file: path.to_path_buf(),
            line,
            why,
        });
    };
    for (n, raw) in reader.split(b'\n').enumerate() {
        let lineno = n as u64 + 1;
        let raw = raw.map_err(|e| {
            let what = if gzip {
                "not a whole gzip stream"
            } else {
                "cannot read"
            };
            format!("{shown}:{lineno}: {what}: {e}")
        })?;
        let Ok(text) = String::from_utf8(raw) else {
            if detected.is_none() {
                return Err(format!(
                    "{shown}:{lineno}: not text (not UTF-8): not a log the replay reads"
                ));
            }
            skip(lineno, "not UTF-8".into(), &mut out.skips);
            continue;
        };
        let text = text.trim_end_matches('\r');
        // wrangler tail's pretty-printed events: from a `{` line to a `}` line.
        if let Some((from, buf)) = pending.as_mut() {
            if text == "{" {
                skip(
                    *from,
                    "an event cut off before its closing `}` (truncated)".into(),
                    &mut out.skips,
                );
                *from = lineno;
                buf.clear();
                buf.push_str(text);
                continue;
            }
            if buf.len() + text.len() > MAX_RECORD {
                skip(
                    *from,
                    format!("an event longer than {MAX_RECORD} bytes"),
                    &mut out.skips,
                );
                pending = None;
                continue;
            }
            buf.push('\n');
            buf.push_str(text);
            if text == "}" {
                let (from, buf) = pending.take().unwrap_or_default();
                summary.records += 1;
                match serde_json::from_str::<Value>(&buf) {
                    Ok(v) => take(
                        &v,
                        Format::WranglerTail,
                        path,
                        index,
                        from,
                        &mut summary,
                        out,
                    ),
                    Err(e) => skip(from, format!("not JSON: {e}"), &mut out.skips),
                }
            }
            continue;
        }
        if text.trim().is_empty() {
            continue;
        }
        if text == "{" && matches!(detected, None | Some(Format::WranglerTail)) {
            detected = Some(Format::WranglerTail);
            pending = Some((lineno, text.to_string()));
            continue;
        }
        summary.records += 1;
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                if detected.is_none() {
                    return Err(format!(
                        "{shown}:{lineno}: not JSON ({e}): not a log the replay reads; it reads the edge's JSON log lines (plain NDJSON), `wrangler tail --format json` output, and Workers Trace Events (Logpush) or Workers Logs exports"
                    ));
                }
                let why = if e.is_eof() {
                    "a line cut off (truncated JSON)".to_string()
                } else {
                    format!("not JSON: {e}")
                };
                skip(lineno, why, &mut out.skips);
                continue;
            }
        };
        let format = detected.unwrap_or_else(|| detect(&v));
        detected.get_or_insert(format);
        take(&v, format, path, index, lineno, &mut summary, out);
    }
    if let Some((from, _)) = pending {
        skip(
            from,
            "an event cut off before its closing `}` (truncated)".into(),
            &mut out.skips,
        );
    }
    summary.format = detected.unwrap_or(Format::Ndjson);
    if summary.records == 0 {
        return Err(format!("{shown}: empty: no log records"));
    }
    if summary.request_lines == 0 {
        let first = out
            .skips
            .iter()
            .find(|s| s.file == path)
            .map(|s| format!(" (line {}: {})", s.line, s.why))
            .unwrap_or_default();
        return Err(format!(
            "{shown}: none of its {} records holds a request line of the edge{first}; the replay reads the edge's JSON log lines (plain NDJSON), `wrangler tail --format json` output, and Workers Trace Events (Logpush) or Workers Logs exports",
            summary.records
        ));
    }
    out.files.push(summary);
    Ok(())
}

/// The format a first record shows.
fn detect(v: &Value) -> Format {
    let has = |k: &str| v.get(k).is_some();
    if has("logs") && (has("eventTimestamp") || has("scriptName") || has("event")) {
        Format::WranglerTail
    } else if (has("Logs") && (has("EventTimestampMs") || has("ScriptName")))
        || has("$workers")
        || has("$metadata")
        || v.get("source").is_some_and(Value::is_object)
    {
        Format::TraceEvents
    } else {
        Format::Ndjson
    }
}

/// Takes the edge's lines out of record `v` (read as `format`), counting or skipping.
fn take(
    v: &Value,
    format: Format,
    path: &Path,
    file: usize,
    line: u64,
    summary: &mut FileSummary,
    out: &mut Read,
) {
    let candidates: Vec<Value> = match format {
        Format::Ndjson => vec![v.clone()],
        Format::WranglerTail | Format::TraceEvents => messages(v),
    };
    let mut ours = 0;
    let mut why_not = None;
    for c in candidates {
        match kind(&c) {
            Kind::Request(entry) => {
                ours += 1;
                summary.request_lines += 1;
                out.lines.push(Sourced {
                    file,
                    line,
                    entry: *entry,
                });
            }
            Kind::EdgeEvent(_) => {
                ours += 1;
                summary.edge_events += 1;
            }
            Kind::Unreadable(why) => why_not = Some(why),
            Kind::Foreign => {}
        }
    }
    if ours == 0 {
        let why = why_not.unwrap_or_else(|| match format {
            Format::Ndjson if detect(v) != Format::Ndjson => {
                format!(
                    "a {} record in a file of plain NDJSON",
                    detect(v).describe()
                )
            }
            Format::Ndjson => "not a line of the edge's (a foreign line)".into(),
            _ => "an event without a line of the edge's".into(),
        });
        out.skips.push(Skip {
            file: path.to_path_buf(),
            line,
            why,
        });
    }
}

/// The logged messages of an event, each parsed when it is JSON text: `logs[].message[]`
/// (wrangler tail), `Logs[].Message[]` (Logpush), `source` / `message` (Workers Logs).
fn messages(v: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut push = |m: &Value| match m {
        Value::String(s) if s.trim_start().starts_with('{') => {
            if let Ok(parsed) = serde_json::from_str::<Value>(s) {
                out.push(parsed);
            }
        }
        Value::Object(_) => out.push(m.clone()),
        _ => {}
    };
    for (logs, message) in [("logs", "message"), ("Logs", "Message")] {
        for entry in v.get(logs).and_then(Value::as_array).into_iter().flatten() {
            match entry.get(message) {
                Some(Value::Array(parts)) => parts.iter().for_each(&mut push),
                Some(m) => push(m),
                None => {}
            }
        }
    }
    // Workers Logs parses a JSON message into `source`; the text stays in `message`.
    match v.get("source").filter(|s| s.is_object()) {
        Some(s) => push(s),
        None => {
            if let Some(m) = v.get("message") {
                push(m);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
