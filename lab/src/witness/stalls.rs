//! The stretches of time in which the host held the run back, merged from every source the
//! witness reads, and how much of a span they cover — what a check asks of an answer that
//! broke it.
//!
//! How much a span is covered: an answer's path crosses several threads (the load driver's,
//! workerd's, the origin's), and a wait of each delays it in turn, so their waits within the
//! span add up; a stopped process holds all of them at once. The sleeper's late wakes and the
//! CPUs' steal are the host as any task meets it: a proxy for the threads the witness does
//! not read. A span's cover is the larger of the two estimates — the threads' waits added
//! up (with the stops), or the host's stretches (with the stops) — never both added, so one
//! moment of contention is not counted twice; it is at most the span's length.
//!
//! A span in which a watched process's main thread was **saturated** — it ran or waited for
//! a CPU at least [`SATURATED_BUSY`] of the time, never idle, and waited at least
//! [`SATURATED_WAIT`] of it — is covered whole: the thread worked through a queue of
//! arrivals the host held back, so every answer in it waited on the host, whether it waited
//! for the CPU itself or behind work that did. (An edge that burns the CPU on its own is
//! saturated too, but waits only on a loaded host: on a quiet one it is blamed.)

use serde::Serialize;

use super::{Trace, WAIT_MS};

/// One stretch of time the host held the run back: the union of what each source saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stall {
    pub from_ms: f64,
    pub to_ms: f64,
    /// The sources that saw it (`late wake`, `workerd waited for a CPU`, `workerd stopped`,
    /// `CPU steal`).
    pub seen_by: Vec<String>,
}

impl Stall {
    pub fn ms(&self) -> f64 {
        self.to_ms - self.from_ms
    }
}

/// Disjoint stretches in time order.
type Spans = Vec<(f64, f64)>;

/// A span is saturated when the thread ran or waited at least this share of it …
pub const SATURATED_BUSY: f64 = 0.9;
/// … and waited at least this share …
pub const SATURATED_WAIT: f64 = 0.25;
/// … over at least this long (its samples are 4 ms, and the kernel counts in chunks).
pub const SATURATED_MIN_MS: f64 = 40.0;

/// The stalls in time order (their union), and what each kind of source saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Stalls {
    list: Vec<Stall>,
    #[serde(skip)]
    host: Spans,
    #[serde(skip)]
    stops: Spans,
    #[serde(skip)]
    threads: Vec<Spans>,
    /// Each watched process's samples, `[at, span, ran, waited]`.
    #[serde(skip)]
    busy: Vec<Vec<[f64; 4]>>,
}

/// The union of `spans`, sorted.
fn union(mut spans: Spans) -> Spans {
    spans.retain(|s| s.1 > s.0);
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Spans = Vec::new();
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// How much of `[from, to]` disjoint `spans` cover.
fn within(spans: &Spans, from: f64, to: f64) -> f64 {
    spans
        .iter()
        .filter(|s| s.1 > from && s.0 < to)
        .map(|s| s.1.min(to) - s.0.max(from))
        .sum()
}

impl Stalls {
    /// No stall at all.
    pub const NONE: Stalls = Stalls {
        list: Vec::new(),
        host: Vec::new(),
        stops: Vec::new(),
        threads: Vec::new(),
        busy: Vec::new(),
    };

    /// Every source of `t` as stretches: a wake late by L at t covers `[t − L, t]` (when it
    /// was due until it ran); a run-queue wait W that ended in the sample ending at t covers
    /// `[t − W, t]`; a stopped process its whole stop; steal S per CPU `[t − S, t]`. Where
    /// in its sample a wait ended or a steal fell is not known: placed at the sample's end,
    /// it is at most one sample (4 ms; 100 ms for steal) off.
    pub fn of(t: &Trace) -> Stalls {
        let mut spans: Vec<(f64, f64, String)> = Vec::new();
        for w in &t.late_wakes {
            spans.push((w[0] - w[1], w[0], "late wake".into()));
        }
        // The kernel adds a wait to a thread's count when the thread gets the CPU, so a
        // sample may show more wait than its own span: the wait ended in the sample and
        // began that long before.
        for w in &t.waits {
            spans.push((
                w.at_ms - w.wait_ms,
                w.at_ms,
                format!("{} waited for a CPU", w.label),
            ));
        }
        for s in &t.stopped {
            spans.push((s.from_ms, s.to_ms, format!("{} stopped", s.label)));
        }
        for s in t.steal.iter().filter(|s| s.steal_ms >= WAIT_MS) {
            spans.push((
                s.at_ms - s.steal_ms.min(s.span_ms),
                s.at_ms,
                "CPU steal".into(),
            ));
        }
        let mut s = Stalls::merge(spans);
        s.busy = t.busy.iter().map(|b| b.samples.clone()).collect();
        s
    }

    /// The stalls of `spans` (from, to, source). A source named `… waited for a CPU` is a
    /// thread, `… stopped` a process stopped; any other is the host's (late wakes, steal).
    pub fn merge(mut spans: Vec<(f64, f64, String)>) -> Stalls {
        spans.retain(|s| s.1 > s.0);
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut list: Vec<Stall> = Vec::new();
        let (mut host, mut stops) = (Vec::new(), Vec::new());
        let mut threads: std::collections::BTreeMap<String, Spans> = Default::default();
        for (from, to, by) in spans {
            if by.ends_with(" waited for a CPU") {
                threads.entry(by.clone()).or_default().push((from, to));
            } else if by.ends_with(" stopped") {
                stops.push((from, to));
            } else {
                host.push((from, to));
            }
            match list.last_mut() {
                Some(last) if from <= last.to_ms => {
                    last.to_ms = last.to_ms.max(to);
                    if !last.seen_by.contains(&by) {
                        last.seen_by.push(by);
                    }
                }
                _ => list.push(Stall {
                    from_ms: from,
                    to_ms: to,
                    seen_by: vec![by],
                }),
            }
        }
        Stalls {
            list,
            host: union(host),
            stops: union(stops),
            threads: threads.into_values().map(union).collect(),
            busy: Vec::new(),
        }
    }

    pub fn list(&self) -> &[Stall] {
        &self.list
    }

    /// How much of `[from, to]` the stalls cover (ms): the threads' waits added up or the
    /// host's stretches, the larger, each with the stops (see the module's doc).
    pub fn covered(&self, from: f64, to: f64) -> f64 {
        if self.saturated(from, to) {
            return to - from;
        }
        let stops = within(&self.stops, from, to);
        let threads: f64 = self.threads.iter().map(|t| within(t, from, to)).sum();
        let host = within(
            &union(self.host.iter().chain(&self.stops).copied().collect()),
            from,
            to,
        );
        (threads + stops).max(host).min(to - from)
    }

    /// Whether a watched process's main thread was saturated over `[from, to]` (see the
    /// module's doc), its samples prorated to the span.
    pub fn saturated(&self, from: f64, to: f64) -> bool {
        let len = to - from;
        if len < SATURATED_MIN_MS {
            return false;
        }
        self.busy.iter().any(|samples| {
            let (mut ran, mut waited) = (0.0, 0.0);
            for [at, span, r, w] in samples {
                let (a, b) = (at - span, *at);
                let overlap = b.min(to) - a.max(from);
                if overlap > 0.0 && *span > 0.0 {
                    ran += r * overlap / span;
                    waited += w * overlap / span;
                }
            }
            (ran + waited) >= SATURATED_BUSY * len && waited >= SATURATED_WAIT * len
        })
    }

    /// With the samples of a process (`[at, span, ran, waited]`), for tests.
    pub fn with_busy(mut self, samples: Vec<[f64; 4]>) -> Stalls {
        self.busy.push(samples);
        self
    }

    /// The stalls that overlap `[from, to]`.
    pub fn overlapping(&self, from: f64, to: f64) -> impl Iterator<Item = &Stall> {
        self.list
            .iter()
            .filter(move |s| s.to_ms > from && s.from_ms < to)
    }

    /// The whole time stalled (ms).
    pub fn total_ms(&self) -> f64 {
        self.list.iter().map(Stall::ms).sum()
    }

    /// The longest stall (ms; 0 when none).
    pub fn longest_ms(&self) -> f64 {
        self.list.iter().map(Stall::ms).fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Stopped, Wait};
    use super::*;

    #[test]
    fn sources_merge_into_disjoint_stretches_that_name_what_saw_them() {
        let t = Trace {
            late_wakes: vec![[100.0, 30.0], [104.0, 6.0], [400.0, 2.5]],
            waits: vec![Wait {
                label: "workerd".into(),
                at_ms: 120.0,
                span_ms: 4.0,
                wait_ms: 3.5,
            }],
            stopped: vec![Stopped {
                label: "workerd".into(),
                from_ms: 1000.0,
                to_ms: 1150.0,
            }],
            ..Trace::default()
        };
        let s = t.stalls();
        let got: Vec<(f64, f64, usize)> = s
            .list()
            .iter()
            .map(|x| (x.from_ms, x.to_ms, x.seen_by.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                (70.0, 104.0, 1),
                (116.5, 120.0, 1),
                (397.5, 400.0, 1),
                (1000.0, 1150.0, 1)
            ]
        );
        assert_eq!(s.list()[3].seen_by, vec!["workerd stopped".to_string()]);
        // The host saw 14 ms of it (90–104), workerd 1.5 (116.5–118): the larger.
        assert!((s.covered(90.0, 118.0) - 14.0).abs() < 1e-9);
        assert_eq!(s.covered(200.0, 300.0), 0.0);
        assert_eq!(s.longest_ms(), 150.0);
        assert_eq!(s.overlapping(0.0, 117.0).count(), 2);
    }

    #[test]
    fn overlapping_sources_are_one_stall_and_the_host_is_not_added_to_the_threads() {
        let s = Stalls::merge(vec![
            (0.0, 50.0, "late wake".into()),
            (10.0, 40.0, "workerd waited for a CPU".into()),
            (45.0, 60.0, "workerd stopped".into()),
        ]);
        assert_eq!(s.list().len(), 1);
        assert_eq!(s.total_ms(), 60.0);
        assert_eq!(s.list()[0].seen_by.len(), 3);
        // The host's 50 ms with the stop's 15 (overlapping 5): 60; the thread's 30 + 15: 45.
        assert_eq!(s.covered(0.0, 100.0), 60.0);
    }

    #[test]
    fn a_thread_never_idle_that_waited_a_third_of_the_time_covers_the_whole_span() {
        // 4 ms samples over 0–200 ms: ran 2.6 ms and waited 1.4 of each.
        let starved: Vec<[f64; 4]> = (1..=50).map(|i| [i as f64 * 4.0, 4.0, 2.6, 1.4]).collect();
        let s = Stalls::NONE.clone().with_busy(starved);
        assert!(s.saturated(20.0, 180.0));
        assert_eq!(s.covered(20.0, 180.0), 160.0);
        // Ran the whole time and never waited (the edge's own work): not the host's.
        let busy: Vec<[f64; 4]> = (1..=50).map(|i| [i as f64 * 4.0, 4.0, 4.0, 0.0]).collect();
        let s = Stalls::NONE.clone().with_busy(busy);
        assert!(!s.saturated(20.0, 180.0));
        assert_eq!(s.covered(20.0, 180.0), 0.0);
        // Waited a third of the time but idle the rest: the ordinary waits only.
        let idle: Vec<[f64; 4]> = (1..=50).map(|i| [i as f64 * 4.0, 4.0, 0.4, 1.4]).collect();
        assert!(!Stalls::NONE.clone().with_busy(idle).saturated(20.0, 180.0));
    }

    #[test]
    fn waits_of_the_threads_on_a_path_add_up() {
        let s = Stalls::merge(vec![
            (10.0, 20.0, "workerd waited for a CPU".into()),
            (12.0, 22.0, "understudy-orig (7) waited for a CPU".into()),
            (15.0, 25.0, "understudy (5) waited for a CPU".into()),
            (14.0, 16.0, "late wake".into()),
        ]);
        assert_eq!(s.covered(0.0, 100.0), 30.0);
        // Never more than the span itself.
        assert_eq!(s.covered(12.0, 20.0), 8.0);
    }
}
