//! [F-SCOPE] What the breaker's coordinator said, back into the engine: the answer to a
//! report or to a watch a [`super::Reply`] carried (ADR 011).

use super::Engine;
use crate::breaker::fleet::Verdict;
use crate::metrics::DataPoint;
use crate::time::Millis;

/// What [`Engine::fleet_heard`] asks the driver to do: print the log line, write the point,
/// send the report again at once (a failed one's retry, `breaker::member::failover`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetHeard {
    pub log: Option<String>,
    pub point: Option<DataPoint>,
    pub again: Option<crate::breaker::member::FleetReport>,
}

impl Engine<'_> {
    /// What the status endpoint shows of the fleet, when the breaker is fleet-scoped.
    pub fn fleet_status(&mut self, now: Millis) -> Option<serde_json::Value> {
        self.health.member().map(|m| m.status(now))
    }

    /// [F-SCOPE] The coordinator answered the report a [`super::Reply`] carried (`Ok`: the
    /// answer's body), or the report failed — unreachable, over its timeout, a refusal, an
    /// answer that is no verdict (`Err`: why). Returns the log line to print when it
    /// failed, and the Analytics Engine point to write when what this isolate knows of the
    /// fleet changed.
    pub fn fleet_heard(&mut self, now: Millis, reply: Result<&str, &str>) -> FleetHeard {
        let Some(member) = self.health.member() else {
            return FleetHeard::default();
        };
        let (change, log) = match reply.map(serde_json::from_str::<Verdict>) {
            Ok(Ok(verdict)) => (member.heard(now, verdict), None),
            failed => {
                let why = match failed {
                    Ok(Err(e)) => format!("the coordinator's answer is no verdict: {e}"),
                    Err(why) => why.to_string(),
                    Ok(Ok(_)) => String::new(),
                };
                let change = member.failed(now, &why);
                let log = serde_json::json!({
                    "event": "breaker_coordinator_failed",
                    "binding": member.settings().coordinator,
                    "error": crate::classify::bounded(&why),
                    "alert": "ALERT_BREAKER_COORDINATOR_LOST",
                })
                .to_string();
                (change, Some(log))
            }
        };
        let again = member.again(now);
        FleetHeard {
            again,
            ..self.fleet_point(now, change, log)
        }
    }

    /// [F-SCOPE] The coordinator answered the watch a [`super::Reply`] carried (`Ok`: the
    /// verdict it pushed), or the watch failed (`Err`). A failed watch is no alert: the
    /// reports judge the coordinator's health; the next watch waits a report interval.
    pub fn fleet_watched(&mut self, now: Millis, reply: Result<&str, &str>) -> FleetHeard {
        let Some(member) = self.health.member() else {
            return FleetHeard::default();
        };
        let verdict = reply
            .ok()
            .and_then(|t| serde_json::from_str::<Verdict>(t).ok());
        let change = member.watched(now, verdict);
        let again = member.watch_again(now);
        FleetHeard {
            again,
            ..self.fleet_point(now, change, None)
        }
    }

    /// [F-SCOPE] The instant `asked` a [`super::Reply::fleet_wake`] named came (at `now`):
    /// the calls to send now (an isolate's first report and a watch), as
    /// [`super::Reply::fleet`] is sent — none when a later answer moved the wake.
    pub fn fleet_wake(
        &mut self,
        now: Millis,
        asked: Millis,
    ) -> Vec<crate::breaker::member::FleetReport> {
        self.health
            .member()
            .map_or_else(Vec::new, |m| m.wake(now, asked))
    }

    fn fleet_point(
        &mut self,
        now: Millis,
        change: Option<crate::breaker::member::FleetChange>,
        log: Option<String>,
    ) -> FleetHeard {
        let service = &self.bake.policy.service.name;
        let release = &self.bake.release_id;
        let Some(member) = self.health.member() else {
            return FleetHeard::default();
        };
        let point = change.map(|c| {
            let mode = crate::breaker::rate_name(member.mode(now));
            crate::metrics::fleet_point(
                service,
                release,
                (c.event, c.verdict),
                mode,
                (c.calls, c.isolates),
            )
        });
        FleetHeard {
            log,
            point,
            again: None,
        }
    }
}
