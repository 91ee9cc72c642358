//! The stretches of time in which the host held the run back, merged from every source the
//! witness reads, and how much of a span they cover — what a check asks of an answer that
//! broke it.

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

/// Disjoint stalls in time order.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stalls(Vec<Stall>);

impl Stalls {
    /// No stall at all.
    pub const NONE: Stalls = Stalls(Vec::new());

    /// Every source of `t` as stretches: a wake late by L at t covers `[t − L, t]` (when it
    /// was due until it ran); a run-queue wait W in the sample ending at t covers
    /// `[t − W, t]`; a stopped process its whole stop; steal S per CPU `[t − S, t]`. Where
    /// in its sample a wait or a steal fell is not known: placed at the sample's end, it is
    /// at most one sample (4 ms; 100 ms for steal) off.
    pub fn of(t: &Trace) -> Stalls {
        let mut spans: Vec<(f64, f64, String)> = Vec::new();
        for w in &t.late_wakes {
            spans.push((w[0] - w[1], w[0], "late wake".into()));
        }
        for w in &t.waits {
            spans.push((
                w.at_ms - w.wait_ms.min(w.span_ms),
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
        Stalls::merge(spans)
    }

    /// The union of `spans` (from, to, source).
    pub fn merge(mut spans: Vec<(f64, f64, String)>) -> Stalls {
        spans.retain(|s| s.1 > s.0);
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out: Vec<Stall> = Vec::new();
        for (from, to, by) in spans {
            match out.last_mut() {
                Some(last) if from <= last.to_ms => {
                    last.to_ms = last.to_ms.max(to);
                    if !last.seen_by.contains(&by) {
                        last.seen_by.push(by);
                    }
                }
                _ => out.push(Stall {
                    from_ms: from,
                    to_ms: to,
                    seen_by: vec![by],
                }),
            }
        }
        Stalls(out)
    }

    pub fn list(&self) -> &[Stall] {
        &self.0
    }

    /// How much of `[from, to]` the stalls cover (ms).
    pub fn covered(&self, from: f64, to: f64) -> f64 {
        self.overlapping(from, to)
            .map(|s| s.to_ms.min(to) - s.from_ms.max(from))
            .sum()
    }

    /// The stalls that overlap `[from, to]`.
    pub fn overlapping(&self, from: f64, to: f64) -> impl Iterator<Item = &Stall> {
        self.0
            .iter()
            .filter(move |s| s.to_ms > from && s.from_ms < to)
    }

    /// The whole time stalled (ms).
    pub fn total_ms(&self) -> f64 {
        self.0.iter().map(Stall::ms).sum()
    }

    /// The longest stall (ms; 0 when none).
    pub fn longest_ms(&self) -> f64 {
        self.0.iter().map(Stall::ms).fold(0.0, f64::max)
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
        assert!((s.covered(90.0, 118.0) - 15.5).abs() < 1e-9);
        assert_eq!(s.covered(200.0, 300.0), 0.0);
        assert_eq!(s.longest_ms(), 150.0);
        assert_eq!(s.overlapping(0.0, 117.0).count(), 2);
    }

    #[test]
    fn overlapping_sources_are_counted_once() {
        let s = Stalls::merge(vec![
            (0.0, 50.0, "late wake".into()),
            (10.0, 40.0, "workerd waited for a CPU".into()),
            (45.0, 60.0, "workerd stopped".into()),
        ]);
        assert_eq!(s.list().len(), 1);
        assert_eq!(s.total_ms(), 60.0);
        assert_eq!(s.list()[0].seen_by.len(), 3);
    }
}
