//! TOML → [`Policy`], reporting every problem with its span.
//!
//! Parsing only checks shape (keys, types, units, enum words). Whether the policy makes
//! sense as a whole — budget arithmetic, failure domains, privacy — is `validate`'s job.

pub mod node;

use understudy_core::policy::*;
use understudy_core::template::Template;

use crate::codes;
use node::{as_choice, Ctx, Node, NodeKind, Span, Table};

const MAX_COUNT: u64 = 1_000_000;

/// Parses `text` into a policy. Returns `None` when any error was reported into `ctx`.
pub fn parse(ctx: &mut Ctx, text: &str) -> Option<Policy> {
    let root = match toml_span::parse(text) {
        Ok(v) => Node::from_toml(v),
        Err(e) => {
            let span = (e.span.start, e.span.end.max(e.span.start));
            ctx.error(
                codes::TOML_SYNTAX,
                span,
                format!("the policy is not valid TOML: {}", e.kind),
                "TOML parsing stopped here",
                "fix the TOML syntax at this point; see https://toml.io for the format",
            );
            return None;
        }
    };
    let errors_before = ctx.diags.len();
    let mut top = Table::new(ctx, "", root)?;
    let version = top
        .opt_str(ctx, "version")
        .unwrap_or_else(|| "unversioned".to_string());
    let service = top.opt_table(ctx, "service").and_then(|t| service(ctx, t));
    if ctx.span_of("service").is_none() {
        missing_table(ctx, &top, "service");
    }
    let params = top
        .opt_table(ctx, "params")
        .map(|t| params(ctx, t))
        .unwrap_or_default();
    let identity = top
        .opt_table(ctx, "identity")
        .and_then(|t| identity(ctx, t));
    let budget = top.opt_table(ctx, "budget").and_then(|t| budget(ctx, t));
    if ctx.span_of("budget").is_none() {
        missing_table(ctx, &top, "budget");
    }
    let origin = top.opt_table(ctx, "origin").and_then(|t| origin(ctx, t));
    if ctx.span_of("origin").is_none() {
        missing_table(ctx, &top, "origin");
    }
    let breaker = match top.opt_table(ctx, "breaker") {
        Some(t) => breaker(ctx, t),
        None => Some(Breaker::Off),
    };
    let cascade = top.opt_table(ctx, "cascade").and_then(|t| cascade(ctx, t));
    if ctx.span_of("cascade").is_none() {
        missing_table(ctx, &top, "cascade");
    }
    let disclosure = match top.opt_table(ctx, "disclosure") {
        Some(t) => disclosure(ctx, t),
        None => Some(default_disclosure()),
    };
    let storm = top.opt_table(ctx, "storm").and_then(|t| storm(ctx, t));
    let catalog = top.opt_table(ctx, "catalog").and_then(|t| catalog(ctx, t));
    let admin = top.opt_table(ctx, "admin").and_then(|t| admin(ctx, t));
    top.finish(ctx);

    if ctx.diags.len() > errors_before {
        return None;
    }
    Some(Policy {
        version,
        service: service?,
        params,
        budget: budget?,
        origin: origin?,
        breaker: breaker?,
        cascade: cascade?,
        disclosure: disclosure?,
        storm,
        catalog,
        identity,
        admin,
    })
}

fn missing_table(ctx: &mut Ctx, top: &Table, name: &str) {
    ctx.error(
        codes::MISSING_KEY,
        (top.span.0, top.span.0),
        format!("the policy has no `[{name}]` table"),
        format!("`[{name}]` is required"),
        format!("add a `[{name}]` table; docs/policy.md lists its keys"),
    );
}

fn service(ctx: &mut Ctx, mut t: Table) -> Option<Service> {
    let name = t.req_str(ctx, "name", "\"recommendation-service\"");
    let route = t.req_str(ctx, "route", "\"/v1/recommendations\"");
    if let (Some(r), Some(span)) = (&route, ctx.span_of("service.route")) {
        if !r.starts_with('/') {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("route `{r}` does not start with `/`"),
                "not a path",
                "write the route as a path, e.g. \"/v1/recommendations\"",
            );
        }
    }
    let methods = match t.opt_str_array(ctx, "methods") {
        Some(list) => {
            let mut out = Vec::new();
            for (m, span) in list {
                match Method::parse(&m) {
                    Some(m) => out.push(m),
                    None => ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        format!("`{m}` is not an HTTP method"),
                        "unknown method",
                        "use GET, HEAD, POST, PUT, PATCH or DELETE",
                    ),
                }
            }
            if out.is_empty() {
                let span = ctx.span_of("service.methods").unwrap_or(t.span);
                ctx.error(
                    codes::INVALID_VALUE,
                    span,
                    "`service.methods` is empty",
                    "no method",
                    "list at least one method, e.g. [\"GET\"]",
                );
            }
            out
        }
        None => vec![Method::Get],
    };
    let expected_rps = t.opt_uint(ctx, "expected_rps", MAX_COUNT).map(|v| v as u32);
    t.finish(ctx);
    Some(Service {
        name: name?,
        route: route?,
        methods,
        expected_rps,
    })
}

fn params(ctx: &mut Ctx, mut t: Table) -> Vec<Param> {
    let mut out = Vec::new();
    for (name, key_span, node) in t.drain_entries() {
        let path = format!("params.{name}");
        ctx.spans.insert(path.clone(), node.span);
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            ctx.error(
                codes::INVALID_VALUE,
                key_span,
                format!("`{name}` is not a parameter name"),
                "letters, digits and `_` only",
                "rename the parameter",
            );
            continue;
        }
        if let Some(p) = Table::new(ctx, &path, node).and_then(|pt| param(ctx, &name, pt)) {
            out.push(p);
        }
    }
    t.finish(ctx);
    out
}

fn param(ctx: &mut Ctx, name: &str, mut t: Table) -> Option<Param> {
    let source = match t.req(ctx, "source", "\"query\"") {
        Some(n) => as_choice(ctx, &format!("params.{name}.source"), n, &ParamSource::ALL),
        None => None,
    };
    let from = t.opt_str(ctx, "from").unwrap_or_else(|| name.to_string());
    let ty = t
        .opt_choice(
            ctx,
            "type",
            &[
                ("string", ParamType::String),
                ("integer", ParamType::Integer),
            ],
        )
        .unwrap_or(ParamType::String);
    let pattern = t.opt_str(ctx, "pattern");
    if let (Some(p), Some(span)) = (&pattern, ctx.span_of(&format!("params.{name}.pattern"))) {
        if let Err(e) = regex_lite::Regex::new(p) {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("`params.{name}.pattern` is not a valid regular expression: {e}"),
                "does not compile",
                "fix the regular expression (regex-lite syntax, anchored with ^…$)",
            );
        }
    }
    let max_len = t.opt_uint(ctx, "max_len", 8192).unwrap_or(256) as u32;
    let required = t.opt_bool(ctx, "required").unwrap_or(false);
    let default = t.opt_str(ctx, "default");
    let identity = t.opt_bool(ctx, "identity").unwrap_or(false);
    let allow_unverified = t
        .opt_bool(ctx, "allow_unverified_identity")
        .unwrap_or(false);
    t.finish(ctx);
    Some(Param {
        name: name.to_string(),
        source: source?,
        from,
        ty,
        pattern,
        max_len,
        required,
        default,
        identity,
        allow_unverified,
    })
}

fn identity(ctx: &mut Ctx, mut t: Table) -> Option<IdentityRules> {
    let secret = t.req_str(ctx, "secret", "\"TOKEN_HMAC_KEY\"");
    let issuer = t.req_str(ctx, "issuer", "\"https://auth.example\"");
    let audience = t.req_str(ctx, "audience", "\"recommendations\"");
    let leeway_ms = t.opt_duration(ctx, "leeway").unwrap_or(30_000);
    t.finish(ctx);
    Some(IdentityRules {
        secret: secret?,
        issuer: issuer?,
        audience: audience?,
        leeway_ms,
    })
}

fn budget(ctx: &mut Ctx, mut t: Table) -> Option<Budget> {
    let total = t.req_duration(ctx, "total", "\"60ms\"");
    let deadline = t.req_duration(ctx, "deadline", "\"45ms\"");
    t.finish(ctx);
    for (key, v) in [("total", total), ("deadline", deadline)] {
        if v == Some(0) {
            if let Some(span) = ctx.span_of(&format!("budget.{key}")) {
                ctx.error(
                    codes::INVALID_VALUE,
                    span,
                    format!("`budget.{key}` is zero"),
                    "must be positive",
                    "give the step some time, e.g. \"45ms\"",
                );
            }
        }
    }
    Some(Budget {
        total_ms: total?,
        deadline_ms: deadline?,
    })
}

fn result_path(s: &str) -> Vec<String> {
    s.split('.')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

fn origin(ctx: &mut Ctx, mut t: Table) -> Option<Origin> {
    let url = t.req_str(ctx, "url", "\"https://model.example/v1/score\"");
    if let (Some(u), Some(span)) = (&url, ctx.span_of("origin.url")) {
        if host_of(u).is_none() {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                format!("`{u}` is not an http(s) URL with a host"),
                "not a URL",
                "write the origin as \"https://host/path\"",
            );
        }
    }
    let method = match t.take(ctx, "method") {
        Some(n) => {
            let span = n.span;
            match node::as_str(ctx, "origin.method", n) {
                Some(m) => Method::parse(&m).or_else(|| {
                    ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        format!("`{m}` is not an HTTP method"),
                        "unknown method",
                        "use GET or POST",
                    );
                    None
                }),
                None => None,
            }
        }
        None => Some(Method::Post),
    };
    let attempt_timeout = t.req_duration(ctx, "attempt_timeout", "\"45ms\"");
    let connect_timeout_ms = t.opt_duration(ctx, "connect_timeout");
    let attempts = t.opt_uint(ctx, "attempts", 10).unwrap_or(1) as u32;
    if attempts == 0 {
        if let Some(span) = ctx.span_of("origin.attempts") {
            ctx.error(
                codes::INVALID_VALUE,
                span,
                "`origin.attempts` is 0: the origin would never be called",
                "at least 1",
                "set `attempts = 1` for no retry, more to retry",
            );
        }
    }
    let (backoff_base_ms, backoff_max_ms) = match t.opt_table(ctx, "backoff") {
        Some(mut b) => {
            let base = b.opt_duration(ctx, "base").unwrap_or(10);
            let max = b.opt_duration(ctx, "max").unwrap_or(base.saturating_mul(8));
            b.finish(ctx);
            (base, max)
        }
        None => (10, 80),
    };
    let retry_on = match t.opt_str_array(ctx, "retry_on") {
        Some(list) => {
            let mut r = RetryOn::none();
            for (s, span) in list {
                match s.as_str() {
                    "timeout" => r.timeout = true,
                    "connect" => r.connect = true,
                    "408" => r.status_408 = true,
                    "429" => r.status_429 = true,
                    "5xx" => r.status_5xx = true,
                    other => ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        format!("`{other}` is not a retryable outcome"),
                        "unknown outcome",
                        format!(
                            "use any of {}",
                            RetryOn::NAMES
                                .iter()
                                .map(|n| format!("`{n}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ),
                }
            }
            r
        }
        None => RetryOn {
            timeout: true,
            connect: true,
            status_408: true,
            status_429: true,
            status_5xx: true,
        },
    };
    let honor_retry_after = t.opt_bool(ctx, "honor_retry_after").unwrap_or(true);
    let idempotency_key_header = t.opt_str(ctx, "idempotency_key_header");
    let credential_secret = t.opt_str(ctx, "credential_secret");
    let credential_header = t
        .opt_str(ctx, "credential_header")
        .unwrap_or_else(|| "Authorization".into());
    let result_path = t
        .opt_str(ctx, "result_path")
        .map(|s| result_path(&s))
        .unwrap_or_else(|| vec!["items".into()]);
    let max_body_bytes = t
        .opt_uint(ctx, "max_body_bytes", 64 << 20)
        .unwrap_or(1 << 20);
    t.finish(ctx);
    Some(Origin {
        url: url?,
        method: method?,
        attempt_timeout_ms: attempt_timeout?,
        connect_timeout_ms,
        attempts,
        backoff_base_ms,
        backoff_max_ms,
        retry_on,
        honor_retry_after,
        idempotency_key_header,
        credential_secret,
        credential_header,
        result_path,
        max_body_bytes,
    })
}

/// The host of an http(s) URL, lower-cased.
pub fn host_of(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if host.starts_with('[') {
        host.split(']').next().map(|h| format!("{h}]"))?
    } else {
        host.split(':').next()?.to_string()
    };
    if host.is_empty() {
        None
    } else {
        Some(host.to_ascii_lowercase())
    }
}

fn breaker(ctx: &mut Ctx, mut t: Table) -> Option<Breaker> {
    #[derive(Clone, Copy)]
    enum Mode {
        Off,
        Consecutive,
        Rate,
    }
    let mode = match t.req(ctx, "mode", "\"rate\"") {
        Some(n) => as_choice(
            ctx,
            "breaker.mode",
            n,
            &[
                ("off", Mode::Off),
                ("consecutive", Mode::Consecutive),
                ("rate", Mode::Rate),
            ],
        ),
        None => None,
    };
    let out = match mode? {
        Mode::Off => Some(Breaker::Off),
        Mode::Consecutive => {
            let failures = t.req_uint(ctx, "failures", 1000, "3");
            let cooldown = t.req_duration(ctx, "cooldown", "\"30s\"");
            if failures == Some(0) {
                let span = ctx.span_of("breaker.failures").unwrap_or(t.span);
                ctx.error(
                    codes::INVALID_VALUE,
                    span,
                    "`breaker.failures` is 0: the breaker would open on no failure",
                    "at least 1",
                    "set the number of consecutive failures that opens it, e.g. 3",
                );
            }
            match (failures, cooldown) {
                (Some(f), Some(c)) => Some(Breaker::Consecutive {
                    failures: f as u32,
                    cooldown_ms: c,
                }),
                _ => None,
            }
        }
        Mode::Rate => {
            let window_ms = t.req_duration(ctx, "window", "\"30s\"");
            let failure_ratio = t.opt_ratio(ctx, "failure_ratio").unwrap_or(0.15);
            let min_calls = t.opt_uint(ctx, "min_calls", MAX_COUNT).unwrap_or(20) as u32;
            let slow_call_p95_ms = t.req_duration(ctx, "slow_call_p95", "\"45ms\"");
            let hold_down_ms = t.req_duration(ctx, "hold_down", "\"30s\"");
            let probe_fraction = t.opt_ratio(ctx, "probe_fraction").unwrap_or(0.02);
            let probe_min_calls =
                t.opt_uint(ctx, "probe_min_calls", MAX_COUNT).unwrap_or(20) as u32;
            let probe_success_ratio = t.opt_ratio(ctx, "probe_success_ratio").unwrap_or(0.995);
            let probe_p95_ms = t.req_duration(ctx, "probe_p95", "\"40ms\"");
            let failed_probe_hold_ms = t.opt_duration(ctx, "failed_probe_hold").unwrap_or(60_000);
            for key in ["failure_ratio", "probe_fraction"] {
                if let Some(span) = ctx.span_of(&format!("breaker.{key}")) {
                    let v = if key == "failure_ratio" {
                        failure_ratio
                    } else {
                        probe_fraction
                    };
                    if v == 0.0 {
                        ctx.error(
                            codes::INVALID_VALUE,
                            span,
                            format!("`breaker.{key}` is 0"),
                            "must be above 0",
                            "use a positive ratio, e.g. 0.15 or 0.02",
                        );
                    }
                }
            }
            (|| {
                Some(Breaker::Rate(RateBreaker {
                    window_ms: window_ms?,
                    failure_ratio,
                    min_calls,
                    slow_call_p95_ms: slow_call_p95_ms?,
                    hold_down_ms: hold_down_ms?,
                    probe_fraction,
                    probe_min_calls,
                    probe_success_ratio,
                    probe_p95_ms: probe_p95_ms?,
                    failed_probe_hold_ms,
                }))
            })()
        }
    };
    t.finish(ctx);
    out
}

fn cascade(ctx: &mut Ctx, mut t: Table) -> Option<Cascade> {
    let promise = t
        .opt_choice(
            ctx,
            "promise",
            &[
                ("always_answer", Promise::AlwaysAnswer),
                ("best_effort", Promise::BestEffort),
            ],
        )
        .unwrap_or(Promise::AlwaysAnswer);
    let mut tiers = Vec::new();
    let mut ok = true;
    match t.take(ctx, "tiers") {
        Some(Node {
            kind: NodeKind::Array(items),
            ..
        }) => {
            for (i, item) in items.into_iter().enumerate() {
                let path = format!("cascade.tiers[{i}]");
                ctx.spans.insert(path.clone(), item.span);
                match Table::new(ctx, &path, item).and_then(|tt| tier(ctx, &path, tt)) {
                    Some(tier) => tiers.push(tier),
                    None => ok = false,
                }
            }
        }
        Some(other) => {
            node::wrong_type(
                ctx,
                "cascade.tiers",
                other.span,
                "an array of tables (`[[cascade.tiers]]`)",
                &other.kind,
            );
            ok = false;
        }
        None => {}
    }
    if tiers.is_empty() && ok {
        let span = ctx.span_of("cascade.tiers").unwrap_or(t.span);
        ctx.error(
            codes::EMPTY_CASCADE,
            span,
            "the cascade has no tier",
            "no `[[cascade.tiers]]`",
            "add fallback tiers in order, ending with an `embedded` tier for endpoints that must answer",
        );
        ok = false;
    }
    t.finish(ctx);
    if !ok {
        return None;
    }
    Some(Cascade { promise, tiers })
}

fn template(ctx: &mut Ctx, path: &str, value: Option<String>) -> Option<Template> {
    let v = value?;
    match Template::parse(&v) {
        Ok(t) => Some(t),
        Err(e) => {
            let span = ctx
                .span_of(path)
                .map(|s| (s.0 + 1 + e.offset, s.0 + 2 + e.offset))
                .unwrap_or((0, 0));
            ctx.error(
                codes::BAD_TEMPLATE,
                span,
                format!("`{path}`: {}", e.message),
                "here",
                "write the key as text with `{param}` placeholders, e.g. \"user_rec:{user_id}\"",
            );
            None
        }
    }
}

fn tier(ctx: &mut Ctx, path: &str, mut t: Table) -> Option<Tier> {
    #[derive(Clone, Copy)]
    enum Kind {
        Kv,
        Embedded,
        Http,
    }
    let name = t.req_str(ctx, "name", "\"user\"");
    let kind_word = match t.req(ctx, "kind", "\"kv\"") {
        Some(n) => as_choice(
            ctx,
            &format!("{path}.kind"),
            n,
            &[
                ("kv", Kind::Kv),
                ("embedded", Kind::Embedded),
                ("http", Kind::Http),
            ],
        ),
        None => None,
    };
    let known_kind = kind_word.is_some();
    let cache_control = t.opt_str(ctx, "cache_control");
    let kind = match kind_word {
        Some(Kind::Kv) => {
            let binding = t.req_str(ctx, "binding", "\"USER_RECS\"");
            let key_src = t.req_str(ctx, "key", "\"user_rec:{user_id}\"");
            let key = template(ctx, &format!("{path}.key"), key_src);
            let max_staleness = t.req_duration(ctx, "max_staleness", "\"4h\"");
            let read_timeout = t.req_duration(ctx, "read_timeout", "\"8ms\"");
            let write_through = t.opt_bool(ctx, "write_through").unwrap_or(false);
            let refresh_ms = t.opt_duration(ctx, "refresh").unwrap_or(60_000);
            if refresh_ms < 1_000 {
                if let Some(span) = ctx.span_of(&format!("{path}.refresh")) {
                    ctx.error(
                        codes::INVALID_VALUE,
                        span,
                        "Workers KV takes at most one write per key per second",
                        "below 1s",
                        "set `refresh` to 1s or more",
                    );
                }
            }
            (|| {
                Some(TierKind::Kv(KvTier {
                    binding: binding?,
                    key: key?,
                    max_staleness_ms: max_staleness?,
                    read_timeout_ms: read_timeout?,
                    write_through,
                    refresh_ms,
                }))
            })()
        }
        Some(Kind::Embedded) => {
            #[derive(Clone, Copy)]
            enum Mode {
                Curated,
                Keyword,
            }
            let mode = t
                .opt_choice(
                    ctx,
                    "mode",
                    &[("curated", Mode::Curated), ("keyword", Mode::Keyword)],
                )
                .unwrap_or(Mode::Curated);
            let limit = t.opt_uint(ctx, "limit", 1000).unwrap_or(10) as u32;
            match mode {
                Mode::Curated => {
                    let by = t.opt_str(ctx, "by");
                    Some(TierKind::Embedded(EmbeddedTier::Curated { by, limit }))
                }
                Mode::Keyword => {
                    let query = t.req_str(ctx, "query", "\"q\"");
                    query.map(|query| TierKind::Embedded(EmbeddedTier::Keyword { query, limit }))
                }
            }
        }
        Some(Kind::Http) => {
            let url = t.req_str(ctx, "url", "\"https://fallback-model.example/v1/score\"");
            let timeout = t.req_duration(ctx, "timeout", "\"100ms\"");
            let credential_secret = t.opt_str(ctx, "credential_secret");
            let rp = t
                .opt_str(ctx, "result_path")
                .map(|s| result_path(&s))
                .unwrap_or_else(|| vec!["items".into()]);
            match (url, timeout) {
                (Some(url), Some(timeout_ms)) => Some(TierKind::Http(HttpTier {
                    url,
                    timeout_ms,
                    credential_secret,
                    result_path: rp,
                })),
                _ => None,
            }
        }
        None => None,
    };
    // When the kind is unknown its keys cannot be judged: report the kind alone.
    if known_kind {
        t.finish(ctx);
    }
    Some(Tier {
        name: name?,
        kind: kind?,
        cache_control,
    })
}

fn default_disclosure() -> Disclosure {
    Disclosure {
        cache_control: None,
        private_cache_control: "private, max-age=30".into(),
        live_cache_control: "private, no-store".into(),
        retry_after_s: None,
        body_fields: true,
    }
}

fn disclosure(ctx: &mut Ctx, mut t: Table) -> Option<Disclosure> {
    let d = default_disclosure();
    let cache_control = t.opt_str(ctx, "cache_control");
    let private_cache_control = t
        .opt_str(ctx, "private_cache_control")
        .unwrap_or(d.private_cache_control);
    let live_cache_control = t
        .opt_str(ctx, "live_cache_control")
        .unwrap_or(d.live_cache_control);
    let retry_after_s = t
        .opt_duration(ctx, "retry_after")
        .map(|ms| ms.div_ceil(1000) as u32);
    let body_fields = t.opt_bool(ctx, "body_fields").unwrap_or(true);
    t.finish(ctx);
    for key in [
        "cache_control",
        "private_cache_control",
        "live_cache_control",
    ] {
        let path = format!("disclosure.{key}");
        if let Some(span) = ctx.span_of(&path) {
            let v = match key {
                "cache_control" => cache_control.clone().unwrap_or_default(),
                "private_cache_control" => private_cache_control.clone(),
                _ => live_cache_control.clone(),
            };
            check_header_value(ctx, &path, span, &v);
        }
    }
    Some(Disclosure {
        cache_control,
        private_cache_control,
        live_cache_control,
        retry_after_s,
        body_fields,
    })
}

fn check_header_value(ctx: &mut Ctx, path: &str, span: Span, v: &str) {
    if v.chars().any(|c| c.is_control() || !c.is_ascii()) {
        ctx.error(
            codes::INVALID_VALUE,
            span,
            format!("`{path}` contains characters a header value cannot hold"),
            "control or non-ASCII characters",
            "use printable ASCII only",
        );
    }
}

fn storm(ctx: &mut Ctx, mut t: Table) -> Option<Storm> {
    let binding = t.req_str(ctx, "binding", "\"STORM_LIMITER\"");
    let max_retries = t.opt_uint(ctx, "max_retries", 1000).unwrap_or(2) as u32;
    let window_ms = t.opt_duration(ctx, "window").unwrap_or(10_000);
    if window_ms != 10_000 && window_ms != 60_000 {
        let span = ctx.span_of("storm.window").unwrap_or(t.span);
        ctx.error(
            codes::INVALID_VALUE,
            span,
            "the Workers Rate Limiting binding counts over 10 s or 60 s windows only",
            "not 10s or 60s",
            "set `window = \"10s\"` (seed 000) or \"60s\"",
        );
    }
    t.finish(ctx);
    Some(Storm {
        binding: binding?,
        max_retries,
        window_ms,
    })
}

fn catalog(ctx: &mut Ctx, mut t: Table) -> Option<CatalogRules> {
    let stubs = t.req_str(ctx, "stubs", "\"recommendations.catalog.json\"");
    let inventory = t.req_str(ctx, "inventory", "\"recommendations.inventory.json\"");
    let max_age_ms = t.opt_duration(ctx, "max_age").unwrap_or(86_400_000);
    let min_stock = t.opt_uint(ctx, "min_stock", u32::MAX as u64).unwrap_or(50);
    let on_expired = t
        .opt_choice(
            ctx,
            "on_expired",
            &[
                ("refuse", OnExpired::Refuse),
                ("disclose", OnExpired::Disclose),
            ],
        )
        .unwrap_or(OnExpired::Refuse);
    t.finish(ctx);
    Some(CatalogRules {
        stubs: stubs?,
        inventory: inventory?,
        max_age_ms,
        min_stock,
        on_expired,
    })
}

fn admin(ctx: &mut Ctx, mut t: Table) -> Option<Admin> {
    let path = t
        .opt_str(ctx, "path")
        .unwrap_or_else(|| "/__understudy/status".into());
    let secret = t.req_str(ctx, "secret", "\"ADMIN_TOKEN\"");
    t.finish(ctx);
    Some(Admin {
        path,
        secret: secret?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_extracted_for_domain_checks() {
        assert_eq!(
            host_of("https://ML.example:8443/x").as_deref(),
            Some("ml.example")
        );
        assert_eq!(
            host_of("http://user@127.0.0.1:8788").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(host_of("ftp://x"), None);
        assert_eq!(host_of("https:///x"), None);
    }
}
