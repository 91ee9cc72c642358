//! The Worker bindings a policy needs: the KV namespaces its tiers read, the Rate Limiting
//! binding for its storm limit, the secrets it and its tiers name, and the plain vars. Both
//! `wrangler.toml` and `manifest.json` are rendered from this one list, so the local runner
//! (Miniflare, which reads the manifest) and a real deploy see the same bindings.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use understudy_core::breaker::fleet;
use understudy_core::events::protocol as outbox;
use understudy_core::policy::{Breaker, Policy, RateBreaker, Scope};

/// The var that overrides the baked origin URL. Only the local runner sets it (tests and
/// `dev` point it at the simulated origin); a deploy calls the URL baked in the policy, so
/// `wrangler.toml` leaves it out and every production log line says `origin_override: false`.
pub const ORIGIN_URL_VAR: &str = "UNDERSTUDY_ORIGIN_URL";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RateLimit {
    pub limit: u32,
    pub name: String,
    /// Seconds: the binding supports 10 or 60.
    pub period: u32,
}

/// A Durable Object namespace the Worker binds (the events outbox, the breaker's
/// coordinator), with SQLite storage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DurableObject {
    pub class_name: String,
    pub name: String,
    /// Declared with `new_sqlite_classes` (the SQLite backend cannot be switched later).
    pub sqlite: bool,
    /// The migration that creates the class: each class has its own, so adding one never
    /// rewrites another's (wrangler applies the tags after the last one a deploy has seen).
    #[serde(skip)]
    pub migration: &'static str,
    /// What it is, for the comment above its binding in `wrangler.toml`.
    #[serde(skip)]
    pub what: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bindings {
    /// [V-STORE] Durable Object namespaces (the events outbox, when the policy has events).
    pub durable_objects: Vec<DurableObject>,
    /// KV namespace binding names, sorted.
    pub kv: Vec<String>,
    pub rate_limits: Vec<RateLimit>,
    /// Secret binding names (set with `wrangler secret put`, never written to disk).
    pub secrets: Vec<String>,
    /// Plain `[vars]` (none yet: everything the Worker needs is in the bake).
    pub vars: BTreeMap<String, String>,
}

impl Bindings {
    pub fn of(policy: &Policy) -> Bindings {
        let mut kv = BTreeSet::new();
        let mut secrets = BTreeSet::new();
        for tier in &policy.cascade.tiers {
            kv.extend(tier.kind.kv_binding().map(|b| b.value.to_string()));
            secrets.extend(tier.kind.secret().map(|s| s.value.to_string()));
        }
        secrets.extend(policy.origin.credential_secret.clone());
        secrets.extend(policy.identity.as_ref().map(|i| i.secret.clone()));
        secrets.extend(policy.admin.as_ref().map(|a| a.secret.clone()));
        let mut durable_objects = Vec::new();
        if let Some(ev) = &policy.events {
            secrets.insert(ev.encryption_key_secret.clone());
            secrets.extend(ev.delivery.credential_secret.clone());
            durable_objects.push(DurableObject {
                class_name: outbox::CLASS.into(),
                name: outbox::BINDING.into(),
                sqlite: true,
                migration: "v1",
                what: "The events outbox: one object per shard, SQLite storage, alarms (docs/adr/006).",
            });
        }
        if let Breaker::Rate(RateBreaker {
            scope: Scope::Fleet(f),
            ..
        }) = &policy.breaker
        {
            durable_objects.push(DurableObject {
                class_name: fleet::CLASS.into(),
                name: f.coordinator.clone(),
                sqlite: true,
                migration: "breaker-v1",
                what: "The breaker's coordinator: one object per service, breaker settings and policy (docs/adr/011).",
            });
        }
        let rate_limits = policy
            .storm
            .iter()
            .map(|s| RateLimit {
                // The binding counts every request of a client in the window: the first
                // attempt plus `max_retries` retries pass, the next is a storm.
                limit: s.max_retries.saturating_add(1),
                name: s.binding.clone(),
                period: if s.window_ms <= 10_000 { 10 } else { 60 },
            })
            .collect();
        Bindings {
            durable_objects,
            kv: kv.into_iter().collect(),
            rate_limits,
            secrets: secrets.into_iter().collect(),
            vars: BTreeMap::new(),
        }
    }
}
