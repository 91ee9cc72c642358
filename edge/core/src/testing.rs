//! Test fixtures: seed 000's recommendations policy and a small catalog, built in code so
//! the core's tests do not depend on the compiler's TOML parser.

use crate::catalog::{Catalog, Item};
use crate::policy::*;
use crate::template::Template;

pub const HOUR: u64 = 3_600_000;
/// A fixed "now" for tests: 2026-11-30T00:00:00Z.
pub const NOW: u64 = 1_795_996_800_000;

fn param(name: &str, source: ParamSource, pattern: Option<&str>, max_len: u32) -> Param {
    Param {
        name: name.into(),
        source,
        from: name.into(),
        ty: ParamType::String,
        pattern: pattern.map(Into::into),
        max_len,
        required: false,
        default: None,
        identity: false,
        allow_unverified: false,
    }
}

/// Seed 000: 60 ms budget, 45 ms origin deadline, user tier (8 ms, 4 h), category tier
/// (5 ms, 24 h), curated stubs last.
pub fn seed_policy() -> Policy {
    let mut user = param(
        "user_id",
        ParamSource::Path,
        Some("[A-Za-z0-9_-]{1,64}"),
        64,
    );
    user.required = true;
    user.identity = true;
    user.allow_unverified = true;
    let mut category = param("category", ParamSource::Query, Some("[a-z0-9-]{1,32}"), 32);
    category.default = Some("general".into());
    let mut limit = param("limit", ParamSource::Query, None, 3);
    limit.ty = ParamType::Integer;
    Policy {
        version: "2026-11-30.1".into(),
        service: Service {
            name: "recommendations".into(),
            route: "/recommendations/{user_id}".into(),
            methods: vec![Method::Get],
            expected_rps: Some(100),
        },
        params: vec![user, category, limit],
        budget: Budget {
            total_ms: 60,
            deadline_ms: 45,
        },
        origin: Origin {
            url: "https://model.internal/recommend".into(),
            method: Method::Get,
            idempotent: true,
            attempt_timeout_ms: 45,
            connect_timeout_ms: None,
            attempts: 1,
            backoff_base_ms: 0,
            backoff_max_ms: 0,
            retry_on: RetryOn::none(),
            honor_retry_after: true,
            idempotency_key_header: None,
            credential_secret: Some("MODEL_API_KEY".into()),
            credential_header: "Authorization".into(),
            result_path: vec!["items".into()],
            max_body_bytes: 65_536,
            client_errors: ClientErrors::PassThrough,
            max_in_flight: None,
            hedge: None,
        },
        breaker: Breaker::Off,
        cascade: Cascade {
            promise: Promise::AlwaysAnswer,
            tiers: vec![
                Tier {
                    name: "user".into(),
                    kind: TierKind::Kv(KvTier {
                        binding: "RECS_KV".into(),
                        key: Template::parse("user_rec:{user_id}").unwrap(),
                        max_staleness_ms: 4 * HOUR,
                        read_timeout_ms: 8,
                        write_through: true,
                        refresh_ms: 300_000,
                        published: false,
                    }),
                    cache_control: None,
                },
                Tier {
                    name: "category".into(),
                    kind: TierKind::Kv(KvTier {
                        binding: "RECS_KV".into(),
                        key: Template::parse("cat_rec:{category}").unwrap(),
                        max_staleness_ms: 24 * HOUR,
                        read_timeout_ms: 5,
                        write_through: false,
                        refresh_ms: 0,
                        published: false,
                    }),
                    cache_control: None,
                },
                Tier {
                    name: "stubs".into(),
                    kind: TierKind::Embedded(EmbeddedTier::Curated {
                        by: Some("category".into()),
                        limit: 3,
                    }),
                    cache_control: None,
                },
            ],
        },
        disclosure: Disclosure {
            cache_control: Some("public, max-age=30".into()),
            private_cache_control: "private, max-age=30".into(),
            live_cache_control: "private, no-store".into(),
            retry_after_s: Some(5),
            body_fields: true,
        },
        storm: None,
        catalog: Some(CatalogRules {
            stubs: "stubs.json".into(),
            inventory: "inventory.csv".into(),
            max_age_ms: 24 * HOUR,
            min_stock: 50,
            on_expired: OnExpired::Refuse,
        }),
        identity: None,
        admin: None,
        events: None,
    }
}

fn item(sku: &str, title: &str, cat: &str) -> Item {
    Item {
        sku: sku.into(),
        title: title.into(),
        category: Some(cat.into()),
        json: format!("{{\"sku\":\"{sku}\",\"title\":\"{title}\"}}"),
    }
}

/// Five stubs validated one hour before [`NOW`].
pub fn seed_catalog() -> Catalog {
    Catalog::new(
        vec![
            item("1", "wireless noise-cancelling headphones", "audio"),
            item("2", "programmable drip coffee maker", "kitchen"),
            item("3", "waterproof laptop backpack", "bags"),
            item("4", "backlit mechanical keyboard", "computing"),
            item("5", "water-resistant sports headphones", "audio"),
        ],
        NOW - HOUR,
        NOW - 2 * HOUR,
    )
}

/// Seed 000's breaker numbers (MC-ST-01).
pub fn seed_rate_breaker() -> RateBreaker {
    RateBreaker {
        window_ms: 30_000,
        failure_ratio: 0.15,
        min_calls: 20,
        slow_call_p95_ms: 45,
        hold_down_ms: 30_000,
        probe_fraction: 0.02,
        probe_min_calls: 20,
        probe_success_ratio: 0.995,
        probe_p95_ms: 40,
        failed_probe_hold_ms: 60_000,
        scope: Default::default(),
    }
}
