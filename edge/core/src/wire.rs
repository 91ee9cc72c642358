//! The engine's outputs and the Worker driver's reports as they cross between Rust and
//! JavaScript: one string out, a few plain values in, per step (docs/adr/010, issue 23
//! point 5). The format is documented next to its reader, `edge/worker/src/io.js`
//! (`Reader`): a number ends in `;`, a string is its length in UTF-16 units, `;`, then its
//! text. Plain Rust, so its tests run natively.

use crate::breaker::member::FleetReport;
use crate::classify::Observed;
use crate::engine::{Command, Done, FleetHeard, Input, IoId, KvRead, Op, Output, Reply};
use crate::events::flow::Io as EventIo;
use crate::metrics::DataPoint;

/// What a report is about (`kind` & 0xff).
pub const FETCHED: u32 = 1;
pub const KV: u32 = 2;
pub const LIMITED: u32 = 3;
pub const TIMER: u32 = 4;
pub const HEARD: u32 = 5;
pub const ASKED: u32 = 6;
/// Set in `kind` while the request still waits for its response.
pub const LIVE: u32 = 256;

/// What a command is: the first number of each in the engine's output.
pub const START_FETCH: u32 = 1;
pub const START_KV: u32 = 2;
pub const START_LIMIT: u32 = 3;
pub const ABORT: u32 = 5;
pub const HEAR: u32 = 6;
pub const EVENTS: u32 = 7;
pub const RESPOND: u32 = 8;
pub const ASK: u32 = 9;

/// How a fetch the driver performed ended when no status came back: the first number of its
/// result in place of the status.
pub const FETCH_FAILED: i32 = -1;
pub const FETCH_TOO_LARGE: i32 = -2;

pub use crate::breaker::member::{REPORT_PATH, WATCH_PATH};

/// The driver's constants, as the JavaScript module `edge/worker/src/wire.js` declares them:
/// that file is this text (a test holds them equal; `UNDERSTUDY_BLESS=1 cargo test -p
/// understudy-core wire` writes it).
pub fn js() -> String {
    let consts: &[(&str, String)] = &[
        ("FETCHED", FETCHED.to_string()),
        ("KV", KV.to_string()),
        ("LIMITED", LIMITED.to_string()),
        ("TIMER", TIMER.to_string()),
        ("HEARD", HEARD.to_string()),
        ("ASKED", ASKED.to_string()),
        ("LIVE", LIVE.to_string()),
        ("START_FETCH", START_FETCH.to_string()),
        ("START_KV", START_KV.to_string()),
        ("START_LIMIT", START_LIMIT.to_string()),
        ("ABORT", ABORT.to_string()),
        ("HEAR", HEAR.to_string()),
        ("EVENTS", EVENTS.to_string()),
        ("RESPOND", RESPOND.to_string()),
        ("ASK", ASK.to_string()),
        ("FETCH_FAILED", FETCH_FAILED.to_string()),
        ("FETCH_TOO_LARGE", FETCH_TOO_LARGE.to_string()),
        ("REPORT_PATH", format!("{REPORT_PATH:?}")),
        ("WATCH_PATH", format!("{WATCH_PATH:?}")),
        ("PROBE_EVERY_MS", crate::engine::PROBE_EVERY_MS.to_string()),
    ];
    let mut out = String::from(
        "// The wire between the engine and its JavaScript driver (src/io.js), generated from\n\
         // edge/core/src/wire.rs: do not edit. `UNDERSTUDY_BLESS=1 cargo test -p understudy-core\n\
         // wire` writes it; a test fails when the two differ.\n",
    );
    for (name, value) in consts {
        out += &format!("export const {name} = {value};\n");
    }
    out += "// Called once by the Worker (so that the bundle carries this module).\n";
    out += "export function us_wire() { return RESPOND; }\n";
    out
}

struct Writer(String);

impl Writer {
    fn num(&mut self, n: impl std::fmt::Display) {
        use std::fmt::Write;
        let _ = write!(self.0, "{n};");
    }

    fn str(&mut self, s: &str) {
        let units = if s.is_ascii() {
            s.len()
        } else {
            s.encode_utf16().count()
        };
        self.num(units);
        self.0.push_str(s);
    }

    fn none(&mut self) {
        self.0.push_str("-1;");
    }

    fn flat<'a>(&mut self, headers: impl Iterator<Item = (&'a str, &'a str)>) {
        self.str(&flat(headers));
    }
}

/// A list of headers as the drivers take it: `name\nvalue\n…` (no trailing newline) — the
/// engine's fetches and responses here, the outbox's fetches in the Worker.
pub fn flat<'a>(headers: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::with_capacity(256);
    for (i, (k, v)) in headers.enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(k);
        out.push('\n');
        out.push_str(v);
    }
    out
}

/// `out` for `us_run`. Event operations (`Command::Events`) are performed in Rust: the
/// driver calls back `perform` for them.
pub fn encode(out: &Output<'_>) -> String {
    let mut w = Writer(String::with_capacity(1024));
    match out.wake_at {
        Some(t) => w.num(t.0),
        None => w.none(),
    }
    for c in &out.commands {
        match c {
            Command::Start { io, op } => match op {
                Op::Fetch(o) => {
                    w.num(START_FETCH);
                    w.num(io.0);
                    w.str(&o.url);
                    w.str(o.method.as_str());
                    w.flat(o.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                    match &o.body {
                        Some(b) => w.str(b),
                        None => w.none(),
                    }
                    w.num(o.max_body_bytes);
                }
                Op::ReadKv { binding, key } => {
                    w.num(START_KV);
                    w.num(io.0);
                    w.str(binding);
                    w.str(key);
                }
                Op::Limit { binding, key } => {
                    w.num(START_LIMIT);
                    w.num(io.0);
                    w.str(binding);
                    w.str(key);
                }
            },
            Command::Abort { io } => {
                w.num(ABORT);
                w.num(io.0);
            }
            Command::Hear { io, until } => {
                w.num(HEAR);
                w.num(io.0);
                w.num(until.0);
            }
            Command::Events { io, .. } => {
                w.num(EVENTS);
                w.num(io.0);
            }
            Command::Ask(call) => {
                w.num(ASK);
                calls(&mut w, std::slice::from_ref(call));
            }
            Command::Respond(r) => respond(&mut w, r),
        }
    }
    w.0
}

fn respond(w: &mut Writer, r: &Reply) {
    w.num(RESPOND);
    w.num(r.status);
    w.flat(r.headers.iter().map(|(k, v)| (*k, v.as_str())));
    w.str(&r.body);
    w.str(&r.log);
    w.str(&r.correlation_id);
    point(w, r.point.as_ref());
    w.num(r.writes.len());
    for wr in &r.writes {
        w.str(&wr.binding);
        w.str(&wr.key);
        w.str(&wr.value);
        if wr.metadata.is_null() {
            w.str("");
        } else {
            w.str(&wr.metadata.to_string());
        }
    }
    calls(w, &r.fleet);
    match r.fleet_wake {
        Some(t) => w.num(t.0),
        None => w.none(),
    }
}

/// An Analytics Engine point: `1` and its index, blobs and doubles, or `0`.
fn point(w: &mut Writer, p: Option<&DataPoint>) {
    match p {
        Some(p) => {
            w.num(1);
            w.str(&p.index);
            for b in &p.blobs {
                w.str(b);
            }
            for d in p.doubles {
                w.num(if d.is_finite() { d } else { 0.0 });
            }
        }
        None => w.num(0),
    }
}

/// What the driver does once the coordinator answered a call or it failed
/// (`Engine::fleet_heard`, `Engine::fleet_watched`), for `fleetHeard`: the log line (or
/// none), the point, then the call to send again at once (the calls' format). Empty when
/// there is nothing to do.
pub fn encode_heard(h: &FleetHeard) -> String {
    if h.log.is_none() && h.point.is_none() && h.again.is_none() {
        return String::new();
    }
    let mut w = Writer(String::new());
    match &h.log {
        Some(l) => w.str(l),
        None => w.none(),
    }
    point(&mut w, h.point.as_ref());
    calls(&mut w, h.again.as_slice());
    w.0
}

/// The coordinator's calls: their count, then each one's fields.
fn calls(w: &mut Writer, calls: &[FleetReport]) {
    w.num(calls.len());
    for f in calls {
        w.str(f.path);
        w.str(&f.binding);
        w.str(&f.object);
        w.str(f.hint);
        w.str(&f.body);
        w.num(f.timeout_ms);
        w.num(f.begin_ms());
    }
}

/// The calls [`crate::engine::Engine::fleet_wake`] returned, for the driver's `fleetWake`
/// (read as a reply's calls are).
pub fn encode_calls(c: &[FleetReport]) -> String {
    let mut w = Writer(String::new());
    calls(&mut w, c);
    w.0
}

/// The event operation a command of `out` asks for, by its handle.
pub fn events_op(out: &Output<'_>) -> Option<(IoId, EventIo)> {
    out.commands.iter().find_map(|c| match c {
        Command::Events { io, op } => Some((*io, op.clone())),
        _ => None,
    })
}

/// A fetch's result as the driver gives it — `[status, retry-after, body]`,
/// `[FETCH_TOO_LARGE]` past `max_body` bytes, or `[FETCH_FAILED, message]` — read once for the
/// engine's reports and the outbox's deliveries alike.
pub fn fetched(num: f64, a: Option<String>, body: Option<Vec<u8>>, max_body: u64) -> Observed {
    if num == f64::from(FETCH_TOO_LARGE) {
        Observed::TooLarge { limit: max_body }
    } else if num < 0.0 {
        Observed::Connect(a.unwrap_or_default())
    } else {
        Observed::Response {
            status: num as u16,
            retry_after: a,
            body: body.unwrap_or_default(),
        }
    }
}

/// A report of `src/io.js` as the engine's input. `None` for a kind it does not send.
pub fn input(
    kind: u32,
    io: u32,
    num: f64,
    a: Option<String>,
    b: Option<String>,
    bytes: Option<Vec<u8>>,
    max_body: u64,
) -> Option<Input> {
    let io = IoId(io);
    let done = match kind & 0xff {
        TIMER => return Some(Input::Timer),
        ASKED => return Some(Input::Asked),
        FETCHED => Done::Fetched(fetched(num, a, bytes, max_body)),
        KV => Done::Kv(match num as u8 {
            0 => KvRead::Value {
                value: None,
                metadata: None,
            },
            1 => KvRead::Value {
                value: a,
                metadata: b.and_then(|m| serde_json::from_str(&m).ok()),
            },
            _ => KvRead::Error(a.unwrap_or_default()),
        }),
        LIMITED => Done::Limited(match num as u8 {
            1 => Ok(true),
            0 => Ok(false),
            _ => Err(a
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "the rate limiter failed".into())),
        }),
        _ => return None,
    };
    Some(Input::Done(io, done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{Method, Outbound};
    use crate::Millis;

    /// `edge/worker/src/io.js` reads every code, path and timeout of the wire from
    /// `wire.js`, which is this declaration's text.
    #[test]
    fn the_drivers_wire_module_is_generated_from_this_declaration() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../worker/src/wire.js");
        let want = js();
        if std::env::var_os("UNDERSTUDY_BLESS").is_some() {
            std::fs::write(path, &want).expect("write wire.js");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "edge/worker/src/wire.js differs from edge/core/src/wire.rs: run `UNDERSTUDY_BLESS=1 cargo test -p understudy-core wire`"
        );
        let io = include_str!("../../worker/src/io.js");
        for code in [
            "case 1",
            "case 2",
            "code === 8",
            "code === 9",
            "\"/watch\"",
            "[-1",
            "[-2",
        ] {
            assert!(!io.contains(code), "io.js writes `{code}` by hand");
        }
    }

    #[test]
    fn a_fetch_and_a_timer_encode_as_the_driver_reads_them() {
        let out = Output {
            commands: vec![Command::Start {
                io: IoId(7),
                op: Op::Fetch(Outbound {
                    url: "https://m.example/r?q=é".into(),
                    method: Method::Get,
                    headers: vec![("A".into(), "1".into()), ("B".into(), "2".into())],
                    body: None,
                    max_body_bytes: 1024,
                }),
            }],
            wake_at: Some(Millis(1_700_000_000_045)),
        };
        assert_eq!(
            encode(&out),
            "1700000000045;1;7;23;https://m.example/r?q=é3;GET7;A\n1\nB\n2-1;1024;"
        );
    }
}
