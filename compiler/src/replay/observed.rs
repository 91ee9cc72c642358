//! The origin and the tiers as the logs saw them, over time: every call to the origin and
//! every tier read, placed at its instant (ms after the first arrival), with what came of
//! it. A replayed call or read asks what the origin (or the tier) did *then*:
//! - the same request's own call, when the logged request made it at about the same moment
//!   ([`OWN_MS`]), or its own read of the tier (what a tier holds depends on the request's
//!   key, not the moment): exactly what happened;
//! - otherwise the nearest observation within [`NEAR_MS`] of that instant that no replayed
//!   call (or read) has met yet, so the replay meets what the logs saw about as often as
//!   they saw it — a 15% hit rate stays 15%, a probing's one slow answer stays one; when
//!   every one that near has been met, one of them drawn again by a fixed hash of the
//!   request and its call number (the replay is deterministic);
//! - with none that near (the logged policy kept away from the origin, no request read the
//!   tier), what the nearest observations on either side saw: the same when they agree,
//!   else unknown between them ([`Lookup::Between`]).
//!
//! A censored observation — a call cut at 45 ms, a read timed out at 8 ms — stays
//! censored: it says "slower than that", nothing more (`world` turns it into the best and
//! the worst case). A call cut on a busy isolate (`cut_busy`: its clock ran past the
//! deadline while the model's answer may have waited in its queue) says nothing of the
//! origin, and is not taken as an observation of it.

use std::collections::BTreeMap;

use understudy_core::classify::FailureReason;
use understudy_core::tier::Read;

use super::line::{CallSeen, End, Line, TierSeen};

/// A replayed call or read takes the logged request's own when it starts within this many
/// ms of when the logged one did.
pub const OWN_MS: u64 = 10;

/// The Worker's clock reads whole ms, and a call's start and end are each read once: a wait
/// the logs saw cut at X ms may have lasted up to X + this. A censored observation says
/// "slower than X + CLOCK_MS".
pub const CLOCK_MS: u64 = 1;

/// Observations this close in time stand for what the origin (or a tier) did at an instant:
/// a second of the service's own time (logs of a drill run at `--time-scale F`, whose
/// incident runs F times as fast, use F of it: [`Observed::scaled`]).
pub const NEAR_MS: u64 = 1_000;

/// What one call to the origin did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallWas {
    /// A good answer after `ms`.
    Ok { ms: u64 },
    /// A failure after `ms`.
    Failed {
        reason: FailureReason,
        status: Option<u16>,
        retry_after_s: Option<u64>,
        ms: u64,
    },
    /// No answer within `after_ms`: slower than that.
    Censored { after_ms: u64 },
    /// A good answer the edge took `took_ms` after the call began, past its attempt's due
    /// time: its timer ran late (a busy isolate) and the answer may have waited in the
    /// isolate's own queue. The origin gave it by `took_ms`, perhaps by `by_ms` (just within
    /// the due time, as the edge took it).
    Late { by_ms: u64, took_ms: u64 },
}

impl CallWas {
    pub fn of(c: &CallSeen) -> CallWas {
        let ms = c.took_ms();
        match c.end {
            // Taken past the instant its timer was due — both read on the request's clock,
            // from its arrival — the timer ran late. A replayed engine, whose timer is on
            // time, would cut it at its due time (one ms late is enough: a probe the Worker
            // took at 46 ms, due at 45, failed the last probing of a replay whose drill
            // recovered). Taken at its due instant, the answer came first: as it was.
            End::Ok => match c.due_ms {
                Some(due) if c.end_ms > due => CallWas::Late {
                    by_ms: due
                        .saturating_sub(c.start_ms)
                        .saturating_sub(CLOCK_MS)
                        .max(1),
                    took_ms: ms,
                },
                _ => CallWas::Ok { ms },
            },
            End::Failed(reason) => CallWas::Failed {
                reason,
                status: c.status,
                retry_after_s: c.retry_after_s,
                ms,
            },
            End::Censored { .. } => CallWas::Censored { after_ms: ms },
        }
    }

    /// Whether the origin was failing the edge: a failure of its own (not the caller's
    /// 4xx), or no answer in time.
    pub fn bad(&self) -> bool {
        match self {
            CallWas::Ok { .. } | CallWas::Late { .. } => false,
            CallWas::Failed { reason, .. } => reason.class().blames_origin(),
            CallWas::Censored { .. } => true,
        }
    }

    /// Orders outcomes from best to worst for the caller: a good answer (the sooner the
    /// better), then a failure, then no answer.
    pub fn rank(&self) -> (u8, u64) {
        match self {
            CallWas::Ok { ms } | CallWas::Late { took_ms: ms, .. } => (0, *ms),
            CallWas::Failed { ms, .. } => (1, *ms),
            CallWas::Censored { after_ms } => (2, *after_ms),
        }
    }
}

/// What one tier read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierWas {
    pub read: Read,
    /// How long the read took (for a timeout: the timeout, a censored bound).
    pub ms: u64,
    /// When the entry it found (a hit, or a stale one) was written, ms after the first
    /// arrival (negative: before it): its age when read, counted back from the read's end.
    pub written_ms: Option<i64>,
}

impl TierWas {
    /// Read `t` of a request that arrived `at` ms after the first.
    pub fn of(t: &TierSeen, at: u64) -> TierWas {
        TierWas {
            read: t.read,
            ms: t.took_ms(),
            written_ms: t.age_ms.map(|age| (at + t.end_ms) as i64 - age as i64),
        }
    }

    pub fn rank(&self) -> (u8, u64) {
        let r = match self.read {
            Read::Hit => 0,
            Read::Stale => 1,
            Read::Miss => 2,
            Read::Error => 3,
            Read::TimedOut => 4,
        };
        (r, self.ms)
    }
}

/// What the logs tell of an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<T> {
    /// Seen then (or close enough).
    Known(T),
    /// Nothing seen close by: the nearest observations before and after disagree.
    Between(T, T),
    /// Nothing seen at all.
    Unseen,
}

/// Observations of one kind, by instant.
#[derive(Debug, Clone)]
pub struct Timeline<T> {
    at: Vec<(u64, T)>,
    /// How near an observation stands for an instant ([`NEAR_MS`], or scaled).
    near: u64,
}

impl<T: Copy + PartialEq> Timeline<T> {
    #[cfg(test)]
    pub(crate) fn new(at: Vec<(u64, T)>) -> Timeline<T> {
        Timeline::within(at, NEAR_MS)
    }

    /// Observations that stand for an instant `near` ms away.
    pub(crate) fn within(mut at: Vec<(u64, T)>, near: u64) -> Timeline<T> {
        at.sort_by_key(|(t, _)| *t);
        Timeline {
            at,
            near: near.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &(u64, T)> {
        self.at.iter()
    }

    /// What was seen at `t` (ms after the first arrival), by a replay that has met nothing
    /// yet ([`Timeline::draw`]).
    #[cfg(test)]
    pub fn at(&self, t: u64, key: u64) -> Lookup<T> {
        self.draw(t, key, &mut Taken::default())
    }

    /// What was seen at `t`: of what was seen within [`NEAR_MS`], the nearest observation
    /// not yet `taken` (then taken), so a replay that calls about as often as the logs did
    /// near an instant meets each observation once, in the order the logs saw them. A
    /// probing of twenty calls, one of them slow, replayed a few ms off the logged one,
    /// meets that slow call once, as the logs did — not twice, which fails the probing's
    /// p95 the logged one passed. When every observation near is taken (the replay calls
    /// more often than the logs did), one is drawn again by `key`, so the mix seen there
    /// stays the mix met.
    pub fn draw(&self, t: u64, key: u64, taken: &mut Taken) -> Lookup<T> {
        let near = self.near;
        let lo = self.at.partition_point(|(x, _)| *x + near < t);
        let hi = self.at.partition_point(|(x, _)| *x <= t + near);
        if hi > lo {
            // Outward from `t`, the nearer side first (the earlier on a tie); a bounded
            // search: among thousands of observations, one is as good as its neighbour.
            let mid = self.at.partition_point(|(x, _)| *x < t);
            let (mut before, mut after) = (mid, mid);
            let mut free = None;
            for _ in 0..DRAW_SEARCH {
                let left = (before > lo).then(|| t - self.at[before - 1].0);
                let right = (after < hi).then(|| self.at[after].0 - t);
                let leftward = match (left, right) {
                    (Some(l), Some(r)) => l <= r,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                let j = if leftward {
                    before -= 1;
                    before
                } else {
                    after += 1;
                    after - 1
                };
                if !taken.0.contains(&j) {
                    free = Some(j);
                    break;
                }
            }
            let j = free.unwrap_or(lo + (mix(key) % (hi - lo) as u64) as usize);
            taken.0.insert(j);
            return Lookup::Known(self.at[j].1);
        }
        let before = lo.checked_sub(1).map(|i| self.at[i].1);
        let after = self.at.get(hi).map(|x| x.1);
        match (before, after) {
            (Some(a), Some(b)) if a == b => Lookup::Known(a),
            (Some(a), Some(b)) => Lookup::Between(a, b),
            (Some(a), None) | (None, Some(a)) => Lookup::Known(a),
            (None, None) => Lookup::Unseen,
        }
    }

    /// The observation `was` seen at exactly `t` is a replayed request's own: no draw
    /// takes it for another.
    pub fn take(&self, t: u64, was: &T, taken: &mut Taken) {
        let from = self.at.partition_point(|(x, _)| *x < t);
        let own = (from..self.at.len())
            .take_while(|&j| self.at[j].0 == t)
            .find(|&j| self.at[j].1 == *was && !taken.0.contains(&j));
        if let Some(j) = own {
            taken.0.insert(j);
        }
    }
}

/// How many observations past the drawn one a draw looks at for one not yet taken.
const DRAW_SEARCH: usize = 64;

/// The observations of one timeline a replay has met (by their place in it).
#[derive(Debug, Clone, Default)]
pub struct Taken(std::collections::HashSet<usize>);

impl Timeline<CallWas> {
    /// The longest any call seen within [`NEAR_MS`] of `t` waited without an answer: the
    /// origin was slower than that then, as far as the calls around tell (a call drawn from
    /// them is slower than this, not only than its own cut).
    pub fn censored_near(&self, t: u64) -> Option<u64> {
        let near = self.near;
        let lo = self.at.partition_point(|(x, _)| *x + near < t);
        let hi = self.at.partition_point(|(x, _)| *x <= t + near);
        self.at[lo..hi]
            .iter()
            .filter_map(|(_, c)| match c {
                CallWas::Censored { after_ms } => Some(*after_ms),
                _ => None,
            })
            .max()
    }
}

/// splitmix64: spreads a key over the observations.
fn mix(key: u64) -> u64 {
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Everything the logs saw of the origin and the tiers.
#[derive(Debug, Clone)]
pub struct Observed {
    pub origin: Timeline<CallWas>,
    /// What the incidents are found in: the origin's calls, and the calls cut on a busy
    /// isolate whose own breaker opened within [`CONVICTED_MS`] of them (it heard no
    /// answer for them: they were its evidence).
    pub failed_edge: Timeline<CallWas>,
    pub tiers: BTreeMap<String, Timeline<TierWas>>,
}

/// A call cut on a busy isolate counts toward an incident when that isolate's breaker
/// opened this soon after the call began.
pub const CONVICTED_MS: u64 = 1_000;

impl Observed {
    /// From the logged lines (`first_ms`: the first arrival, ms since the epoch).
    pub fn of(lines: &[Line], first_ms: u64) -> Observed {
        Observed::scaled(lines, first_ms, 1.0)
    }

    /// From the lines of a drill run at `time_scale` (0 < F ≤ 1): its incident ran F times
    /// as fast, so an observation stands for an instant F × [`NEAR_MS`] away. (At time scale
    /// 0.1 a whole probing lasts a second: drawn from a second around it, a replayed probe
    /// met the deadline misses of the host stalls after the recovery.)
    pub fn scaled(lines: &[Line], first_ms: u64, time_scale: f64) -> Observed {
        let near = (NEAR_MS as f64 * time_scale.clamp(f64::MIN_POSITIVE, 1.0)).round() as u64;
        let mut origin = Vec::new();
        let mut busy: Vec<(&str, u64, CallWas)> = Vec::new();
        let mut opened: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        let mut tiers: BTreeMap<String, Vec<(u64, TierWas)>> = BTreeMap::new();
        for l in lines {
            let at = l.at_ms.saturating_sub(first_ms);
            if l.breaker_mode == "DEGRADED_FALLBACK" {
                opened.entry(l.isolate.as_str()).or_default().push(at);
            }
            for c in &l.calls {
                if c.cut_busy() {
                    busy.push((l.isolate.as_str(), at + c.start_ms, CallWas::of(c)));
                } else {
                    origin.push((at + c.start_ms, CallWas::of(c)));
                }
            }
            for t in &l.tiers {
                tiers
                    .entry(t.tier.clone())
                    .or_default()
                    .push((at + t.start_ms, TierWas::of(t, at)));
            }
        }
        let mut failed_edge = origin.clone();
        for (isolate, t, c) in busy {
            let convicted = opened
                .get(isolate)
                .is_some_and(|o| o.iter().any(|&u| u >= t && u <= t + CONVICTED_MS));
            if convicted {
                failed_edge.push((t, c));
            }
        }
        Observed {
            origin: Timeline::within(origin, near),
            failed_edge: Timeline::within(failed_edge, near),
            tiers: tiers
                .into_iter()
                .map(|(k, v)| (k, Timeline::within(v, near)))
                .collect(),
        }
    }

    /// When the entry of a hit of `tier` seen nearest to `t` was written (for a best case
    /// that has none).
    pub fn hit_written(&self, tier: &str, t: u64) -> Option<i64> {
        let tl = self.tiers.get(tier)?;
        tl.iter()
            .filter(|(_, w)| w.read == Read::Hit)
            .min_by_key(|(x, _)| x.abs_diff(t))
            .and_then(|(_, w)| w.written_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(ms: u64) -> CallWas {
        CallWas::Ok { ms }
    }

    /// A probe the Worker took 50 ms after it began, its timer due at 45 (late on a busy
    /// isolate): a good answer by 50 ms, perhaps by 44 — never a cut one.
    #[test]
    fn a_good_answer_taken_past_its_due_time_is_late_not_slow() {
        let call = |end_ms, end| CallSeen {
            start_ms: 0,
            end_ms,
            due_ms: Some(45),
            end,
            status: None,
            retry_after_s: None,
            probe: true,
            hedge: false,
        };
        let late = CallWas::of(&call(50, End::Ok));
        assert_eq!(
            late,
            CallWas::Late {
                by_ms: 44,
                took_ms: 50
            }
        );
        assert!(!late.bad());
        assert_eq!(late.rank(), (0, 50));
        // One ms past its due instant is late too.
        assert_eq!(
            CallWas::of(&call(46, End::Ok)),
            CallWas::Late {
                by_ms: 44,
                took_ms: 46
            }
        );
        // Its due instant is after the arrival, not after the call began: a call begun at
        // 1 ms, due at 45 and taken at 46 took 45 ms, and is late.
        let begun_late = CallSeen {
            start_ms: 1,
            ..call(46, End::Ok)
        };
        assert_eq!(
            CallWas::of(&begun_late),
            CallWas::Late {
                by_ms: 43,
                took_ms: 45
            }
        );
        // Taken at its due instant (the answer came first) or before: as it was.
        assert_eq!(CallWas::of(&call(45, End::Ok)), ok(45));
        assert_eq!(CallWas::of(&call(30, End::Ok)), ok(30));
    }

    /// The logs of a drill at time scale 0.1: its probing lasts a second, and the deadline
    /// misses 400 ms after it (host stalls after the recovery) are no evidence of what the
    /// origin did for a probe.
    #[test]
    fn a_drill_at_a_time_scale_draws_from_the_instants_scaled_alike() {
        let cut = CallWas::Censored { after_ms: 45 };
        let seen = vec![(0, ok(28)), (50, ok(29)), (450, cut), (460, cut)];
        let scaled = Timeline::within(seen.clone(), 100);
        let four = |tl: &Timeline<CallWas>| {
            let mut taken = Taken::default();
            (0..4)
                .map(|k| tl.draw(60, k, &mut taken))
                .collect::<Vec<_>>()
        };
        assert!(four(&scaled).iter().all(|d| *d != Lookup::Known(cut)));
        let unscaled = Timeline::new(seen);
        assert!(four(&unscaled).contains(&Lookup::Known(cut)));
    }

    /// A logged probing: twenty probes 50 ms apart, one slow (41 ms, over the probing's
    /// 40 ms p95). Replayed 30 ms earlier (the replay's breaker opened a little sooner), the
    /// twenty probes draw from what was seen within 100 ms of each: every logged probe met
    /// once, the slow one among them once, as in the logs — whatever the keys.
    #[test]
    fn a_replayed_probing_meets_each_logged_probe_once() {
        let seen: Vec<_> = (0..20u64)
            .map(|n| (1_000 + n * 50, ok(if n == 17 { 41 } else { 28 })))
            .collect();
        let probing = Timeline::within(seen, 100);
        for salt in 0..200u64 {
            let mut taken = Taken::default();
            let drawn: Vec<_> = (0..20u64)
                .map(|n| probing.draw(970 + n * 50, salt << 32 | n, &mut taken))
                .collect();
            let slow = drawn
                .iter()
                .filter(|d| **d == Lookup::Known(ok(41)))
                .count();
            assert_eq!(slow, 1, "keys {salt}: {drawn:?}");
        }
        // Taken as a request's own, an observation is not drawn for another.
        let two = Timeline::within(vec![(0, ok(28)), (10, ok(41))], 100);
        let mut taken = Taken::default();
        two.take(10, &ok(41), &mut taken);
        assert!((0..50).all(|k| two.draw(5, k, &mut taken.clone()) == Lookup::Known(ok(28))));
        // Everything near taken: drawn again rather than nothing.
        let mut all = Taken::default();
        two.take(0, &ok(28), &mut all);
        two.take(10, &ok(41), &mut all);
        assert!(matches!(two.draw(5, 3, &mut all), Lookup::Known(_)));
    }

    #[test]
    fn an_instant_is_what_was_seen_near_it_or_between_its_neighbours() {
        let cut = CallWas::Censored { after_ms: 45 };
        let t = Timeline::new(vec![
            (0, ok(25)),
            (500, ok(30)),
            (5_000, cut),
            (9_000, ok(25)),
        ]);
        // Within a second: the nearest seen, then the other; both met, one is drawn again.
        let mut taken = Taken::default();
        let drawn: Vec<_> = (0..3).map(|k| t.draw(300, k, &mut taken)).collect();
        assert_eq!(drawn[..2], [Lookup::Known(ok(30)), Lookup::Known(ok(25))]);
        assert!(matches!(drawn[2], Lookup::Known(_)));
        // Nothing within a second of 3 s: a good answer before, a cut call after.
        assert_eq!(t.at(3_000, 0), Lookup::Between(ok(30), cut));
        // Past the last observation: the last one.
        assert_eq!(t.at(20_000, 0), Lookup::Known(ok(25)));
        assert_eq!(Timeline::<CallWas>::new(vec![]).at(0, 0), Lookup::Unseen);
        let cuts = Timeline::new(vec![
            (0, CallWas::Censored { after_ms: 42 }),
            (10, cut),
            (5_000, cut),
        ]);
        assert_eq!(cuts.censored_near(20), Some(45));
        assert_eq!(cuts.censored_near(2_500), None);
    }

    #[test]
    fn outcomes_rank_from_a_quick_answer_to_none() {
        let failed = CallWas::Failed {
            reason: FailureReason::Ml5xx,
            status: Some(503),
            retry_after_s: None,
            ms: 1,
        };
        let mut v = [CallWas::Censored { after_ms: 45 }, failed, ok(40), ok(20)];
        v.sort_by_key(CallWas::rank);
        assert_eq!(
            v,
            [ok(20), ok(40), failed, CallWas::Censored { after_ms: 45 }]
        );
        assert!(failed.bad() && CallWas::Censored { after_ms: 1 }.bad() && !ok(1).bad());
        let caller = CallWas::Failed {
            reason: FailureReason::Ml4xx,
            status: Some(404),
            retry_after_s: None,
            ms: 1,
        };
        assert!(!caller.bad(), "a caller's 4xx is no fault of the origin");
    }

    /// Calls cut on a busy isolate say nothing of the origin's latency, but those its own
    /// breaker convicted — it opened within a second of them — are its evidence that the
    /// origin failed it: the incidents see them, the origin's timeline does not. A cold
    /// isolate at an incident's onset cuts every call busy, and the incident began there.
    #[test]
    fn calls_cut_busy_count_toward_incidents_only_where_their_breaker_opened() {
        use crate::replay::figures::tests::{call, line};
        let busy = || call(60, End::Censored { busy: true }, false);
        let mut lines: Vec<Line> = (0..5)
            .map(|k| line(k * 100, "fallback", 60, "PRIMARY_HEALTHY", vec![busy()]))
            .collect();
        lines.push(line(600, "fallback", 1, "DEGRADED_FALLBACK", Vec::new()));
        let mut elsewhere = line(0, "fallback", 60, "PRIMARY_HEALTHY", vec![busy()]);
        elsewhere.isolate = "b".into();
        lines.push(elsewhere);
        let obs = Observed::of(&lines, 0);
        assert_eq!(
            obs.origin.len(),
            0,
            "no observation of the origin's latency"
        );
        assert_eq!(
            obs.failed_edge.len(),
            5,
            "isolate a's, not b's (its breaker never opened)"
        );
        let found = crate::replay::incidents::find(&obs.failed_edge);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].onset_ms, 0);
    }
}
