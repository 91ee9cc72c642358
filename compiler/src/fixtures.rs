//! Hand-made inputs shared by tests across the workspace's crates (the compiler's own, the
//! lab's and the CLI's): a seed-000-like policy and a tiny catalog, built in code so tests
//! need neither files nor the validator.
#![doc(hidden)]

use understudy_core::catalog::{Catalog, Item};
use understudy_core::policy::*;
use understudy_core::template::Template;

pub fn sample_policy() -> Policy {
    Policy {
        version: "2026-11-30.1".into(),
        service: Service {
            name: "recommendation-service".into(),
            route: "/v1/recommendations".into(),
            methods: vec![Method::Get],
            expected_rps: Some(2400),
        },
        params: vec![Param {
            name: "category_id".into(),
            source: ParamSource::Query,
            from: "category".into(),
            ty: ParamType::String,
            pattern: Some("^[a-z0-9-]{1,32}$".into()),
            max_len: 32,
            required: false,
            default: Some("all".into()),
            identity: false,
            allow_unverified: false,
        }],
        budget: Budget {
            total_ms: 60,
            deadline_ms: 45,
        },
        origin: Origin {
            url: "https://ml.example/v2/recommend".into(),
            method: Method::Post,
            idempotent: false,
            attempt_timeout_ms: 45,
            connect_timeout_ms: None,
            attempts: 1,
            backoff_base_ms: 0,
            backoff_max_ms: 0,
            retry_on: RetryOn::none(),
            honor_retry_after: true,
            idempotency_key_header: None,
            credential_secret: Some("ML_API_KEY".into()),
            credential_header: "Authorization".into(),
            result_path: vec!["items".into()],
            max_body_bytes: 1 << 20,
            client_errors: ClientErrors::PassThrough,
            max_in_flight: None,
            hedge: None,
        },
        breaker: Breaker::Consecutive {
            failures: 5,
            cooldown_ms: 30_000,
        },
        cascade: Cascade {
            promise: Promise::AlwaysAnswer,
            tiers: vec![
                Tier {
                    name: "category".into(),
                    kind: TierKind::Kv(KvTier {
                        binding: "CATEGORY_TOP".into(),
                        key: Template::parse("category_top:{category_id}").unwrap(),
                        max_staleness_ms: 86_400_000,
                        read_timeout_ms: 5,
                        write_through: false,
                        refresh_ms: 300_000,
                        published: false,
                    }),
                    cache_control: None,
                },
                Tier {
                    name: "curated".into(),
                    kind: TierKind::Embedded(EmbeddedTier::Curated {
                        by: Some("category_id".into()),
                        limit: 8,
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
        storm: Some(Storm {
            binding: "STORM_LIMITER".into(),
            max_retries: 2,
            window_ms: 10_000,
        }),
        catalog: None,
        identity: None,
        admin: Some(Admin {
            path: "/__understudy/status".into(),
            secret: "ADMIN_TOKEN".into(),
        }),
        events: None,
    }
}

pub fn sample_catalog() -> Catalog {
    let item = |sku: &str, title: &str| Item {
        sku: sku.into(),
        title: title.into(),
        category: Some("audio".into()),
        json: format!("{{\"sku\":\"{sku}\"}}"),
    };
    Catalog::new(
        vec![
            item("SKU-1", "wireless headphones"),
            item("SKU-2", "bluetooth speaker"),
        ],
        1_000,
        500,
    )
}
