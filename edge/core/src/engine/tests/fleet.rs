//! [F-SCOPE] A fleet-scoped engine: the report an answer carries, the verdict it applies,
//! and the log line and data point each change of what it knows of the fleet brings.

use super::*;
use crate::breaker::fleet::WATCH_MS;
use crate::breaker::fleet::{settings_hash, Coordinator};
use crate::breaker::member::{object_name, FleetReport, REPORT_TIMEOUT_MS};
use crate::policy::{FleetScope, Scope};
use crate::testing::seed_rate_breaker;

fn fleet_policy() -> crate::policy::Policy {
    let mut p = seed_policy();
    p.breaker = BreakerCfg::Rate(crate::policy::RateBreaker {
        scope: Scope::Fleet(FleetScope {
            coordinator: "BREAKER_COORDINATOR".into(),
            report_interval_ms: 1_000,
            verdict_ttl_ms: 3_000,
        }),
        ..seed_rate_breaker()
    });
    p
}

/// A healthy isolate's first report goes at its phase of a heartbeat: here, at once.
fn first_report_at_once(e: &mut Engine<'_>) {
    if let Some(m) = e.health.member() {
        m.set_phase(0.0);
    }
}

fn report_of(r: &Reply) -> Option<&FleetReport> {
    r.fleet.iter().find(|f| f.path == "/report")
}

fn watch_of(r: &Reply) -> Option<&FleetReport> {
    r.fleet.iter().find(|f| f.path == "/watch")
}

/// [`run`] against a healthy model, and the report the request asked the coordinator with
/// (an isolate in the dark — a new one — asks with its first call: `Command::Ask`).
fn run_asking(e: &mut Engine<'_>, t0: u64, path: &str) -> (Reply, Option<FleetReport>) {
    let (path, headers) = get(path, &[]);
    let req = Incoming {
        method: "GET",
        path: &path,
        query: "",
        headers: &headers,
    };
    let (mut f, out) = e.start(at(t0), &req, &env(), t0 + 1);
    let asked = out.commands.iter().find_map(|c| match c {
        Command::Ask(r) => Some(r.clone()),
        _ => None,
    });
    (finish(e, &mut f, t0, out, &ok()), asked)
}

/// A thin isolate hears the fleet open between its requests: the watch its last answer
/// carried is held until another isolate's report opens the fleet, and then answered —
/// its next request meets an open breaker without calling the model.
#[test]
fn a_held_watch_brings_the_opening_to_an_isolate_between_its_requests() {
    let p = fleet_policy();
    let BreakerCfg::Rate(rate) = &p.breaker else {
        unreachable!()
    };
    let mut c = Coordinator::new(
        &p.service.name,
        &settings_hash(rate, "p"),
        rate.clone(),
        1_000,
    );
    let b = bake(p.clone());
    let mut thin = Engine::new(&b).unwrap();
    first_report_at_once(&mut thin);
    let (r, asked) = run_asking(&mut thin, 0, "/recommendations/alice");
    assert_eq!(asked, None, "a new isolate does not ask");
    let report = report_of(&r).expect("the first answer reports");
    let watch = watch_of(&r).expect("and watches");
    assert_eq!(watch.timeout_ms, WATCH_MS + REPORT_TIMEOUT_MS);
    let v = c
        .report(at(10), Coordinator::parse(&report.body).unwrap())
        .unwrap();
    thin.fleet_heard(at(20), Ok(&serde_json::to_string(&v).unwrap()));
    let w = Coordinator::parse_watch(&watch.body).unwrap();
    assert_eq!(
        c.watch(at(10), &w),
        Ok(None),
        "held: the fleet is as the isolate knows it"
    );
    assert!(!c.moved());
    // Another isolate's window: every call timed out.
    let busy = crate::breaker::fleet::Report {
        service: p.service.name.clone(),
        config: settings_hash(rate, "p"),
        isolate: "busy".into(),
        seq: 1,
        buckets: vec![crate::breaker::fleet::Counts {
            epoch: at(1_000).0 / (rate.window_ms / 10),
            calls: 40,
            failures: 40,
            timeouts: 40,
            slow: 40,
            ..Default::default()
        }],
        period_ms: 0,
    };
    let opened = c.report(at(1_000), busy).unwrap();
    assert_eq!(opened.mode, crate::breaker::fleet::FleetMode::Open);
    assert!(c.moved(), "the held watches are to be answered");
    assert_eq!(thin.breaker_mode(at(1_020)), "PRIMARY_HEALTHY");
    let pushed = thin.fleet_watched(at(1_020), Ok(&serde_json::to_string(&opened).unwrap()));
    assert_eq!(pushed.point.unwrap().blobs[3], "OPEN");
    assert_eq!(thin.breaker_mode(at(1_020)), "DEGRADED_FALLBACK");
    // Its next request, seconds later, is served without a model call.
    let r = run(&mut thin, 6_000, "/recommendations/alice", ok());
    assert_eq!(r.header("X-Degraded"), Some("true"));
    // A failed watch changes no scope: the reports judge the coordinator.
    thin.fleet_watched(at(6_100), Err("no answer within 25500 ms"));
    assert_eq!(thin.breaker_mode(at(6_100)), "DEGRADED_FALLBACK");
}

#[test]
fn an_answer_carries_the_report_and_the_verdict_changes_are_points_and_log_lines() {
    let p = fleet_policy();
    let BreakerCfg::Rate(rate) = &p.breaker else {
        unreachable!()
    };
    let config = settings_hash(rate, "p");
    let mut c = Coordinator::new(&p.service.name, &config, rate.clone(), 1_000);
    let b = bake(p.clone());
    let mut e = Engine::new(&b).unwrap();
    first_report_at_once(&mut e);
    let r = run(&mut e, 0, "/recommendations/alice", ok());
    assert_eq!(r.status, 200);
    let report = report_of(&r).expect("the first answer reports");
    assert_eq!(report.binding, "BREAKER_COORDINATOR");
    // No `cf` located this isolate: the default region's coordinator, its location hint.
    let region = crate::breaker::fleet::place::DEFAULT_REGION;
    assert_eq!(report.object, object_name(&p.service.name, &config, region));
    assert_eq!(report.object, format!("{}/{config}/enam", p.service.name));
    assert_eq!(report.hint, "enam");
    let verdict = c
        .report(at(10), Coordinator::parse(&report.body).unwrap())
        .unwrap();
    let heard = e.fleet_heard(at(10), Ok(&serde_json::to_string(&verdict).unwrap()));
    assert_eq!(heard.log, None);
    let point = heard.point.expect("the first verdict is news");
    assert_eq!(point.blobs[1], crate::metrics::FLEET_POINT);
    assert_eq!(
        (point.blobs[2].as_str(), point.blobs[3].as_str()),
        ("verdict", "CLOSED")
    );
    assert_eq!(point.doubles[1], 0.0, "never counted as a degraded answer");
    // The same verdict again: nothing to say.
    let r = run(&mut e, 11_000, "/recommendations/alice", ok());
    let v = c
        .report(
            at(11_010),
            Coordinator::parse(&report_of(&r).unwrap().body).unwrap(),
        )
        .unwrap();
    assert_eq!(
        e.fleet_heard(at(11_010), Ok(&serde_json::to_string(&v).unwrap())),
        FleetHeard::default()
    );
    // A report failed: a log line naming the alert; the coordinator lost (two in a row): one
    // point, not one per failure.
    let r = run(&mut e, 21_000, "/recommendations/alice", ok());
    assert!(report_of(&r).is_some());
    let lost = e.fleet_heard(at(21_500), Err("no answer within 500 ms"));
    let line: Value = serde_json::from_str(lost.log.as_deref().unwrap()).unwrap();
    assert_eq!(line["event"], "breaker_coordinator_failed");
    assert_eq!(line["alert"], "ALERT_BREAKER_COORDINATOR_LOST");
    assert!(
        lost.point.is_none(),
        "one report lost is no coordinator lost"
    );
    // Sent again at once; failing again, the coordinator is lost (the point), and the global
    // coordinator stands in for the region (`member::failover`), at once too.
    let retry = lost.again.expect("a failed report is sent again at once");
    assert!(retry.object.ends_with("/enam"), "{}", retry.object);
    let again = e.fleet_heard(at(22_000), Err("HTTP 500: down"));
    assert!(again.log.is_some());
    assert_eq!(again.point.unwrap().blobs[2], "lost");
    let global = again.again.expect("the global coordinator stands in");
    assert!(global.object.ends_with("/global") && global.hint.is_empty());
    // Back: "regained", from the global coordinator's answer.
    let v = c
        .report(at(22_100), Coordinator::parse(&global.body).unwrap())
        .unwrap();
    let back = e.fleet_heard(at(22_100), Ok(&serde_json::to_string(&v).unwrap()));
    assert_eq!(back.point.unwrap().blobs[2], "regained");
    assert!(back.again.is_none(), "an answer sends nothing again");
    // An answer that is no verdict is a failure too.
    let r = run(&mut e, 34_000, "/recommendations/alice", ok());
    assert!(report_of(&r).is_some());
    let bad = e.fleet_heard(at(34_010), Ok("<html>"));
    assert!(bad.log.unwrap().contains("no verdict"));
}

#[test]
fn an_isolate_scope_engine_reports_nothing_and_ignores_answers() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    first_report_at_once(&mut e);
    let r = run(&mut e, 0, "/recommendations/alice", ok());
    assert_eq!(r.fleet, Vec::new());
    assert_eq!(e.fleet_heard(at(5), Err("x")), FleetHeard::default());
}

/// The driver hands the engine a request's `cf` until its fleet member has picked a region:
/// the first one picks it for good, and the reports go to that region's coordinator, with
/// its location hint. An engine with no fleet member wants no `cf`.
#[test]
fn the_first_requests_cf_picks_the_region_whose_coordinator_the_isolate_reports_to() {
    use crate::breaker::fleet::place::{Cf, Region};
    let p = fleet_policy();
    let b = bake(p.clone());
    let mut e = Engine::new(&b).unwrap();
    first_report_at_once(&mut e);
    assert!(e.wants_place());
    e.locate(Some(&Region::Apac.sample_cf()));
    assert!(!e.wants_place());
    e.locate(Some(&Cf {
        continent: Some("EU"),
        ..Cf::default()
    }));
    let r = run(&mut e, 0, "/recommendations/alice", ok());
    let report = report_of(&r).expect("the first answer reports");
    assert!(report.object.ends_with("/apac"), "{}", report.object);
    assert_eq!(report.hint, "apac");
    let status = e.health.member().unwrap().status(at(5));
    assert_eq!(status["region"], "apac");

    let plain = bake(seed_policy());
    let mut e = Engine::new(&plain).unwrap();
    assert!(!e.wants_place(), "isolate scope: no coordinator, no region");
}

fn coordinator(p: &crate::policy::Policy) -> Coordinator {
    let BreakerCfg::Rate(rate) = &p.breaker else {
        unreachable!()
    };
    Coordinator::new(
        &p.service.name,
        &settings_hash(rate, "p"),
        rate.clone(),
        1_000,
    )
}

/// A coordinator whose fleet another isolate's window opened at `t` (every call timed out).
fn opened_coordinator(p: &crate::policy::Policy, t: u64) -> Coordinator {
    let BreakerCfg::Rate(rate) = &p.breaker else {
        unreachable!()
    };
    let mut c = coordinator(p);
    let busy = crate::breaker::fleet::Report {
        service: p.service.name.clone(),
        config: settings_hash(rate, "p"),
        isolate: "busy".into(),
        seq: 1,
        buckets: vec![crate::breaker::fleet::Counts {
            epoch: at(t).0 / (rate.window_ms / 10),
            calls: 40,
            failures: 40,
            timeouts: 40,
            slow: 40,
            ..Default::default()
        }],
        period_ms: 0,
    };
    let v = c.report(at(t), busy).unwrap();
    assert_eq!(v.mode, crate::breaker::fleet::FleetMode::Open);
    c
}

/// An isolate that reported at 0 (the fleet closed), its watch answered at its hold's end:
/// idle 40 s later, nothing could have told it of the fleet.
fn in_the_dark<'b>(b: &'b crate::bake::Bake, p: &crate::policy::Policy) -> Engine<'b> {
    let mut calm = coordinator(p);
    let mut e = Engine::new(b).unwrap();
    first_report_at_once(&mut e);
    let (r, asked) = run_asking(&mut e, 0, "/recommendations/alice");
    assert_eq!(asked, None, "a new isolate does not ask");
    let report = report_of(&r).expect("the first answer reports");
    let watch = watch_of(&r).expect("and watches");
    let v = calm
        .report(at(10), Coordinator::parse(&report.body).unwrap())
        .unwrap();
    e.fleet_heard(at(20), Ok(&serde_json::to_string(&v).unwrap()));
    let held = calm.watch(at(29_010), &Coordinator::parse_watch(&watch.body).unwrap());
    assert!(held.is_ok());
    let v = calm.verdict(at(29_010));
    e.fleet_watched(at(29_020), Ok(&serde_json::to_string(&v).unwrap()));
    e
}

fn ask_of(out: &Output<'_>) -> Option<FleetReport> {
    out.commands.iter().find_map(|c| match c {
        Command::Ask(r) => Some(r.clone()),
        _ => None,
    })
}

/// An isolate in the dark (idle past its watches) asks the coordinator with its request's
/// first call; the fleet's opening heard while the call is out cuts the call, and the request
/// is answered from the cascade at once — the call counted as no evidence. A request while
/// the verdict is in force does not ask. A close heard while the call is out cuts nothing.
#[test]
fn an_isolate_in_the_dark_asks_with_its_first_call_and_an_opening_heard_cuts_the_call() {
    let p = fleet_policy();
    let b = bake(p.clone());
    let mut c = opened_coordinator(&p, 40_000);
    let mut e = in_the_dark(&b, &p);
    let (mut f, out) = begin(&mut e, 40_001, 2);
    let ask = ask_of(&out).expect("an isolate in the dark asks with its first call");
    assert_eq!(ask.path, "/report");
    let (io, _) = fetches(&out)[0];
    // The model hangs; the coordinator answers 20 ms later: the fleet is open.
    let v = c
        .report(at(40_010), Coordinator::parse(&ask.body).unwrap())
        .unwrap();
    e.fleet_heard(at(40_021), Ok(&serde_json::to_string(&v).unwrap()));
    let out = e.step(&mut f, at(40_021), Input::Asked);
    assert!(
        out.commands.contains(&Command::Abort { io }),
        "the call is cut: {out:?}"
    );
    let r = finish(&mut e, &mut f, 40_021, out, &Observed::TimedOut);
    assert_eq!(r.header("X-Degraded"), Some("true"));
    assert_eq!(r.header("X-Degraded-Reason"), Some("BREAKER_OPEN"));
    let line = log(&r);
    assert!(line["latency_ms"].as_u64().unwrap() < 45, "{line}");
    assert_eq!(line["calls"][0]["end"], "abandoned", "{line}");
    assert!(line["notes"].to_string().contains("FLEET_OPENED"), "{line}");
    assert_eq!(
        e.health.member().unwrap().status(at(40_030))["decided_by"],
        "fleet"
    );
    // The verdict is in force: the next request neither asks nor calls.
    let (_, out) = begin(&mut e, 40_040, 3);
    assert_eq!(ask_of(&out), None);
    assert!(fetches(&out).is_empty());

    // A close heard while the call is out cuts nothing: the model's answer is the answer.
    let mut calm = coordinator(&p);
    let mut e = in_the_dark(&b, &p);
    let (mut f, out) = begin(&mut e, 40_001, 2);
    let ask = ask_of(&out).expect("in the dark");
    let v = calm
        .report(at(40_010), Coordinator::parse(&ask.body).unwrap())
        .unwrap();
    e.fleet_heard(at(40_021), Ok(&serde_json::to_string(&v).unwrap()));
    let after = e.step(&mut f, at(40_021), Input::Asked);
    assert!(!after
        .commands
        .iter()
        .any(|c| matches!(c, Command::Abort { .. })));
    let (io, _) = fetches(&out)[0];
    let done = e.step(&mut f, at(40_026), fetched(io, ok()));
    assert_eq!(done.reply().unwrap().status, 200);
    assert_eq!(done.reply().unwrap().header("X-Degraded"), Some("false"));
}
