//! The check: what the producers were told against what the consumer's ledger committed and
//! what the edge's outbox holds, plus greps of the runtime log and the storage — to the
//! verdicts, the JSON report and the text lines.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::exercise::Observed;
use super::prepare::Setup;
use super::{state, Options, Outcome, FULL_REPLAYED_DELIVERIES, P95_LIMIT_MS};
use crate::drill::check::Verdict;
use crate::events::edge::{files_containing, Launch};
use crate::events::produce::{PLAIN_MARK, REDACTED_MARK};
use crate::origin::Ledger;

/// What the runtime log and the outbox storage hold.
struct Traces {
    log_lines: usize,
    redacted_in_logs: usize,
    payload_in_logs: usize,
    ids_in_logs: bool,
    storage_files: usize,
    /// Storage files holding a payload value (redacted or plain).
    stored_payload: usize,
    ids_in_storage: bool,
}

impl Traces {
    fn gather(launch: &Launch) -> Traces {
        let log_text = std::fs::read(&launch.log).unwrap_or_default();
        let log_lines = log_text
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        let in_log = |mark: &str| {
            log_text
                .windows(mark.len())
                .filter(|w| *w == mark.as_bytes())
                .count()
        };
        let redacted_in_logs = in_log(REDACTED_MARK);
        let payload_in_logs = in_log(PLAIN_MARK);
        let stored_redacted = files_containing(&launch.persist, REDACTED_MARK.as_bytes());
        let stored_plain = files_containing(&launch.persist, PLAIN_MARK.as_bytes());
        let storage_files = files_containing(&launch.persist, b"SQLite format 3").len();
        // Positive controls: the greps above must be able to find something. Event IDs are
        // stored in clear (they are keys) and logged (they are what operators search for).
        let ids_in_storage = !files_containing(&launch.persist, b"healthy-0").is_empty();
        let ids_in_logs = in_log("\"event_id\":\"healthy-0\"") > 0;
        Traces {
            log_lines,
            redacted_in_logs,
            payload_in_logs,
            ids_in_logs,
            storage_files,
            stored_payload: stored_redacted.len() + stored_plain.len(),
            ids_in_storage,
        }
    }
}

fn verdict(name: &'static str, ok: bool, detail: String) -> Verdict {
    Verdict::new(name, ok, detail)
}

fn alert_names(s: &Option<Value>) -> Vec<String> {
    s.as_ref()
        .and_then(|v| v["events"]["alerts"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|a| a["name"].as_str().map(str::to_string))
        .collect()
}

pub(super) fn judge(opts: &Options, setup: &Setup, o: &Observed, ledger: &Ledger) -> Outcome {
    let facts = Facts::gather(opts, setup, o, ledger);
    let verdicts = facts.verdicts();
    let json = facts.json(&verdicts);
    let lines = facts.lines(&json);
    Outcome {
        json,
        lines,
        verdicts,
    }
}

/// The run's observations with what is derived from them: the fate of every acknowledged
/// event, the dead letters by error, the traces, the kill, the alerts before replay.
struct Facts<'a> {
    opts: &'a Options,
    setup: &'a Setup,
    o: &'a Observed,
    ledger: &'a Ledger,
    /// Acknowledged events neither delivered (and committed) nor dead at the end, described.
    lost: Vec<String>,
    delivered: u64,
    dead_final: u64,
    dead_classes: BTreeMap<String, u64>,
    t: Traces,
    kill: Option<(u64, String)>,
    alerts_before: Vec<String>,
}

impl<'a> Facts<'a> {
    fn gather(opts: &'a Options, setup: &'a Setup, o: &'a Observed, ledger: &'a Ledger) -> Self {
        let committed: BTreeMap<&str, usize> =
            ledger.commits.iter().fold(BTreeMap::new(), |mut m, c| {
                *m.entry(c.event_id.as_str()).or_insert(0) += 1;
                m
            });
        let mut lost = Vec::new();
        let mut delivered = 0u64;
        let mut dead_final = 0u64;
        for id in &o.acked {
            match o.replay.listing.get(id).map(state) {
                Some("DELIVERED") if committed.contains_key(id.as_str()) => delivered += 1,
                Some("DEAD_LETTER") => dead_final += 1,
                other => lost.push(format!(
                    "{id}: {}",
                    other.unwrap_or("missing from the edge")
                )),
            }
        }
        let t = Traces::gather(&setup.launch);
        let dead_classes: BTreeMap<String, u64> =
            o.replay
                .dead_ever
                .values()
                .fold(BTreeMap::new(), |mut m, why| {
                    *m.entry(why.split(':').next().unwrap_or("").to_string())
                        .or_insert(0) += 1;
                    m
                });
        let kill = o.faulty.killed.lock().ok().and_then(|k| k.clone());
        let alerts_before = alert_names(&o.status_before);
        Facts {
            opts,
            setup,
            o,
            ledger,
            lost,
            delivered,
            dead_final,
            dead_classes,
            t,
            kill,
            alerts_before,
        }
    }

    /// The invariants, in the report's order; the kill's and the replay's only when they
    /// happened.
    fn verdicts(&self) -> Vec<Verdict> {
        let Facts {
            ledger,
            lost,
            delivered,
            dead_final,
            t,
            kill,
            alerts_before,
            ..
        } = self;
        let (sc, acked, r) = (&self.setup.sc, &self.o.acked, &self.o.replay);
        let (h, f) = (&self.o.healthy.produced, &self.o.faulty.produced);
        let (p50, p95) = (self.o.healthy.p50, self.o.healthy.p95);
        let (replayed, dead_ever) = (r.replayed, &r.dead_ever);
        let needed = if self.opts.full {
            FULL_REPLAYED_DELIVERIES
        } else {
            0
        };
        let mut verdicts = vec![
            verdict("NOTHING_LOST", lost.is_empty() && f.abandoned.is_empty(), format!("{} acked, {} delivered, {} dead letters, {} lost{}", acked.len(), delivered, dead_final, lost.len(), lost.first().map(|l| format!("; first: {l}")).unwrap_or_default())),
            verdict("NO_DUPLICATE_SIDE_EFFECT", ledger.duplicate_side_effects == 0 && ledger.duplicates_acknowledged >= needed, format!("{} duplicate side effects over {} replayed deliveries (required at least {needed})", ledger.duplicate_side_effects, ledger.duplicates_acknowledged)),
            verdict("PER_AGGREGATE_ORDER", ledger.order_violations == 0, format!("{} order violations{}", ledger.order_violations, ledger.violations.first().map(|v| format!("; first: {v}")).unwrap_or_default())),
            verdict("P95_DELIVERY_HEALTHY", self.o.healthy.settled && p95.is_some_and(|p| p <= P95_LIMIT_MS), format!("p95 {} ms, p50 {} ms from commit to acknowledgement over {} healthy events (limit {P95_LIMIT_MS} ms)", p95.map(|p| p.round()).unwrap_or(f64::NAN), p50.map(|p| p.round()).unwrap_or(f64::NAN), h.acked.len())),
            verdict("QUIESCED", r.settled, "every acknowledged event delivered or dead-lettered in the end".into()),
            verdict("REDACTED_NEVER_LOGGED", t.redacted_in_logs == 0 && t.payload_in_logs == 0 && t.ids_in_logs, format!("{} runtime log lines: {} with a redacted value, {} with any payload value (event IDs found: {})", t.log_lines, t.redacted_in_logs, t.payload_in_logs, t.ids_in_logs)),
            verdict("ENCRYPTED_AT_REST", t.stored_payload == 0 && t.ids_in_storage, format!("{} SQLite files, {} holding a payload value (event IDs, stored in clear, found: {})", t.storage_files, t.stored_payload, t.ids_in_storage)),
            verdict("PRODUCERS_ANSWERED", f.refused_count == 0 && h.refused_count == 0, format!("{} refused answers{}", f.refused_count + h.refused_count, f.refused.first().map(|r| format!("; first: {r}")).unwrap_or_default())),
        ];
        if sc.events.kill_after > 0.0 {
            verdicts.push(verdict(
                "KILLED_AND_RESTARTED",
                kill.as_ref().is_some_and(|(_, n)| n == "restarted"),
                match kill {
                    Some((ms, n)) => format!(
                        "SIGKILL to node and workerd after {} acks; {n} in {ms} ms on the same storage",
                        ((self.setup.count as f64) * sc.events.kill_after).ceil()
                    ),
                    None => "the kill did not happen".into(),
                },
            ));
        }
        if !dead_ever.is_empty() {
            verdicts.push(verdict("DEAD_LETTERS_REPLAYED", r.refused.is_empty() && *dead_final == 0, format!("{} dead letters ({}) replayed with their event IDs: {replayed} replays, {dead_final} dead at the end", dead_ever.len(), self.dead_classes.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "))));
            verdicts.push(verdict(
                "DEAD_LETTER_ALERT",
                alerts_before.iter().any(|a| a == "EVENTS_DEAD_LETTERS"),
                format!(
                    "alerts on the status endpoint before replay: {}",
                    if alerts_before.is_empty() {
                        "none".into()
                    } else {
                        alerts_before.join(", ")
                    }
                ),
            ));
        }
        verdicts
    }

    /// The JSON report (`events-drill.json`, `--format json`).
    fn json(&self, verdicts: &[Verdict]) -> Value {
        let Facts {
            setup,
            o,
            ledger,
            t,
            ..
        } = self;
        let (h, f, r) = (&o.healthy.produced, &o.faulty.produced, &o.replay);
        json!({
            "scenario": setup.sc.name,
            "policy": setup.policy.service.name,
            "release": setup.release_id,
            "time_scale": setup.scale,
            "scale": setup.scale_line,
            "full": self.opts.full,
            "elapsed_s": (o.elapsed_s * 10.0).round() / 10.0,
            "acked": o.acked.len(),
            "delivered": self.delivered,
            "dead_lettered": r.dead_ever.len(),
            "dead_lettered_by_error": self.dead_classes,
            "dead_letters_at_end": self.dead_final,
            "lost": self.lost.len(),
            "lost_events": self.lost.iter().take(20).collect::<Vec<_>>(),
            "duplicate_side_effects": ledger.duplicate_side_effects,
            "order_violations": ledger.order_violations,
            "replayed": r.replayed,
            "replayed_deliveries": ledger.duplicates_acknowledged,
            "p95_delivery_ms": o.healthy.p95,
            "p50_delivery_ms": o.healthy.p50,
            "healthy_events": h.acked.len(),
            "faulty_events": f.acked.len(),
            "consumer": {"deliveries": ledger.deliveries, "effects": ledger.effects, "gaps": ledger.gaps, "faults": ledger.faults, "missing_key": ledger.missing_key},
            "producers": {"out_of_order_sent": o.faulty.swapped, "duplicates_sent": o.faulty.duplicates, "duplicate_acks": f.duplicate_acks + h.duplicate_acks, "retried": f.retried + h.retried, "refused": f.refused, "abandoned": f.abandoned.len()},
            "kill": self.kill.as_ref().map(|(ms, n)| json!({"restart_ms": ms, "result": n})),
            "alerts_before_replay": self.alerts_before,
            "status_before_replay": o.status_before.as_ref().map(|s| s["events"].clone()),
            "status_after_replay": o.status_after.as_ref().map(|s| s["events"].clone()),
            "logs": {"lines": t.log_lines, "redacted_values": t.redacted_in_logs, "payload_values": t.payload_in_logs},
            "storage": {"sqlite_files": t.storage_files, "files_with_payload_values": t.stored_payload},
            "dead_letters_before_replay": o.before_replay.values().filter(|v| state(v) == "DEAD_LETTER").count(),
            "verdicts": verdicts,
        })
    }

    /// The human summary, before the verdicts.
    fn lines(&self, json: &Value) -> Vec<String> {
        let Facts {
            setup, o, ledger, ..
        } = self;
        let h = &o.healthy.produced;
        vec![
            format!("Events drill {} ({})", setup.sc.name, setup.scale_line),
            format!(
                "  acked {}  delivered {}  dead_lettered {}  lost {}  replayed {}",
                o.acked.len(),
                self.delivered,
                o.replay.dead_ever.len(),
                self.lost.len(),
                o.replay.replayed
            ),
            format!(
                "  duplicate_side_effects {} over {} replayed deliveries  order_violations {}",
                ledger.duplicate_side_effects,
                ledger.duplicates_acknowledged,
                ledger.order_violations
            ),
            format!(
                "  p95_delivery_ms {} (healthy, {} events)  consumer faults {:?}",
                o.healthy
                    .p95
                    .map(|p| p.round().to_string())
                    .unwrap_or("-".into()),
                h.acked.len(),
                json["consumer"]["faults"]
            ),
            format!("  {} s", (o.elapsed_s * 10.0).round() / 10.0),
        ]
    }
}
