//! The fleet driver on a small fleet: thin isolates, both scopes, the coordinator away.

use super::*;
use crate::simulate::scenario::{self, RawScenario};
use crate::simulate::{RequestResult, Source};
use understudy_core::breaker::fleet::FleetMode;
use understudy_core::policy::RateBreaker;
use understudy_core::policy::{Breaker, Scope};

/// The sample policy with seed 000's rules on a short clock: a 10 s window, 5 s hold-down.
fn policy() -> Policy {
    let mut p = crate::fixtures::sample_policy();
    p.breaker = Breaker::Rate(RateBreaker {
        window_ms: 10_000,
        failure_ratio: 0.15,
        min_calls: 20,
        slow_call_p95_ms: 45,
        hold_down_ms: 5_000,
        probe_fraction: 0.02,
        probe_min_calls: 20,
        probe_success_ratio: 0.995,
        probe_p95_ms: 40,
        failed_probe_hold_ms: 10_000,
        scope: Scope::Isolate,
    });
    p.storm = None;
    p
}

/// 200 req/s for 40 s; the model slow past the deadline from 2 s to 12 s.
fn scenario(p: &Policy, fleet: &str) -> Scenario {
    let raw: RawScenario = toml::from_str(&format!(
        "name = \"t\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 8000\nrate = 200\n\
         [params]\ncategory_id = [\"audio\", \"bags\", \"kitchen\"]\n\
         [model]\nlatency = \"20ms\"\n[[model.phase]]\nfrom = \"2s\"\nto = \"12s\"\nfault = \"slow\"\nlatency = \"500ms\"\n\
         [fleet]\n{fleet}\n"
    ))
    .expect("scenario");
    scenario::build(raw, p).expect("valid")
}

fn both(p: &Policy, sc: &Scenario) -> (Figures, Figures, FleetRun) {
    let spec = sc.fleet.clone().unwrap();
    let (onset, end) = fault_span(sc).unwrap();
    assert_eq!((onset, end), (2_000, 12_000));
    let catalog = crate::fixtures::sample_catalog();
    let iso = run(&scoped(p, false, &spec).unwrap(), Some(&catalog), sc, &spec).unwrap();
    let fl = run(&scoped(p, true, &spec).unwrap(), Some(&catalog), sc, &spec).unwrap();
    (
        figures("isolate", &iso, onset, end),
        figures("fleet", &fl, onset, end),
        fl,
    )
}

#[test]
fn forty_thin_isolates_recover_on_the_fleets_probes_and_not_on_their_own() {
    let p = policy();
    let sc = scenario(&p, "isolates = 40\nreport_delay = \"10ms\"");
    let (iso, fleet, run) = both(&p, &sc);
    // 5 req/s an isolate: 20 calls of its own take 4 s; the fleet's take a fraction of one.
    assert!(fleet.degrade_s.unwrap() <= 2.5, "{fleet:?}");
    assert!(iso.degrade_s.unwrap() > fleet.degrade_s.unwrap(), "{iso:?}");
    // 2% of 5 req/s is one probe in 10 s: alone, 20 probes take 200 s; pooled, 5 s.
    assert_eq!(iso.recover_s, None, "{iso:?}");
    assert_eq!(iso.never_recovered, 40);
    assert!(fleet.recover_s.unwrap() <= 10.0, "{fleet:?}");
    assert_eq!(fleet.never_recovered, 0);
    assert!(
        fleet.outage_model_calls < iso.outage_model_calls,
        "{fleet:?} {iso:?}"
    );
    assert!(fleet.reports > 0 && fleet.report_failures == 0);
    assert_eq!(iso.reports, 0, "isolate scope sends no report");
    // Every answer is the policy's: no 5xx.
    assert!(run.results.iter().all(|r| r.status < 500), "no 5xx");
}

/// Every isolate's steps and the coordinator's events go in one time order: a request the
/// breaker kept from the model met a breaker not closed. (An isolate that skipped a stale
/// timer once ran ahead to its next arrival, past the coordinator's answers due before it,
/// and its requests were recorded as meeting the breaker it had before them.)
#[test]
fn a_request_kept_from_the_model_met_a_breaker_not_closed() {
    let p = policy();
    let sc = scenario(&p, "isolates = 200");
    let (_, _, run) = both(&p, &sc);
    let wrong: Vec<_> = run
        .results
        .iter()
        .filter(|r| (2_000..12_000).contains(&r.arrival_ms) && r.model_attempts == 0)
        .filter(|r| r.mode == "PRIMARY_HEALTHY")
        .map(|r| (r.index, r.arrival_ms))
        .collect();
    assert_eq!(wrong, Vec::new());
}

/// 200 isolates at 1 req/s each, warm (20 s before the fault): the watches bring the
/// opening to isolates between their requests, so the traffic degrades as soon as the fleet
/// opens; without them an isolate's first request after the opening still called the model
/// (1 s later on average: 1% of those came 4.6 s later).
#[test]
fn watches_bring_the_opening_to_thin_isolates() {
    let p = policy();
    let raw: RawScenario = toml::from_str(
        "name = \"t\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 9000\nrate = 200\n\
         [params]\ncategory_id = [\"audio\", \"bags\", \"kitchen\"]\n\
         [model]\nlatency = \"20ms\"\n[[model.phase]]\nfrom = \"20s\"\nto = \"30s\"\nfault = \"slow\"\nlatency = \"500ms\"\n\
         [fleet]\nisolates = 200\nreport_delay = \"10ms\"\n",
    )
    .expect("scenario");
    let sc = scenario::build(raw, &p).expect("valid");
    let spec = sc.fleet.clone().unwrap();
    let catalog = crate::fixtures::sample_catalog();
    let run = run(
        &scoped(&p, true, &spec).unwrap(),
        Some(&catalog),
        &sc,
        &spec,
    )
    .unwrap();
    let fleet = figures("fleet", &run, 20_000, 30_000);
    assert!(
        run.watches > 0 && run.pushed > 0,
        "{} {}",
        run.watches,
        run.pushed
    );
    let opened = fleet.fleet_opened_s.unwrap();
    let degraded = fleet.degrade_s.unwrap();
    assert!(
        degraded <= opened + 0.5,
        "the traffic degraded {degraded} s after the onset, the fleet opened at {opened} s"
    );
    assert!(fleet.fleet_closed_s.is_some(), "{fleet:?}");
}

#[test]
fn with_the_coordinator_failing_isolates_fall_back_to_their_own_evidence() {
    let p = policy();
    for how in ["error", "hang"] {
        let sc = scenario(
            &p,
            &format!("isolates = 40\ncoordinator_down = {{ from = \"0s\", to = \"60s\", how = \"{how}\", coordinator = \"all\" }}"),
        );
        let (iso, fleet, run) = both(&p, &sc);
        assert_eq!(
            fleet.report_failures, fleet.reports,
            "{how}: every report failed"
        );
        // Isolate scope in all but name: the same degrade time as isolate scope.
        assert_eq!(fleet.degrade_s, iso.degrade_s, "{how}");
        assert!(run.results.iter().all(|r| r.status < 500), "{how}: no 5xx");
        let fallbacks = run
            .results
            .iter()
            .filter(|r| matches!(r.source, Source::Tier(_)))
            .count();
        assert!(
            fallbacks > 1_000,
            "{how}: degraded answers served: {fallbacks}"
        );
    }
}

/// The regions' coordinators hung from the start: after two failures in a row each isolate
/// reports to the global one, which decides for the fleet as its region's would have.
#[test]
fn the_global_coordinator_stands_in_for_hung_regions() {
    let p = policy();
    let sc = scenario(
        &p,
        "isolates = 40\ncoordinator_down = { from = \"0s\", to = \"60s\", how = \"hang\" }",
    );
    let (iso, fleet, run) = both(&p, &sc);
    assert!(fleet.report_failures < fleet.reports / 2, "{fleet:?}");
    let global = run
        .coordinators
        .last()
        .expect("the global coordinator's load");
    assert!(global.requests > 0, "{global:?}");
    assert!(fleet.fleet_opened_s.is_none(), "no region's verdict moved");
    assert!(
        fleet.degrade_s.unwrap() < iso.degrade_s.unwrap(),
        "fleet {:?} against isolate {:?}",
        fleet.degrade_s,
        iso.degrade_s
    );
}

#[test]
fn a_coordinator_restarted_mid_incident_rebuilds_from_reports() {
    let p = policy();
    let sc = scenario(
        &p,
        "isolates = 40\ncoordinator_down = { from = \"8s\", to = \"8s\", how = \"reset\" }",
    );
    let (_, fleet, _) = both(&p, &sc);
    assert!(fleet.recover_s.unwrap() <= 10.0, "{fleet:?}");
    assert_eq!(fleet.never_recovered, 0);
}

#[test]
fn the_split_is_uniform_or_skewed_as_asked() {
    let n = 10;
    let mut counts = vec![0u32; n];
    let u = Splitter::new(Split::Uniform, n);
    for i in 0..10_000 {
        counts[u.isolate(i)] += 1;
    }
    assert!(
        counts.iter().all(|c| (900..1_100).contains(c)),
        "{counts:?}"
    );
    let z = Splitter::new(Split::Zipf(1.0), n);
    let mut counts = vec![0u32; n];
    for i in 0..10_000 {
        counts[z.isolate(i)] += 1;
    }
    // 1/H(10) = 34% to the first, 3.4% to the last.
    assert!((3_100..3_700).contains(&counts[0]), "{counts:?}");
    assert!((200..500).contains(&counts[9]), "{counts:?}");
}

#[test]
fn a_bad_fleet_table_names_what_is_wrong() {
    let raw = |t: &str| toml::from_str::<RawFleet>(t).unwrap();
    assert!(spec(&raw("isolates = 0")).unwrap_err().contains("isolates"));
    assert!(spec(&raw("isolates = 3\nsplit = \"pareto\""))
        .unwrap_err()
        .contains("split"));
    assert!(spec(&raw("isolates = 3\nreport_loss = 1.5"))
        .unwrap_err()
        .contains("report_loss"));
    let e = spec(&raw(
        "isolates = 3\ncoordinator_down = { from = \"5s\", to = \"1s\", how = \"error\" }",
    ));
    assert!(e.unwrap_err().contains("after"));
    assert!(toml::from_str::<RawFleet>("isolates = 3\nsplitt = \"zipf\"").is_err());
    let consecutive = crate::fixtures::sample_policy();
    assert!(scoped(&consecutive, true, &FleetSpec::uniform(2))
        .unwrap_err()
        .contains("rate"));
}

/// A synthetic run: isolate 0 busy (a request every 10 ms, its breaker open from 500 ms
/// after the onset at 40 s, when the fleet opened), the others with the requests given.
fn synthetic(others: &[(u32, u64, &'static str)]) -> FleetRun {
    let mut arrivals: Vec<(u32, u64, &'static str)> = (0..6_000u64)
        .map(|i| {
            let t = i * 10;
            (
                0,
                t,
                if t < 40_500 {
                    "PRIMARY_HEALTHY"
                } else {
                    "DEGRADED_FALLBACK"
                },
            )
        })
        .collect();
    arrivals.extend_from_slice(others);
    let results = arrivals
        .iter()
        .enumerate()
        .map(|(i, (_, t, mode))| RequestResult {
            index: i as u64,
            arrival_ms: *t,
            latency_ms: 1,
            status: 200,
            source: Source::Origin,
            reason: None,
            model_attempts: 1,
            mode,
            model_alone_ok: true,
        })
        .collect();
    FleetRun {
        results,
        isolate_of: arrivals.iter().map(|a| a.0).collect(),
        changes: vec![Vec::new(); 3],
        model_calls: 0,
        outage_calls: 0,
        reports: 0,
        report_failures: 0,
        watches: 0,
        pushed: 0,
        fleet_moves: vec![(40_500, FleetMode::Open)],
        coordinators: Vec::new(),
        struck: vec![true; 3],
    }
}

/// A request after the fleet opened, at an isolate with no request from 29.5 s before the
/// opening until then, is out of reach: it breaks the strict rule but not the rule within
/// reach, and the floor shows it. One at an isolate idle as long but with a request in the
/// 29.5 s before the opening (a watch could have told it) is in reach, and breaks both. `unmet`
/// accepts the first (also when it falls in the fault's last slot) and not the second.
#[test]
fn the_time_to_degrade_separates_the_traffic_nothing_could_reach() {
    let p = policy();
    let sc = scenario(&p, "isolates = 3\ndegrade_within = \"3s\"");
    let out_of_reach = [(1, 0, "PRIMARY_HEALTHY"), (1, 45_000, "PRIMARY_HEALTHY")];
    let f = figures("fleet", &synthetic(&out_of_reach), 40_000, 50_000);
    assert_eq!(f.degrade_s, Some(5.5), "{f:?}");
    assert_eq!(f.degrade_floor_s, Some(5.5));
    assert_eq!(f.degrade_in_reach_s, Some(0.75));
    assert_eq!((f.out_of_reach, f.out_of_reach_closed), (1, 1));
    assert!(unmet(&sc, &f).is_empty(), "{:?}", unmet(&sc, &f));

    // Idle 34 s, but it had a request 28.5 s before the opening.
    let mut told = out_of_reach.to_vec();
    told.extend([
        (2, 12_000, "PRIMARY_HEALTHY"),
        (2, 46_000, "PRIMARY_HEALTHY"),
    ]);
    let g = figures("fleet", &synthetic(&told), 40_000, 50_000);
    assert_eq!(g.degrade_s, Some(6.5), "{g:?}");
    assert_eq!(g.degrade_floor_s, Some(5.5));
    assert_eq!(g.degrade_in_reach_s, Some(6.5));
    assert_eq!(g.out_of_reach, 1);
    let missed = unmet(&sc, &g);
    assert_eq!(missed.len(), 1);
    assert!(
        missed[0].contains("within reach 6.50 s, floor 5.50 s"),
        "{missed:?}"
    );

    // Out of reach in the last slot: the strict rule and the floor never hold; met.
    let last = [(1, 0, "PRIMARY_HEALTHY"), (1, 49_900, "PRIMARY_HEALTHY")];
    let h = figures("fleet", &synthetic(&last), 40_000, 50_000);
    assert_eq!((h.degrade_s, h.degrade_floor_s), (None, None), "{h:?}");
    assert!(unmet(&sc, &h).is_empty(), "{:?}", unmet(&sc, &h));

    // No fleet opening (isolate scope): no reach, no floor.
    let mut run = synthetic(&out_of_reach);
    run.fleet_moves.clear();
    let i = figures("isolate", &run, 40_000, 50_000);
    assert_eq!((i.degrade_in_reach_s, i.degrade_floor_s), (None, None));
    assert_eq!(i.out_of_reach, 0);
}

/// A fleet of one (issue 34, point 5): the coordinator's verdict stands on the lone
/// isolate's reports alone, a report late, so its own breaker decides — fleet scope
/// degrades and recovers when isolate scope does, to the millisecond. (Before, the verdict
/// led: the hold-down counted from the report that opened the fleet and the probing and
/// closing heard a report later made it recover later.)
#[test]
fn one_isolate_in_fleet_scope_degrades_and_recovers_no_later_than_in_isolate_scope() {
    let p = policy();
    let sc = scenario(&p, "isolates = 1\nreport_delay = \"20ms\"");
    let (iso, fleet, run) = both(&p, &sc);
    assert!(
        fleet.reports > 0 && fleet.fleet_opened_s.is_some(),
        "{fleet:?}"
    );
    assert!(
        fleet.fleet_closed_s.is_some(),
        "the fleet closes with it: {fleet:?}"
    );
    let pairs = [
        (fleet.degrade_s, iso.degrade_s),
        (fleet.recover_s, iso.recover_s),
        (
            fleet.isolate_degrade_slowest_s,
            iso.isolate_degrade_slowest_s,
        ),
        (
            fleet.isolate_recover_slowest_s,
            iso.isolate_recover_slowest_s,
        ),
    ];
    for (f, i) in pairs {
        let (f, i) = (f.expect("fleet"), i.expect("isolate"));
        assert!(f <= i, "fleet {f} s, isolate {i} s\n{fleet:?}\n{iso:?}");
    }
    assert!(run.results.iter().all(|r| r.status < 500), "no 5xx");
}

/// `--regions R` (simulate's and the drill's): the first R regions, equal shares, isolate k in
/// region k mod R — the drill stands its isolate i in region i mod R — and bad counts refused
/// with the flag's name.
#[test]
fn regions_flag_spreads_isolates_round_robin_over_the_first_regions() {
    let spec = FleetSpec::uniform(8).with_regions(2).unwrap();
    let names: Vec<&str> = spec.regions.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["enam", "weur"]);
    assert!(spec.regions.iter().all(|(_, s)| (*s - 0.5).abs() < 1e-12));
    assert_eq!(regions_of(&spec, 5), [0, 1, 0, 1, 0]);
    let e = FleetSpec::uniform(8).with_regions(10).unwrap_err();
    assert!(
        e.starts_with("--regions 10: a whole number from 1 to 9"),
        "{e}"
    );
    let e = FleetSpec::uniform(2).with_regions(3).unwrap_err();
    assert!(e.contains("more regions than the 2 isolates"), "{e}");
    assert!(FleetSpec::uniform(2).with_regions(0).is_err());
}

#[test]
fn a_fault_in_one_region_opens_that_region_and_no_other() {
    let p = policy();
    let raw: RawScenario = toml::from_str(
        "name = \"t\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 10000\nrate = 200\n\
         [params]\ncategory_id = [\"audio\", \"bags\", \"kitchen\"]\n\
         [model]\nlatency = \"20ms\"\n[[model.phase]]\nfrom = \"12s\"\nto = \"22s\"\nfault = \"slow\"\nlatency = \"500ms\"\nregions = [\"apac\"]\n\
         [fleet]\nisolates = 40\nreport_delay = \"10ms\"\n[fleet.regions]\nenam = 50\napac = 50\n",
    )
    .expect("scenario");
    let sc = scenario::build(raw, &p).expect("valid");
    // A window's lead-in: every region's coordinator has heard its isolates when it begins.
    let spec = sc.fleet.clone().unwrap();
    let (onset, end) = fault_span(&sc).unwrap();
    assert_eq!((onset, end), (12_000, 22_000));
    let catalog = crate::fixtures::sample_catalog();
    let iso = run(
        &scoped(&p, false, &spec).unwrap(),
        Some(&catalog),
        &sc,
        &spec,
    )
    .unwrap();
    let iso = figures("isolate", &iso, onset, end);
    let run = run(
        &scoped(&p, true, &spec).unwrap(),
        Some(&catalog),
        &sc,
        &spec,
    )
    .unwrap();
    let fleet = figures("fleet", &run, onset, end);
    // The figures are apac's: its traffic degrades and comes back…
    assert!(fleet.degrade_s.unwrap() <= 2.5, "{fleet:?}");
    assert!(fleet.recover_s.is_some(), "{fleet:?}");
    assert!(iso.degrade_s.is_some(), "{iso:?}");
    // …while enam's model was healthy, and enam's breakers stayed closed.
    let enam = run.struck.iter().filter(|s| !**s).count();
    assert!(
        (10..30).contains(&enam),
        "about half the isolates are enam's: {enam}"
    );
    assert!(fleet.elsewhere_requests > 3_000, "{fleet:?}");
    assert_eq!(fleet.elsewhere_not_closed, 0, "{fleet:?}");
    assert_eq!(fleet.elsewhere_worst_slot_share, 0.0);
    assert!(unmet(&sc, &fleet).is_empty(), "{:?}", unmet(&sc, &fleet));
    // Only apac's requests met the fault: enam's answered from the model throughout.
    for r in run
        .results
        .iter()
        .filter(|r| !run.struck[run.isolate_of[r.index as usize] as usize])
    {
        assert_eq!(r.source, Source::Origin, "{r:?}");
    }
}

#[test]
fn a_phase_names_only_the_fleets_regions() {
    let p = policy();
    let bad = |phase: &str, fleet: &str| {
        let raw: RawScenario = toml::from_str(&format!(
            "name = \"t\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 100\nrate = 10\n\
             [params]\ncategory_id = [\"audio\"]\n[model]\nlatency = \"20ms\"\n\
             [[model.phase]]\nfrom = \"2s\"\nto = \"5s\"\nfault = \"slow\"\n{phase}\n[fleet]\nisolates = 4\n{fleet}"
        ))
        .expect("toml");
        scenario::build(raw, &p).unwrap_err()
    };
    let e = bad("regions = [\"apac\"]", "");
    assert!(
        e.contains("model.phase[0].regions names `apac`") && e.contains("no `[fleet] regions`"),
        "{e}"
    );
    let e = bad(
        "regions = [\"mars\"]",
        "[fleet.regions]\nenam = 1\napac = 1\n",
    );
    assert!(
        e.contains("`mars`, not a region of `[fleet] regions` (apac, enam)"),
        "{e}"
    );
    let e = bad("regions = []", "");
    assert!(e.contains("model.phase[0].regions is empty"), "{e}");
}

/// A scenario's `[fleet]` took `report_interval` of 0 ms or a day, and a `report_delay` of
/// 10⁹ days (whose microseconds overflowed), outside what the policy's keys allow; a
/// `coordinator_down` reset at 10⁹ days overflowed the same way, and `degrade_within` and
/// `recover_within` took `0ms` or any length at all.
#[test]
fn the_fleet_tables_durations_share_the_policys_ranges() {
    let raw = |t: &str| toml::from_str::<RawFleet>(&format!("isolates = 3\n{t}")).unwrap();
    for (t, says) in [
        (
            "report_interval = \"0ms\"",
            "[fleet] report_interval: `0ms` is outside its valid range 100ms..=1m (the range of the policy's `breaker.report_interval`)",
        ),
        (
            "report_interval = \"1d\"",
            "[fleet] report_interval: `1d` is outside its valid range 100ms..=1m",
        ),
        (
            "report_delay = \"1000000000d\"",
            "[fleet] report_delay: `1000000000d` is outside its valid range 0ms..=250ms",
        ),
        (
            "report_delay = \"251ms\"",
            "[fleet] report_delay: `251ms` is outside its valid range 0ms..=250ms",
        ),
        (
            "global_delay = \"2m\"",
            "[fleet] global_delay: `2m` is outside its valid range 0ms..=1m",
        ),
        (
            "coordinator_down = { from = \"1000000000d\", to = \"1000000001d\", how = \"error\" }",
            "[fleet] coordinator_down.from: `1000000000d` is outside its valid range 0ms..=1d (a time after the scenario's start)",
        ),
        (
            "coordinator_down = { from = \"10s\", to = \"2d\", how = \"hang\" }",
            "[fleet] coordinator_down.to: `2d` is outside its valid range 0ms..=1d",
        ),
        (
            "degrade_within = \"0ms\"",
            "[fleet] degrade_within: `0ms` is outside its valid range 1ms..=1d",
        ),
        (
            "recover_within = \"1000000000d\"",
            "[fleet] recover_within: `1000000000d` is outside its valid range 1ms..=1d",
        ),
    ] {
        let e = spec(&raw(t)).unwrap_err();
        assert!(e.starts_with(says), "{t}: {e}");
    }
    // The edges of each range are valid.
    for t in [
        "report_interval = \"100ms\"",
        "report_interval = \"1m\"",
        "report_delay = \"0ms\"",
        "report_delay = \"250ms\"",
        "global_delay = \"1m\"",
        "coordinator_down = { from = \"0ms\", to = \"1d\", how = \"error\" }",
        "degrade_within = \"1ms\"",
        "recover_within = \"1d\"",
    ] {
        assert!(spec(&raw(t)).is_ok(), "{t}");
    }
    // Over a tenth of the policy's 10 s window: what `check` refuses in the policy.
    let p = policy();
    let e = spec(&raw("report_interval = \"2s\""))
        .unwrap()
        .against(&p)
        .unwrap_err();
    assert!(
        e.contains("over a tenth of the policy's `breaker.window` (10s)")
            && e.contains("ERR_FLEET_REPORT_INTERVAL")
            && e.contains("use at most 1s"),
        "{e}"
    );
    assert!(spec(&raw("report_interval = \"1s\""))
        .unwrap()
        .against(&p)
        .is_ok());
}

/// The refusal names the scenario's file and the key.
#[test]
fn a_scenario_with_a_fleet_duration_out_of_range_is_refused_naming_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.toml");
    std::fs::write(
        &path,
        "name = \"t\"\nstart = \"2026-11-30T12:00:00Z\"\nrequests = 100\nrate = 10\n\
         [params]\ncategory_id = [\"audio\"]\n[model]\nlatency = \"20ms\"\n\
         [fleet]\nisolates = 4\nreport_interval = \"0ms\"\n",
    )
    .unwrap();
    let e = scenario::load(&path, &policy()).unwrap_err();
    assert!(
        e.starts_with(&format!(
            "{}: [fleet] report_interval: `0ms` is outside its valid range",
            path.display()
        )),
        "{e}"
    );
}

/// As [`synthetic`], but the fleet closes 55 s after the start (5 s after the fault's end at
/// 50 s): isolate 0's breaker is open from 40.5 s to 55 s.
fn synthetic_close(others: &[(u32, u64, &'static str)]) -> FleetRun {
    let mut run = synthetic(others);
    for r in &mut run.results {
        if run.isolate_of[r.index as usize] == 0 && r.arrival_ms >= 55_000 {
            r.mode = "PRIMARY_HEALTHY";
        }
    }
    run.fleet_moves.push((55_000, FleetMode::Closed));
    run
}

/// The time to recover has its reach too: a request after the fleet's close, at an isolate
/// with no request from 29.5 s before the close until then, could not hear the close before
/// it came (it meets the opening it was last told of). It breaks the strict rule, not the
/// rule within reach; one at an isolate that had a request in those 29.5 s breaks both.
#[test]
fn the_time_to_recover_separates_the_traffic_the_close_could_not_reach() {
    let p = policy();
    let sc = scenario(&p, "isolates = 3\nrecover_within = \"10s\"");
    // Isolate 1: a request at 10 s, the next at 70 s, met open (its last word was the opening).
    let stale = [
        (1, 10_000, "PRIMARY_HEALTHY"),
        (1, 70_000, "DEGRADED_FALLBACK"),
    ];
    let mut run = synthetic_close(&stale);
    run.results.last_mut().unwrap().source = Source::Tier("user".into());
    let f = figures("fleet", &run, 40_000, 50_000);
    assert_eq!(f.recover_in_reach_s, Some(5.25), "{f:?}");
    assert_eq!(
        f.recover_s, None,
        "never: the last slot holds the stale request"
    );
    assert_eq!(
        (f.after_close_out_of_reach, f.after_close_out_of_reach_live),
        (1, 0)
    );
    assert!(unmet(&sc, &f).is_empty(), "{:?}", unmet(&sc, &f));
    assert!(human("t", &[f]).contains("out of reach of the close (live)"));

    // Isolate 2 had a request 25 s before the close: in reach, and it breaks the bound.
    let mut told = stale.to_vec();
    told.extend([
        (2, 30_000, "PRIMARY_HEALTHY"),
        (2, 70_000, "DEGRADED_FALLBACK"),
    ]);
    let g = figures("fleet", &synthetic_close(&told), 40_000, 50_000);
    assert_eq!(g.recover_in_reach_s, None, "never: {g:?}");
    let missed = unmet(&sc, &g);
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert!(missed[0].contains("time to recover"), "{missed:?}");

    // No close (isolate scope): no reach, no floor.
    let mut run = synthetic_close(&stale);
    run.fleet_moves.clear();
    let i = figures("isolate", &run, 40_000, 50_000);
    assert_eq!((i.recover_in_reach_s, i.recover_floor_s), (None, None));
    assert_eq!(i.after_close_out_of_reach, 0);
}

/// `degrade_behind_one_breaker`: `simulate` runs the scenario over one isolate in isolate
/// scope — every call in one window — and the fleet scope may degrade at most that much
/// later (`never` is later than any time); without the key there is no such run.
#[test]
fn the_fleet_may_be_bounded_by_one_breaker_seeing_all_the_traffic() {
    let p = policy();
    let sc = scenario(&p, "isolates = 4\ndegrade_behind_one_breaker = \"1s\"");
    let spec = sc.fleet.clone().unwrap();
    let span = fault_span(&sc).unwrap();
    let catalog = crate::fixtures::sample_catalog();
    let one = one::run_one(&p, Some(&catalog), &sc, &spec, span)
        .unwrap()
        .expect("the reference run");
    assert_eq!(one.scope, one::ONE_BREAKER);
    let reference = one.degrade_s.expect("one breaker degrades");
    let (_, fleet, _) = both(&p, &sc);
    let mut f = fleet.clone();
    f.degrade_s = Some(reference + 1.0);
    assert_eq!(one::behind(&spec, &f, Some(&one)), None, "1 s behind: met");
    f.degrade_s = Some(reference + 1.25);
    let missed = one::behind(&spec, &f, Some(&one)).expect("missed");
    assert!(
        missed.contains("more than 1.0 s after one breaker"),
        "{missed}"
    );
    f.degrade_s = None;
    assert!(
        one::behind(&spec, &f, Some(&one)).is_some(),
        "never is later"
    );
    let plain = scenario(&p, "isolates = 4");
    let plain_spec = plain.fleet.clone().unwrap();
    assert!(one::run_one(&p, Some(&catalog), &plain, &plain_spec, span)
        .unwrap()
        .is_none());
    assert_eq!(one::behind(&plain_spec, &f, None), None);
}
