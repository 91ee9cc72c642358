//! `[events]`: durable events — ingest, outbox, delivery [V-*] (seed 004 SRS-RES-002/003).
//!
//! Each value on its own, like every part of the typed raw policy: keys, types, units, enum
//! words and each value's range ([C-RANGE]: a value that switches a mechanism off is
//! refused). Whether the section makes sense with the rest of the policy — the retry
//! schedule fits its window, schema versions N and N−1, callers and operators
//! authenticated — is `validate::events`'s job. The retry schedule reads in `retry.rs`.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use toml_span::value::{Value, ValueInner};
use toml_span::{DeserError, Deserialize};
use understudy_core::policy::events::{Alerts, DeadLetter, Delivery, EventType, Events};

use super::duration::LONGEST_MS;
use super::leaf::*;
use super::origin::DAY;
use super::problem::Problem;
use super::route::bug;
use super::table::{Problems, Table, Unknown};
use crate::codes::Code;

mod retry;

pub use retry::{default_retry, EventOutcome, RawRetry, RawRetryBackoff, MAX_ATTEMPTS};

/// Most shards (and so the fan-out of `events list` and the status endpoint).
pub const MAX_SHARDS: u64 = 256;
/// Workers allow 6 simultaneous connections per invocation.
pub const MAX_CONCURRENCY: u64 = 6;
/// Largest event body.
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Schema versions and the dead-letter threshold are `u32`s at the edge.
const MAX_U32: u64 = u32::MAX as u64;

/// An events duration: above zero. Events wait minutes and payloads are kept for days, so
/// there is no upper end but the grammar's.
pub type Wait = Dur<1, LONGEST_MS>;

impl Words for DeadLetter {
    const NAME: &'static str = "DeadLetter";
    const ALL: &'static [(&'static str, DeadLetter)] = DeadLetter::ALL;
}

/// [V-*] Durable events.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Events")]
pub struct RawEvents {
    /// POST path of the ingest endpoint (not the service route, the admin path or
    /// /__understudy/events).
    pub route: Spanned<PlainPath>,
    /// Claim of the verified token that names the caller's tenant (default tenant).
    pub tenant_claim: Option<Spanned<Text>>,
    /// Largest event body in bytes (default 65536, 1..=1 MiB).
    pub max_body_bytes: Option<Spanned<Count<1, MAX_BODY_BYTES>>>,
    /// Outbox shards (default 16, 1..=256); fixed once deployed.
    pub shards: Option<Spanned<Count<1, MAX_SHARDS>>>,
    /// Secret binding with the AES-256-GCM key material (a secret of its own).
    pub encryption_key_secret: Spanned<Binding>,
    /// Payload fields (dotted paths) never logged and masked by `events inspect`.
    pub redact: Option<Spanned<Vec<Spanned<FieldPath>>>>,
    /// hold (default): a dead letter holds its aggregate's later events; continue: they go on.
    pub dead_letter: Option<Spanned<Word<DeadLetter>>>,
    /// Whether dead letters may be replayed (default false).
    pub replay: Option<Spanned<Flag>>,
    /// Delivered events' payloads are erased this long after delivery (default 7d).
    pub retention: Option<Spanned<Wait>>,
    /// The accepted types and schema versions.
    pub types: EventTypes,
    /// Where events are delivered.
    pub delivery: Spanned<RawDelivery>,
    /// How failed deliveries are retried (default seed 004's schedule).
    pub retry: Option<Spanned<RawRetry>>,
    /// When operations are alerted (default seed 004's thresholds).
    pub alerts: Option<Spanned<RawAlerts>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

fn no_types(span: toml_span::Span) -> toml_span::Error {
    Problem::new(
        Code::MissingKey,
        "`[events]` accepts no event type",
        "no `[[events.types]]`",
        "declare each accepted type and schema version: `[[events.types]]` with `name`, `version` and `required`",
    )
    .at(span)
}

impl<'de> Deserialize<'de> for RawEvents {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let route = t.req("route");
        let tenant_claim = t.opt("tenant_claim");
        let max_body_bytes = t.opt("max_body_bytes");
        let shards = t.opt("shards");
        let encryption_key_secret = t.req("encryption_key_secret");
        let redact = t.opt("redact");
        let dead_letter = t.opt("dead_letter");
        let replay = t.opt("replay");
        let retention = t.opt("retention");
        let types: Option<Spanned<EventTypes>> = if t.has("types") {
            t.req("types")
        } else {
            t.th.take("types");
            t.th.errors.push(no_types(t.span));
            None
        };
        let delivery = t.req("delivery");
        let retry = t.opt("retry");
        let alerts = t.opt("alerts");
        let unknown = Unknown(t.finish()?);
        Ok(RawEvents {
            route: route.ok_or_else(bug)?,
            tenant_claim,
            max_body_bytes,
            shards,
            encryption_key_secret: encryption_key_secret.ok_or_else(bug)?,
            redact,
            dead_letter,
            replay,
            retention,
            types: types.ok_or_else(bug)?.value,
            delivery: delivery.ok_or_else(bug)?,
            retry,
            alerts,
            span,
            unknown,
        })
    }
}

impl Problems for RawEvents {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
        for t in &self.types.0 {
            t.unknown.problems(out);
        }
        self.delivery.value.unknown.problems(out);
        if let Some(r) = &self.retry {
            r.value.unknown.problems(out);
            if let Some(b) = &r.value.backoff {
                b.value.unknown.problems(out);
            }
        }
        if let Some(a) = &self.alerts {
            a.value.unknown.problems(out);
        }
    }
}

fn paths(list: &Option<Spanned<Vec<Spanned<FieldPath>>>>) -> Vec<String> {
    list.as_ref()
        .map(|l| l.value.iter().map(|f| f.value.0.clone()).collect())
        .unwrap_or_default()
}

impl RawEvents {
    pub fn lower(&self) -> Events {
        Events {
            route: self.route.value.0.clone(),
            tenant_claim: self
                .tenant_claim
                .as_ref()
                .map_or_else(|| "tenant".to_string(), |c| c.value.0.clone()),
            max_body_bytes: self.max_body_bytes.map_or(65_536, |m| m.value.0),
            // At most MAX_SHARDS: fits a u32.
            shards: self.shards.map_or(16, |s| s.value.0 as u32),
            types: self.types.0.iter().map(RawEventType::lower).collect(),
            delivery: self.delivery.value.lower(),
            retry: self
                .retry
                .as_ref()
                .map_or_else(default_retry, |r| r.value.lower()),
            dead_letter: self.dead_letter.map_or(DeadLetter::Hold, |d| d.value.0),
            encryption_key_secret: self.encryption_key_secret.value.0.clone(),
            redact: paths(&self.redact),
            alerts: self.alerts.as_ref().map_or(ALERTS, |a| a.value.lower()),
            replay: self.replay.is_some_and(|r| r.value.0),
            retention_ms: self.retention.map_or(7 * DAY, |r| r.value.0),
        }
    }
}

/// `[[events.types]]`, at least one; each type is read, and its problems reported, on its own.
#[derive(Debug, Clone)]
pub struct EventTypes(pub Vec<RawEventType>);

impl<'de> Deserialize<'de> for EventTypes {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        match v.take() {
            ValueInner::Array(items) if !items.is_empty() => {
                let mut types = Vec::new();
                let mut errors = Vec::new();
                for mut item in items {
                    match RawEventType::deserialize(&mut item) {
                        Ok(t) => types.push(t),
                        Err(e) => errors.extend(e.errors),
                    }
                }
                if errors.is_empty() {
                    Ok(EventTypes(types))
                } else {
                    Err(DeserError { errors })
                }
            }
            ValueInner::Array(_) => Err(no_types(v.span).into()),
            other => Err(Problem::new(
                Code::WrongType,
                format!(
                    "`{{key}}` must be an array of tables (`[[events.types]]`), found a {}",
                    other.type_str()
                ),
                "expected `[[events.types]]`",
                "declare each type as a `[[events.types]]` table",
            )
            .at(v.span)
            .into()),
        }
    }
}

impl JsonSchema for EventTypes {
    fn schema_name() -> Cow<'static, str> {
        "EventTypes".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let item = g.subschema_for::<RawEventType>();
        json_schema!({"type": "array", "minItems": 1, "items": item})
    }
}

/// One accepted (type, schema version).
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "EventType")]
pub struct RawEventType {
    /// Event type, e.g. order.placed.
    pub name: Spanned<EventTypeName>,
    /// Schema version (1 or more).
    pub version: Spanned<Count<1, MAX_U32>>,
    /// Payload fields (dotted paths) this version requires.
    pub required: Option<Spanned<Vec<Spanned<FieldPath>>>>,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawEventType {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let mut t = Table::new(v)?;
        let name = t.req("name");
        let version = t.req("version");
        let required = t.opt("required");
        let unknown = Unknown(t.finish()?);
        Ok(RawEventType {
            name: name.ok_or_else(bug)?,
            version: version.ok_or_else(bug)?,
            required,
            unknown,
        })
    }
}

impl RawEventType {
    pub fn lower(&self) -> EventType {
        EventType {
            name: self.name.value.0.clone(),
            // At most u32::MAX.
            version: self.version.value.0 as u32,
            required: paths(&self.required),
        }
    }
}

/// `[events.delivery]`: where and how events are delivered.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "EventDelivery")]
pub struct RawDelivery {
    /// The consumer (http or https).
    pub url: Spanned<Url>,
    /// Secret binding with the consumer credential.
    pub credential_secret: Option<Spanned<Binding>>,
    /// Header the credential is sent in (default Authorization).
    pub credential_header: Option<Spanned<Token>>,
    /// Headers and body of one attempt must arrive within this (default 10s).
    pub attempt_timeout: Option<Spanned<Wait>>,
    /// Deliveries one shard runs at once (default 4, 1..=6).
    pub concurrency: Option<Spanned<Count<1, MAX_CONCURRENCY>>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawDelivery {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let url = t.req("url");
        let credential_secret = t.opt("credential_secret");
        let credential_header = t.opt("credential_header");
        let attempt_timeout = t.opt("attempt_timeout");
        let concurrency = t.opt("concurrency");
        let unknown = Unknown(t.finish()?);
        Ok(RawDelivery {
            url: url.ok_or_else(bug)?,
            credential_secret,
            credential_header,
            attempt_timeout,
            concurrency,
            span,
            unknown,
        })
    }
}

impl RawDelivery {
    pub fn lower(&self) -> Delivery {
        Delivery {
            url: self.url.value.0.clone(),
            credential_secret: self.credential_secret.as_ref().map(|s| s.value.0.clone()),
            credential_header: self
                .credential_header
                .as_ref()
                .map_or_else(|| "Authorization".to_string(), |h| h.value.0.clone()),
            attempt_timeout_ms: self.attempt_timeout.map_or(10_000, |a| a.value.0),
            // At most MAX_CONCURRENCY.
            concurrency: self.concurrency.map_or(4, |c| c.value.0 as u32),
        }
    }
}

/// Seed 004: alert when the oldest pending event is over 60 s old or on any dead letter;
/// report a missing predecessor after 60 s.
const ALERTS: Alerts = Alerts {
    oldest_pending_ms: 60_000,
    dead_letters: 0,
    gap_ms: 60_000,
};

/// `[events.alerts]`: when operations are alerted.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "EventAlerts")]
pub struct RawAlerts {
    /// Alert when the oldest pending event is older than this (default 60s).
    pub oldest_pending: Option<Spanned<Wait>>,
    /// Alert when more events than this are dead letters (default 0).
    pub dead_letters: Option<Spanned<Count<0, MAX_U32>>>,
    /// Report an event that has waited this long for a missing predecessor (default 60s).
    pub gap: Option<Spanned<Wait>>,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawAlerts {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let mut t = Table::new(v)?;
        let oldest_pending = t.opt("oldest_pending");
        let dead_letters = t.opt("dead_letters");
        let gap = t.opt("gap");
        let unknown = Unknown(t.finish()?);
        Ok(RawAlerts {
            oldest_pending,
            dead_letters,
            gap,
            unknown,
        })
    }
}

impl RawAlerts {
    pub fn lower(&self) -> Alerts {
        Alerts {
            oldest_pending_ms: self
                .oldest_pending
                .map_or(ALERTS.oldest_pending_ms, |o| o.value.0),
            dead_letters: self.dead_letters.map_or(ALERTS.dead_letters, |d| d.value.0),
            gap_ms: self.gap.map_or(ALERTS.gap_ms, |g| g.value.0),
        }
    }
}
