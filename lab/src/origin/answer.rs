//! The bytes the origin answers with — the normal model answer and its broken variants — and
//! the response body that delivers them, at once or dripped, and that records whether the
//! client stayed to the end.

use std::collections::VecDeque;
use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use serde_json::{json, Value};

use super::state::{Outcome, Tracker};

/// The model name every answer carries.
pub const MODEL: &str = "sim-1";
/// Pieces of a large body handed to hyper at a time.
const CHUNK: usize = 64 * 1024;

/// What the answer echoes from its request, so tests can tell answers apart.
#[derive(Debug, Clone, Default)]
pub(crate) struct Echo {
    pub n: u64,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub correlation_id: Option<String>,
    /// `params` of a JSON request body, or the whole body when it has none; `null` when
    /// the body is empty or not JSON.
    pub params: Value,
}

impl Echo {
    fn json(&self) -> Value {
        json!({
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "correlation_id": self.correlation_id,
            "params": self.params,
        })
    }
}

fn items() -> Value {
    json!([
        {"sku": "SIM-1", "title": "Simulated pick one", "score": 0.9},
        {"sku": "SIM-2", "title": "Simulated pick two", "score": 0.8},
        {"sku": "SIM-3", "title": "Simulated pick three", "score": 0.7},
    ])
}

/// The normal answer: `{"model":"sim-1","request":N,"echo":{…},"items":[…]}`.
pub(crate) fn healthy(echo: &Echo) -> Bytes {
    to_bytes(&json!({"model": MODEL, "request": echo.n, "echo": echo.json(), "items": items()}))
}

/// A valid answer with an empty list.
pub(crate) fn empty(echo: &Echo) -> Bytes {
    to_bytes(&json!({"model": MODEL, "request": echo.n, "echo": echo.json(), "items": []}))
}

/// Valid JSON without the `items` list (the list moved, as after an unannounced API change).
pub(crate) fn wrong_shape(echo: &Echo) -> Bytes {
    to_bytes(&json!({
        "model": MODEL,
        "request": echo.n,
        "echo": echo.json(),
        "results": {"recommendations": "moved"},
    }))
}

/// A `200` body cut off in the middle of the list: not valid JSON.
pub(crate) fn malformed(echo: &Echo) -> Bytes {
    let mut s = String::from_utf8_lossy(&healthy(echo)).into_owned();
    let cut = s
        .find("\"items\"")
        .map_or(s.len() / 2, |i| i + 30)
        .min(s.len());
    s.truncate(cut);
    Bytes::from(s)
}

/// A valid answer of at least `bytes` bytes: the normal items followed by many padded ones.
pub(crate) fn huge(echo: &Echo, bytes: u64) -> Bytes {
    let target = usize::try_from(bytes).unwrap_or(usize::MAX);
    let head = format!(
        "{{\"model\":\"{MODEL}\",\"request\":{},\"echo\":{},\"items\":[",
        echo.n,
        echo.json()
    );
    let mut s = String::with_capacity(target.saturating_add(256));
    s.push_str(&head);
    let pad = "x".repeat(200);
    let mut i: u64 = 0;
    // Bounded: every pass adds more than 200 bytes and `target` is at most 64 MiB.
    while s.len() < target || i == 0 {
        if i > 0 {
            s.push(',');
        }
        i += 1;
        s.push_str(&format!(
            "{{\"sku\":\"SIM-{i}\",\"title\":\"Simulated filler {pad}\",\"score\":0.1}}"
        ));
    }
    s.push_str("]}");
    Bytes::from(s)
}

/// The JSON error body of a failure status: `{"error":{"code":…,"message":…}}`.
pub(crate) fn error(code: &str, message: &str) -> Bytes {
    to_bytes(&json!({"error": {"code": code, "message": message}}))
}

fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(v.to_string())
}

/// A response body that is sent whole or dripped chunk by chunk, and that records the
/// request's outcome: [`Outcome::Completed`] once the last byte is handed over, and
/// (through the tracker's `Drop`) [`Outcome::Disconnected`] when hyper drops it earlier
/// because the client went away.
pub(crate) struct SimBody {
    chunks: VecDeque<Bytes>,
    remaining: u64,
    interval: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    tracker: Option<Tracker>,
}

impl SimBody {
    /// `bytes` at once (in pieces of 64 KiB for large bodies).
    pub(crate) fn full(bytes: Bytes, tracker: Option<Tracker>) -> Self {
        let mut chunks = VecDeque::new();
        let mut rest = bytes;
        while rest.len() > CHUNK {
            chunks.push_back(rest.split_to(CHUNK));
        }
        if !rest.is_empty() {
            chunks.push_back(rest);
        }
        Self::new(chunks, Duration::ZERO, tracker)
    }

    /// `bytes` in `pieces` chunks, one every `over / pieces`, the last at `over`.
    pub(crate) fn dripped(bytes: Bytes, pieces: u64, over: Duration, tracker: Tracker) -> Self {
        let pieces = usize::try_from(pieces.max(1))
            .unwrap_or(1)
            .min(bytes.len().max(1));
        let size = bytes.len().div_ceil(pieces).max(1);
        let mut chunks = VecDeque::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = size.min(rest.len());
            chunks.push_back(rest.split_to(n));
        }
        let count = u32::try_from(chunks.len().max(1)).unwrap_or(u32::MAX);
        Self::new(chunks, over / count, Some(tracker))
    }

    fn new(chunks: VecDeque<Bytes>, interval: Duration, mut tracker: Option<Tracker>) -> Self {
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        if chunks.is_empty() {
            if let Some(t) = tracker.as_mut() {
                t.finish(Outcome::Completed);
            }
        }
        SimBody {
            chunks,
            remaining,
            interval,
            sleep: None,
            tracker,
        }
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.chunks.is_empty() {
            return Poll::Ready(None);
        }
        if !this.interval.is_zero() {
            let interval = this.interval;
            let sleep = this
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(interval)));
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.sleep = None;
        }
        let Some(chunk) = this.chunks.pop_front() else {
            return Poll::Ready(None);
        };
        this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
        if this.chunks.is_empty() {
            if let Some(t) = this.tracker.as_mut() {
                t.finish(Outcome::Completed);
            }
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo() -> Echo {
        Echo {
            n: 4,
            method: "POST".into(),
            path: "/p".into(),
            params: json!({"a": 1}),
            ..Echo::default()
        }
    }

    #[test]
    fn healthy_answer_has_items_and_echo() {
        let v: Value = serde_json::from_slice(&healthy(&echo())).unwrap();
        assert_eq!(v["model"], "sim-1");
        assert_eq!(v["request"], 4);
        assert_eq!(v["echo"]["params"]["a"], 1);
        assert_eq!(v["items"].as_array().unwrap().len(), 3);
        assert_eq!(v["items"][0]["sku"], "SIM-1");
    }

    #[test]
    fn broken_answers_are_broken_in_the_promised_way() {
        assert!(serde_json::from_slice::<Value>(&malformed(&echo())).is_err());
        let v: Value = serde_json::from_slice(&empty(&echo())).unwrap();
        assert_eq!(v["items"], json!([]));
        let v: Value = serde_json::from_slice(&wrong_shape(&echo())).unwrap();
        assert!(v.get("items").is_none());
        let big = huge(&echo(), 1_000_000);
        assert!(big.len() >= 1_000_000 && big.len() < 1_001_000);
        let v: Value = serde_json::from_slice(&big).unwrap();
        assert!(v["items"].as_array().unwrap().len() > 1000);
    }

    #[test]
    fn bodies_split_into_the_requested_chunks() {
        let b = SimBody::full(Bytes::from(vec![b'a'; CHUNK * 2 + 1]), None);
        assert_eq!(b.chunks.len(), 3);
        assert_eq!(b.size_hint().exact(), Some((CHUNK * 2 + 1) as u64));
    }
}
