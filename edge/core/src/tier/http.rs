//! [E-CASCADE] An HTTP tier: a secondary source (a smaller model, a replica) in its own
//! failure domain — its own host and credential, never the origin's ([C-DOMAIN]). Its
//! answer is classified like the origin's (docs/outcomes.md) against its own
//! `result_path`; a failure is a miss with the outcome's reason.

use serde::{Deserialize, Serialize};

use super::{Env, Found, Keyed, Kind, Miss, Read, Start};
use crate::classify::{classify, FailureReason};
use crate::http::Outbound;
use crate::io::{Done, Op};

/// A secondary HTTP source's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpTier {
    pub url: String,
    pub timeout_ms: u64,
    pub credential_secret: Option<String>,
    pub result_path: Vec<String>,
}

impl Kind for HttpTier {
    fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    fn timeout_label(&self) -> &'static str {
        "HTTP timeout"
    }

    fn local(&self) -> bool {
        false
    }

    fn per_user(&self, _: &dyn Fn(&str) -> bool) -> bool {
        false
    }

    fn params(&self) -> Vec<Keyed<'_>> {
        Vec::new()
    }

    fn secret(&self) -> Option<Keyed<'_>> {
        self.credential_secret.as_deref().map(|value| Keyed {
            key: "credential_secret",
            value,
        })
    }

    fn url(&self) -> Option<Keyed<'_>> {
        Some(Keyed {
            key: "url",
            value: &self.url,
        })
    }

    fn start<'p>(&'p self, _: &Env<'_>, fetch: &dyn Fn(&str) -> Outbound) -> Start<'p> {
        Start::Read(Op::Fetch(fetch(&self.url)))
    }

    fn finish(&self, env: &Env<'_>, done: Done) -> Result<Found, Miss> {
        let Done::Fetched(observed) = done else {
            return Err(Miss::unexpected(&done));
        };
        classify(&observed, &self.result_path, env.max_body_bytes)
            .map(Found::fresh)
            .map_err(|f| {
                let read = if f.reason == FailureReason::MlTimeout {
                    Read::TimedOut
                } else {
                    Read::Error
                };
                Miss::new(f.reason.code(), f.detail).found(read, None)
            })
    }
}
