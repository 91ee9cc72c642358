//! [F-SCOPE] A fleet-scoped engine: the report an answer carries, the verdict it applies,
//! and the log line and data point each change of what it knows of the fleet brings.

use super::*;
use crate::breaker::fleet::{settings_hash, Coordinator};
use crate::breaker::member::object_name;
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

#[test]
fn an_answer_carries_the_report_and_the_verdict_changes_are_points_and_log_lines() {
    let p = fleet_policy();
    let BreakerCfg::Rate(rate) = &p.breaker else {
        unreachable!()
    };
    let config = settings_hash(rate);
    let mut c = Coordinator::new(&p.service.name, &config, rate.clone(), 1_000);
    let b = bake(p.clone());
    let mut e = Engine::new(&b).unwrap();
    let r = run(&mut e, 0, "/recommendations/alice", ok());
    assert_eq!(r.status, 200);
    let report = r.report.expect("the first answer reports");
    assert_eq!(report.binding, "BREAKER_COORDINATOR");
    assert_eq!(report.object, object_name(&p.service.name, &config));
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
            Coordinator::parse(&r.report.unwrap().body).unwrap(),
        )
        .unwrap();
    assert_eq!(
        e.fleet_heard(at(11_010), Ok(&serde_json::to_string(&v).unwrap())),
        FleetHeard::default()
    );
    // The coordinator lost: a log line naming the alert, and one point; not one per failure.
    let r = run(&mut e, 21_000, "/recommendations/alice", ok());
    assert!(r.report.is_some());
    let lost = e.fleet_heard(at(21_500), Err("no answer within 500 ms"));
    let line: Value = serde_json::from_str(lost.log.as_deref().unwrap()).unwrap();
    assert_eq!(line["event"], "breaker_coordinator_failed");
    assert_eq!(line["alert"], "ALERT_BREAKER_COORDINATOR_LOST");
    assert_eq!(lost.point.unwrap().blobs[2], "lost");
    let r = run(&mut e, 22_600, "/recommendations/alice", ok());
    let again = e.fleet_heard(at(22_700), Err("HTTP 500: down"));
    assert!(r.report.is_some() && again.log.is_some() && again.point.is_none());
    // Back: "regained".
    let r = run(&mut e, 23_800, "/recommendations/alice", ok());
    let v = c
        .report(
            at(23_810),
            Coordinator::parse(&r.report.unwrap().body).unwrap(),
        )
        .unwrap();
    let back = e.fleet_heard(at(23_810), Ok(&serde_json::to_string(&v).unwrap()));
    assert_eq!(back.point.unwrap().blobs[2], "regained");
    // An answer that is no verdict is a failure too.
    let r = run(&mut e, 34_000, "/recommendations/alice", ok());
    assert!(r.report.is_some());
    let bad = e.fleet_heard(at(34_010), Ok("<html>"));
    assert!(bad.log.unwrap().contains("no verdict"));
}

#[test]
fn an_isolate_scope_engine_reports_nothing_and_ignores_answers() {
    let b = bake(seed_policy());
    let mut e = Engine::new(&b).unwrap();
    let r = run(&mut e, 0, "/recommendations/alice", ok());
    assert_eq!(r.report, None);
    assert_eq!(e.fleet_heard(at(5), Err("x")), FleetHeard::default());
}
