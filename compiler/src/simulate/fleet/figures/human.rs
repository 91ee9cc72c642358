//! Both scopes' figures side by side, as `simulate --isolates N` prints them.

use super::Figures;

fn secs(v: Option<f64>) -> String {
    v.map_or("never".to_string(), |s| format!("{s:.2} s"))
}

/// A figure a scope does not have (the fleet's verdict in isolate scope) is `-`.
fn opt_secs(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |s| format!("{s:.2} s"))
}

/// A fleet-scope figure: `-` in isolate scope, `never` when the fleet opened but the rule
/// never held.
fn fleet_secs(r: &Figures, v: Option<f64>) -> String {
    if r.fleet_opened_s.is_none() {
        return "-".into();
    }
    secs(v)
}

/// A figure of the fleet's close: `-` when it never closed after the onset, `never` when it
/// did but the rule never held.
fn closed_secs(r: &Figures, v: Option<f64>) -> String {
    if r.fleet_closed_s.is_none() {
        return "-".into();
    }
    secs(v)
}

/// Both scopes side by side, as `simulate` prints them.
pub fn human(title: &str, rows: &[Figures]) -> String {
    let mut out = format!("{title}\n\n");
    let w = 34;
    out += &format!("{:w$}", "");
    for r in rows {
        out += &format!("{:>22}", format!("scope = {}", r.scope));
    }
    out += "\n";
    let line = |name: &str, f: &dyn Fn(&Figures) -> String| {
        let mut l = format!("{name:w$}");
        for r in rows {
            l += &format!("{:>22}", f(r));
        }
        l + "\n"
    };
    out += &line("time to degrade (traffic)", &|r| secs(r.degrade_s));
    out += &line("  within reach", &|r| fleet_secs(r, r.degrade_in_reach_s));
    out += &line("  floor (out of reach)", &|r| {
        fleet_secs(r, r.degrade_floor_s)
    });
    out += &line("out of reach (met closed)", &|r| {
        format!("{} ({})", r.out_of_reach, r.out_of_reach_closed)
    });
    out += &line("time to recover (traffic)", &|r| secs(r.recover_s));
    out += &line("  within reach", &|r| closed_secs(r, r.recover_in_reach_s));
    out += &line("  floor (out of reach)", &|r| {
        closed_secs(r, r.recover_floor_s)
    });
    out += &line("out of reach of the close (live)", &|r| {
        format!(
            "{} ({})",
            r.after_close_out_of_reach, r.after_close_out_of_reach_live
        )
    });
    out += &line("model calls during the outage", &|r| {
        r.outage_model_calls.to_string()
    });
    out += &line("probes sent", &|r| r.probes.to_string());
    out += &line("live share", &|r| format!("{:.1}%", 100.0 * r.live_share));
    out += &line("degrade: slowest isolate", &|r| {
        secs(r.isolate_degrade_slowest_s)
    });
    out += &line("degrade: p95 across isolates", &|r| {
        secs(r.isolate_degrade_p95_s)
    });
    out += &line("recover: slowest isolate", &|r| {
        secs(r.isolate_recover_slowest_s)
    });
    out += &line("recover: p95 across isolates", &|r| {
        secs(r.isolate_recover_p95_s)
    });
    out += &line("isolates never degraded", &|r| r.never_degraded.to_string());
    out += &line("isolates never recovered", &|r| {
        r.never_recovered.to_string()
    });
    out += &line("fleet verdict: opened", &|r| opt_secs(r.fleet_opened_s));
    out += &line("fleet verdict: closed", &|r| opt_secs(r.fleet_closed_s));
    out += &line("reports (failed)", &|r| {
        format!("{} ({})", r.reports, r.report_failures)
    });
    out += &line("watches (answered)", &|r| {
        format!("{} ({})", r.watches, r.pushed)
    });
    out += &line("requests", &|r| r.requests.to_string());
    if rows.iter().any(|r| r.elsewhere_requests > 0) {
        out += &line("elsewhere: met not closed", &|r| {
            format!("{} of {}", r.elsewhere_not_closed, r.elsewhere_requests)
        });
        out += &line("elsewhere: worst 250 ms slot", &|r| {
            format!("{:.1}%", 100.0 * r.elsewhere_worst_slot_share)
        });
    }
    for r in rows.iter().filter(|r| !r.coordinators.is_empty()) {
        out += &format!(
            "\ncoordinators (scope = {}): requests a second — mean over the run, while healthy, during the fault, busiest; queue wait p99\n",
            r.scope
        );
        out += &format!(
            "  {:<10}{:>10}{:>8}{:>9}{:>8}{:>16}{:>14}{:>10}\n",
            "", "capacity", "mean", "healthy", "fault", "busiest (at)", "wait p99", "refused"
        );
        for c in &r.coordinators {
            out += &format!(
                "  {:<10}{:>10}{:>8.0}{:>9.0}{:>8.0}{:>16}{:>14}{:>10}\n",
                c.coordinator,
                c.capacity_rps,
                c.mean_rps,
                c.healthy_rps,
                c.incident_rps,
                format!("{} ({} s)", c.busiest_second_rps, c.busiest_second_at_s),
                format!("{:.1} ms", c.queue_wait_p99_ms),
                c.refused
            );
        }
    }
    out
}
