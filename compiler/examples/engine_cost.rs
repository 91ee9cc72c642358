//! What the request engine itself costs per request, natively (no Worker, no I/O): a
//! healthy request (token verified, parameters validated, the origin's answer classified,
//! rendered, logged, written through) and a degraded one (origin timed out, two KV misses,
//! the baked stubs), for a policy. The Worker adds its own I/O and JS crossings on top.
//!
//!     cargo run --release -p understudy-compiler --example engine_cost [POLICY] [N]

use std::collections::BTreeMap;
use std::time::Instant;

use understudy_compiler::load::load_policy;
use understudy_compiler::simulate::request::dev_secret;
use understudy_core::bake::Bake;
use understudy_core::classify::Observed;
use understudy_core::engine::{Command, Done, Engine, Incoming, Input, KvRead, Op};
use understudy_core::Millis;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .map_or("policies/recommendations.toml", String::as_str);
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    // Check as of the sample inventory's own time, so the sample catalog validates.
    let now = Millis(1_796_007_600_000); // 2026-11-30T03:00:00Z
    let loaded = load_policy(std::path::Path::new(path), now);
    let Some(policy) = loaded.policy.clone() else {
        eprintln!(
            "{path} is invalid: {:?}",
            loaded.diagnostics.first().map(|d| &d.message)
        );
        std::process::exit(1);
    };
    let bake = Bake {
        release_id: "r-bench".into(),
        policy_hash: String::new(),
        catalog_hash: String::new(),
        validated_at_ms: now.0,
        compiler_version: "0".into(),
        policy: policy.clone(),
        catalog: loaded.catalog.clone(),
    };
    let mut secrets = BTreeMap::new();
    for name in ["TOKEN_HMAC_KEY", "ML_API_KEY", "ADMIN_TOKEN", "LLM_API_KEY"] {
        secrets.insert(name.to_string(), dev_secret(name));
    }
    let mut headers = Vec::new();
    if let Some(id) = &policy.identity {
        let claims = serde_json::json!({"sub": "user-42", "iss": id.issuer, "aud": id.audience,
            "iat": now.0 / 1000, "exp": now.0 / 1000 + 100_000});
        let tok = understudy_core::token::sign(&claims, dev_secret(&id.secret).as_bytes());
        headers.push(("authorization".to_string(), format!("Bearer {tok}")));
    }
    headers.push(("x-correlation-id".into(), "bench-1".into()));
    let query = "category=audio&q=headphones";
    let body = br#"{"model":"sim-1","items":[{"sku":"SIM-1","score":0.9},{"sku":"SIM-2","score":0.8},{"sku":"SIM-3","score":0.7}]}"#.to_vec();
    for (label, healthy) in [("healthy", true), ("degraded", false)] {
        let mut e = Engine::new(&bake).expect("engine");
        let t = Instant::now();
        let mut statuses = BTreeMap::new();
        for i in 0..n {
            let at = Millis(now.0 + i * 100);
            let req = Incoming {
                method: "GET",
                path: &policy.service.route,
                query,
                headers: &headers,
            };
            let (mut f, mut out) = e.start(at, &req, &secrets, i + 1);
            // The driver's part, done by hand: the limiter allows, a healthy model answers in
            // 25 ms, a hung one never (the engine's timer fires), KV misses.
            let status = loop {
                if let Some(r) = out.reply() {
                    break r.status;
                }
                let first = out.commands.iter().find_map(|c| match c {
                    Command::Start { io, op } => Some((*io, Some(op.clone()))),
                    _ => None,
                });
                let t = at.plus(25);
                out = match first {
                    Some((io, Some(Op::Limit { .. }))) => {
                        e.step(&mut f, at, Input::Done(io, Done::Limited(Ok(true))))
                    }
                    Some((io, Some(Op::Fetch(_)))) if healthy => e.step(
                        &mut f,
                        t,
                        Input::Done(
                            io,
                            Done::Fetched(Observed::Response {
                                status: 200,
                                retry_after: None,
                                body: body.clone(),
                            }),
                        ),
                    ),
                    Some((io, Some(Op::ReadKv { .. }) | None)) => e.step(
                        &mut f,
                        out.wake_at.unwrap_or(t),
                        Input::Done(
                            io,
                            Done::Kv(KvRead::Value {
                                value: None,
                                metadata: None,
                            }),
                        ),
                    ),
                    _ => {
                        let wake = out.wake_at.expect("a request waiting for nothing");
                        e.step(&mut f, wake, Input::Timer)
                    }
                };
            };
            *statuses.entry(status).or_insert(0u64) += 1;
        }
        let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!(
            "{label:<9} {per:>8.2} µs per request natively ({n} requests, statuses {statuses:?})"
        );
    }
}
