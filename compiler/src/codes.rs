//! Every diagnostic code, with the page `understudy explain CODE` prints.
//!
//! Codes are stable: tools and CI scripts match on them. They are a typed enum (like
//! cargo-deny's `Code`) whose strings, rules, titles and pages sit in the one table below,
//! so a misspelt code is a compile error and nothing can drift between the enum and its
//! documentation. A test keeps the strings unique and `docs/diagnostics.md` generated from
//! this table.

use serde::{Serialize, Serializer};

macro_rules! codes {
    ($( $variant:ident = $code:literal, $rule:literal, $title:literal, $page:literal; )*) => {
        /// A diagnostic code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $( $variant, )* }

        impl Code {
            /// Every code, in documentation order.
            pub const ALL: &'static [Code] = &[ $( Code::$variant, )* ];

            /// The stable string (`ERR_BUDGET_EXCEEDED`).
            pub const fn as_str(self) -> &'static str {
                match self { $( Code::$variant => $code, )* }
            }

            /// The spec rule it enforces (`C-BUDGET`, …) or the kind of input problem.
            pub const fn rule(self) -> &'static str {
                match self { $( Code::$variant => $rule, )* }
            }

            pub const fn title(self) -> &'static str {
                match self { $( Code::$variant => $title, )* }
            }

            /// Why it is a problem and how to fix it.
            pub const fn page(self) -> &'static str {
                match self { $( Code::$variant => $page, )* }
            }
        }
    };
}

codes! {
    PolicyUnreadable = "ERR_POLICY_UNREADABLE", "input",
        "the policy file cannot be read",
        "The file does not exist, is not a regular file (a directory, a FIFO, a device), is not\n\
         readable, is larger than 1 MiB or is not UTF-8. Check the path; policies are small UTF-8\n\
         TOML files. `check` never opens anything but a regular file, so it cannot hang on a FIFO.";
    TomlSyntax = "ERR_TOML_SYNTAX", "input",
        "the policy is not valid TOML",
        "The file could not be parsed as TOML (an unterminated string, a missing `=`, a\n\
         duplicate key or table, …). The span points at where the parser stopped. Fix the\n\
         syntax; nothing else can be checked until the file parses.";
    UnknownKey = "ERR_UNKNOWN_KEY", "input",
        "a key the policy language does not have",
        "Every table accepts a fixed set of keys (see docs/policy.md); which keys a tier or a\n\
         breaker accepts depends on its `kind` or `mode`. An unknown key is usually a typo, and\n\
         silently ignoring it would drop a setting you meant to make. The message lists the\n\
         expected keys and suggests the closest one. An unknown key does not stop the other\n\
         checks: the rest of its table is still checked.";
    MissingKey = "ERR_MISSING_KEY", "input",
        "a required key is missing",
        "Some keys have no safe default: the route, the budget, the origin URL, a tier's kind…\n\
         Add the key named in the message; docs/policy.md gives its meaning.";
    WrongType = "ERR_WRONG_TYPE", "input",
        "a value of the wrong type",
        "The key exists but its value has another TOML type (a number where a string is\n\
         expected, a table where an array is expected…). Change the value to the type the\n\
         message names.";
    BadDuration = "ERR_BAD_DURATION", "input",
        "a duration that cannot be read",
        "Durations are strings of a whole number and one unit, written as humans write them:\n\
         `45ms`, `5s`, `30m`, `4h`, `1d`. A bare number is refused because its unit would be a\n\
         guess; so are spaces, signs, fractions and combined units (`1m30s`: write `90s`). The\n\
         message names the fix.";
    InvalidValue = "ERR_INVALID_VALUE", "input",
        "a value outside what the key accepts",
        "The value has the right type but is not allowed: an unknown enum word, a URL that is\n\
         not an http(s) URL with a host, a route that is not a path, a regular expression that\n\
         does not compile, a binding name that is not a JavaScript identifier.";
    OutOfRange = "ERR_OUT_OF_RANGE", "C-RANGE",
        "a number outside its documented valid range",
        "Every duration, count, ratio and size that controls a mechanism has a valid range\n\
         (docs/policy.md lists each one). A value that switches the mechanism off — a zero\n\
         timeout, window, cool-down, limit or length, `Retry-After: 0`, a backoff base above its\n\
         maximum — would make the edge behave as if the setting were not there, so it is\n\
         refused; so are values past the upper end, which the platform or the edge cannot\n\
         honour. The message gives the range.";
    BadHeaderValue = "ERR_BAD_HEADER_VALUE", "C-HEADER",
        "a string the edge must write into a header is not valid there",
        "Tier names (`X-Fallback-Tier`), Cache-Control values, header parameter names and the\n\
         credential and idempotency header names reach HTTP headers. The Workers runtime drops\n\
         (or throws on) a header that breaks RFC 9110's grammar, so such a value would vanish\n\
         at runtime. Header names must be tokens (letters, digits and `!#$%&'*+-.^_`|~`);\n\
         Cache-Control must be comma-separated directives (`public, max-age=30`); tier and\n\
         service names are letters, digits, `.`, `_` and `-`, starting with a letter or digit.";
    BadTemplate = "ERR_BAD_TEMPLATE", "input",
        "a key template that does not parse",
        "KV key templates are literal text with `{param}` placeholders, e.g.\n\
         `user_rec:{user_id}`. Braces must pair and hold a parameter name; the template may not\n\
         be empty.";
    UnknownTemplateParam = "ERR_UNKNOWN_TEMPLATE_PARAM", "P-TIERS",
        "a template or tier refers to a parameter that is not declared",
        "Key templates, `by` and `query` read request parameters by name. Declare the\n\
         parameter under `[params.NAME]` (with its source and pattern) or fix the name.";
    ParamDefaultInvalid = "ERR_PARAM_DEFAULT_INVALID", "C-PARAMS",
        "a parameter's default fails the parameter's own validation",
        "The edge validates every parameter before any I/O, and a default is used exactly when\n\
         the request lacks the parameter. A default that does not match the parameter's\n\
         `pattern`, `type` or `max_len` turns every request without the parameter into a 400.\n\
         Fix the default, or the rule it breaks.";
    RouteParamMismatch = "ERR_ROUTE_PARAM_MISMATCH", "C-PARAMS",
        "path parameters and route segments do not match",
        "Every `{name}` segment of `service.route` must be read by a parameter with\n\
         `source = \"path\"` (its `from`, or its name), and every path parameter must name a\n\
         segment of the route; otherwise a parameter is never filled (and a required one makes\n\
         every request a 400) or a segment is matched but never validated.";
    KvKeyTooLong = "ERR_KV_KEY_TOO_LONG", "C-PARAMS",
        "a KV key can exceed Workers KV's 512-byte key limit",
        "Workers KV refuses keys longer than 512 bytes, so a long parameter would turn the\n\
         tier's reads (and write-through) into errors. The longest key is computed from the\n\
         template's literal text and each parameter's `max_len`: identity parameters become 32\n\
         hex digits, `integer` parameters at most `max_len` bytes, other values up to three bytes\n\
         per byte (percent-encoding). Lower the `max_len` of the parameters the notes name, or\n\
         set `hash_key = true` on the tier so the edge stores the key as its literal prefix and\n\
         a SHA-256.";
    AdminPathOverlap = "ERR_ADMIN_PATH_OVERLAP", "P-ROUTE",
        "the admin path overlaps the service route",
        "The status endpoint answers its path (and everything under it) before the service\n\
         route is matched, behind the admin token: an admin path equal to the route, under it,\n\
         or above it would answer clients with 401 instead of serving them. Move `admin.path`\n\
         out of the service's route, e.g. `/__understudy/status`.";
    DuplicateTier = "ERR_DUPLICATE_TIER", "P-TIERS",
        "two tiers share a name",
        "Tier names appear in `X-Fallback-Tier`, logs and metrics; two tiers with one name\n\
         make those ambiguous. Rename one.";
    EmptyCascade = "ERR_EMPTY_CASCADE", "P-TIERS",
        "the cascade has no tier",
        "A policy without a fallback tier protects nothing. Add at least one\n\
         `[[cascade.tiers]]`; an endpoint that must answer ends with an `embedded` tier.";
    BudgetExceeded = "ERR_BUDGET_EXCEEDED", "C-BUDGET",
        "the worst-case path does not fit the total budget",
        "The worst case is the origin race (the deadline, or every attempt with its backoff\n\
         when that is shorter) followed by every fallback tier that can run, each taking its\n\
         full timeout. If that sum exceeds `budget.total`, a request can answer late even\n\
         though every piece behaved as configured. The notes show the arithmetic. Lower the\n\
         deadline, a tier timeout, or the attempts; or raise the budget if the SLA allows.";
    NoSlack = "ERR_BUDGET_NO_SLACK", "C-SLACK",
        "a tier that can run after the deadline has no room to run",
        "A tier runs only when its whole timeout fits in what is left of the budget. Inside a\n\
         Worker the clock advances only across I/O and a timer fires at its time or later, so\n\
         every timed step (the race, each read) can end a little after its nominal end: the\n\
         budget keeps a minimum slack per timed step (`budget.slack`, default 1ms, at least\n\
         1ms). A path that closes exactly — a 9.5s deadline and a 500ms read in a 10s budget —\n\
         never gives the tier its turn at runtime: every timeout would be a 504. The notes show\n\
         the arithmetic for each tier; lower the deadline or the tier's timeout.";
    FinalTierNotLocal = "ERR_FINAL_TIER_NOT_LOCAL", "C-LOCAL-LAST",
        "a cascade that promises an answer does not end locally",
        "With `cascade.promise = \"always_answer\"` the last tier is the final net: it must\n\
         survive total network loss, so it must be `embedded` (answered from the baked\n\
         catalog, no I/O). Add an embedded tier last, or declare `promise = \"best_effort\"`\n\
         and accept 504/503 answers.";
    SharedFailureDomain = "ERR_SHARED_FAILURE_DOMAIN_DETECTED", "C-DOMAIN",
        "a fallback tier shares a failure domain with the origin",
        "A fallback that fails together with the origin is no fallback (seed 000,\n\
         ADV-FD-01): an HTTP tier on the origin's host, a tier using the origin's credential\n\
         secret, or a binding name shared with the origin's secrets. Move the tier to its own\n\
         host and credential.";
    UntestedCompensation = "ERR_UNTESTED_COMPENSATION_REJECTED", "C-STUBS",
        "stub SKUs that did not pass inventory validation",
        "Every SKU baked into the embedded catalog must be in the inventory snapshot, active,\n\
         with stock above `catalog.min_stock` (seed: 50), and the snapshot must be younger\n\
         than `catalog.max_age` (seed: 24h). Serving unvalidated stubs sent customers to\n\
         discontinued products (seed 000, ADV-UC-01). Every offending SKU is listed with its\n\
         reason; remove it from the catalog or refresh the snapshot. `--now` fixes the\n\
         clock for reproducible checks.";
    PublishedWriteThrough = "ERR_PUBLISHED_WRITE_THROUGH", "C-STUBS",
        "a published (curated) tier would be overwritten by the edge",
        "A tier with `published = true` holds lists `understudy publish` validated against the\n\
         inventory; the edge answers from it only with that validation in an entry's metadata.\n\
         `write_through = true` makes the edge write every live answer to the tier's key, without\n\
         a validation: each write would replace a curated list with one the tier then refuses\n\
         (`KV_NOT_VALIDATED`), so the tier would empty itself as traffic flows. Remove\n\
         `write_through` from the published tier, or write live answers to a tier of their own.";
    StubsExpire = "WARN_STUBS_EXPIRE", "C-EXPIRY",
        "warning: the baked stubs stop answering on a known date",
        "With `catalog.on_expired = \"refuse\"` the edge skips the embedded tier once the\n\
         inventory snapshot is older than `catalog.max_age`. When that tier is the final net of\n\
         an `always_answer` cascade, every model failure after that instant is a 503: a missed\n\
         nightly re-bake becomes an outage. The warning names the instant and what to run\n\
         before it (`understudy bake` with a fresh snapshot). To serve expired stubs with\n\
         `X-Catalog-Expired: true` instead, set `on_expired = \"disclose\"`.";
    NoMatchUnanswered = "WARN_NO_MATCH_UNANSWERED", "C-EXPIRY",
        "warning: the final keyword tier has no answer for some requests",
        "A keyword tier answers what matches the query. With `no_match = \"next_tier\"` a query\n\
         that shares no word with the catalog (or a request without the query) passes to the\n\
         next tier — and after the final tier of an `always_answer` cascade there is none, so\n\
         the promised answer becomes a 503. Let it answer the curated list (`no_match =\n\
         \"curated\"`, the default) or an empty, disclosed result (`no_match = \"empty\"`).";
    SharedCachePerUser = "ERR_SHARED_CACHE_PER_USER", "C-PRIVATE",
        "a per-user tier would be cached publicly",
        "A tier keyed by a user identity answers one user's data; with a shared-cacheable\n\
         `Cache-Control` (public, s-maxage, or without `private`/`no-store`) a CDN could serve\n\
         it to other users. Give the tier (or `disclosure.private_cache_control`) a `private`\n\
         Cache-Control.";
    LiveAnswerPublic = "ERR_LIVE_ANSWER_PUBLIC", "C-PRIVATE",
        "personalised live answers would be cached publicly",
        "When a parameter is an identity, the origin's live answers are personalised\n\
         (`is_personalized: true`): with a shared-cacheable `disclosure.live_cache_control` a\n\
         CDN could serve one user's live answer to another. Make it `private` or `no-store`\n\
         (the default is `private, no-store`).";
    UnverifiedIdentity = "ERR_UNVERIFIED_IDENTITY", "C-PRIVATE",
        "a user identity taken from an unverified source",
        "An identity parameter read from the query, a header or the path can be set by anyone,\n\
         so anyone could read anyone's per-user tier. Read it from a verified token claim\n\
         (`source = \"token_claim\"` with an `[identity]` table), or opt out explicitly with\n\
         `allow_unverified_identity = true` (reported as a warning).";
    UnverifiedIdentityOptOut = "WARN_UNVERIFIED_IDENTITY_OPT_OUT", "C-PRIVATE",
        "warning: an identity parameter is explicitly unverified",
        "The policy opted out of verified identity for this parameter. This is allowed for\n\
         development and for non-sensitive data only; any client can read any user's tier.";
    PlaintextCredential = "WARN_PLAINTEXT_CREDENTIAL", "C-DOMAIN",
        "warning: a credential would be sent over plain http",
        "The origin (or an HTTP tier) is an `http://` URL and the policy sends it a credential\n\
         from a secret binding: anyone on the path can read it. Use `https://`; plain http is\n\
         for a simulated origin on loopback only.";
    Unenforceable = "WARN_UNENFORCEABLE_SETTING", "P-ORIGIN",
        "warning: a setting the Workers runtime cannot enforce",
        "The policy declares something the edge cannot do: Workers' `fetch` has no connect\n\
         timeout, so `origin.connect_timeout` is documentation only (the attempt timeout and the\n\
         race deadline still bound the call). Remove it, or keep it knowing it is not enforced.";
    UnthrottledDegradation = "ERR_UNTHROTTLED_DEGRADATION", "C-STORM",
        "degraded answers without Retry-After or Cache-Control",
        "Clients that retry degraded answers immediately multiplied seed 000's traffic from\n\
         2,400 to 12,000 req/s. Degraded answers must carry `Retry-After`\n\
         (`disclosure.retry_after`) and a `Cache-Control` (`disclosure.cache_control`, or a\n\
         per-tier `cache_control`).";
    UnsafeRetry = "ERR_UNSAFE_RETRY", "C-STORM",
        "retries of a non-idempotent origin call without an idempotency key",
        "Retrying a POST or PATCH can repeat its side effect. Set `origin.attempts = 1`, or\n\
         declare `origin.idempotency_key_header` so every attempt carries the same key.";
    BreakerNeverTriggers = "ERR_BREAKER_NEVER_TRIGGERS", "P-BREAKER",
        "breaker settings that can never trigger at the declared traffic",
        "With `service.expected_rps` declared, a rate breaker whose `min_calls` exceeds the\n\
         calls one window can hold never opens, and a probe whose `probe_min_calls` exceeds\n\
         the probe traffic one window can hold never closes. The notes show the arithmetic.";
    FleetReportInterval = "ERR_FLEET_REPORT_INTERVAL", "F-SCOPE",
        "the fleet's report interval is too long for the breaker's window",
        "In fleet scope (`breaker.scope = \"fleet\"`) each isolate reports its window to the\n\
         coordinator every `report_interval` while anything is abnormal, and learns the\n\
         fleet's verdict from the reply: the fleet decides at most two intervals after the\n\
         evidence is there. Over a tenth of `breaker.window` (3 s for seed 000's 30 s window,\n\
         its bound to degrade), the fleet would decide later than one isolate alone. Shorten\n\
         `report_interval` or lengthen `window` (docs/adr/011-fleet-scoped-breaker.md).";
    FleetVerdictTtl = "ERR_FLEET_VERDICT_TTL", "F-SCOPE",
        "a fleet verdict would expire before the next one arrives",
        "An isolate applies the coordinator's verdict for `verdict_ttl` after it arrives, then\n\
         falls back to its own evidence. Shorter than two report intervals, one late or lost\n\
         report makes every isolate drop the fleet's verdict and flap between fleet and\n\
         isolate scope. Set `verdict_ttl` to at least twice `report_interval` (the default is\n\
         three times).";
    FleetCoordinatorBinding = "ERR_FLEET_COORDINATOR_BINDING", "F-SCOPE",
        "the coordinator's binding name is taken by another binding",
        "`understudy build` declares the coordinator as a Durable Object namespace bound as\n\
         `breaker.coordinator` (default `BREAKER_COORDINATOR`). A Worker's bindings share one\n\
         namespace (`env.NAME`): a KV namespace, secret, rate limit or Durable Object of the\n\
         same name would hide it, and every report would fail. Rename one of them.";
    FleetCoordinatorSecret = "ERR_FLEET_COORDINATOR_SECRET", "F-SCOPE",
        "the coordinator's binding name is a secret the Worker reads",
        "The coordinator's Durable Object binding and the Worker's secrets (the admin token,\n\
         the identity key, the origin's and a tier's credential, the events' encryption key and\n\
         delivery credential) share one namespace (`env.NAME`). Bound under a secret's name, the\n\
         coordinator hides that secret: the Worker reads an object where it expects the secret,\n\
         and what the secret guards fails closed — with `coordinator = \"ADMIN_TOKEN\"` the right\n\
         admin token is answered 401. Rename the coordinator (the default is\n\
         `BREAKER_COORDINATOR`).";
    FleetSettingsUnused = "WARN_FLEET_SETTINGS_UNUSED", "F-SCOPE",
        "warning: fleet settings on a breaker in isolate scope",
        "`coordinator`, `report_interval` and `verdict_ttl` only matter in fleet scope (the\n\
         default); with `breaker.scope = \"isolate\"` nothing reads them. Set the scope you\n\
         meant, or remove them.";
    IsolateScope = "WARN_ISOLATE_SCOPE", "F-SCOPE",
        "warning: in isolate scope each isolate recovers on its own probes alone",
        "With `breaker.scope = \"isolate\"` every isolate opens and closes its breaker on what\n\
         it sees itself. To close, an isolate needs `probe_min_calls` probes, one in\n\
         1 / `probe_fraction` of its own requests after the first: 951 requests for seed\n\
         000's 20 probes at 2%. An isolate that sees fewer than that over one `window`\n\
         recovers later than `hold_down` plus `window` after the model is healthy again; a\n\
         Worker spread over many isolates sees a small share of the service's traffic in\n\
         each (seed 000's 2,400 req/s over ~300 isolates is ~8 req/s each: 2 minutes of\n\
         probing, and `ALERT_RECOVERY_PROBE_STALLED` after every incident). The note gives\n\
         the per-isolate traffic this policy needs. Fleet scope, the default, pools every\n\
         isolate's probes through a coordinator (docs/fleet.md): remove `breaker.scope`\n\
         unless every isolate of the service sees more than that.";
    RolloutSteps = "ERR_ROLLOUT_STEPS", "R-GRADUAL",
        "the rollout's steps do not increase to 100%",
        "`rollout.steps` are the new version's share of traffic at each step of a rollout, in\n\
         percent. They must increase (a step back would move traffic the controller already\n\
         judged) and end at 100 (a rollout that stops short never finishes: the old version\n\
         keeps serving for ever). The default is [1, 10, 50, 100].";
    RolloutMinAnswers = "WARN_ROLLOUT_MIN_ANSWERS", "R-GRADUAL",
        "warning: too few answers for a faultless release to advance at the first judgement",
        "A step advances only when the evidence shows the new version within each margin: its\n\
         share's one-sided 99% upper bound must be at most the old version's lower bound plus\n\
         the margin. With no failures at all, n answers give an upper bound of about\n\
         5.4 / (n + 5.4), so a margin m needs about 5.4 (1 - m) / m answers — 1,077 for the\n\
         default no-tier 5xx margin of 0.005. With `min_answers` below that, every step holds\n\
         at least once and a thin service may run out of holds (`max_holds`) and roll a good\n\
         release back; with a margin of 0 no release can ever advance. Raise `min_answers` or\n\
         widen the margin.";
    CatalogUnreadable = "ERR_CATALOG_UNREADABLE", "P-CATALOG",
        "the catalog or inventory snapshot cannot be read",
        "The file named by `catalog.stubs` or `catalog.inventory` (relative to the policy)\n\
         is missing, not a regular file, unreadable, larger than 64 MiB, or not UTF-8.";
    PathOutsidePolicyDir = "ERR_PATH_OUTSIDE_POLICY_DIR", "P-CATALOG",
        "a catalog path leads outside the policy's directory",
        "`catalog.stubs` and `catalog.inventory` are resolved relative to the policy file and\n\
         must stay inside its directory tree (after following symbolic links): a policy must\n\
         not make the compiler read — and quote in its diagnostics — any file on the machine.\n\
         Move the files next to the policy, or pass `--allow-outside-paths` when the layout is\n\
         intended.";
    CatalogMalformed = "ERR_CATALOG_MALFORMED", "P-CATALOG",
        "the catalog or inventory snapshot is malformed",
        "The file is not the expected JSON (see docs/policy.md, \"Catalog files\"): the\n\
         message gives the line and column, and quotes at most a short excerpt of the line.\n\
         Duplicate SKUs, empty SKUs and a snapshot time that is not RFC 3339 are reported here\n\
         too (duplicates once, with every repeated SKU in the notes).";
    ModuleTooLarge = "ERR_MODULE_TOO_LARGE", "B-DIST",
        "the baked module is over the platform's size limit",
        "Workers refuses a Worker over 64 MiB uncompressed, on every plan (Cloudflare's\n\
         Workers limits page, as of September 2026; the compressed caps of 3 MiB free and\n\
         10 MiB paid are gone). `--size-limit SIZE` checks the raw module against a smaller\n\
         figure, never a larger one; `--gzip-limit SIZE` adds an opt-in budget on the gzipped\n\
         size, for start-up time. The baked catalog is the part that grows: the message gives\n\
         the module's size and the SKU count. Trim the catalog (the final net needs a curated\n\
         list, not the whole inventory).";
    EventsPermanentRetry = "ERR_EVENTS_PERMANENT_RETRY", "V-DELIVER",
        "a permanent failure listed as retryable",
        "`[events.retry] retry_on` names what is retried: `timeout`, `connect`, `408`, `429`,\n\
         `5xx`. A consumer's other 4xx (`400`, `401`, `403`, `422`, `4xx`…) refuses the event\n\
         itself — its schema or the edge's credential — and repeating it cannot succeed: it\n\
         only delays the dead letter and hammers the consumer (seed 004: \"do not retry\n\
         permanent 4xx schema/authentication errors\"). Remove it; fix the event or the\n\
         credential and replay the dead letter.";
    EventsRetryWindow = "ERR_EVENTS_RETRY_WINDOW", "V-DELIVER",
        "the retry schedule does not fit its window",
        "Every attempt of an event must start within `[events.retry] window` (seed 004: 8\n\
         attempts over 15 minutes). The worst case is every full-jitter wait at its ceiling\n\
         (`base`, doubling, at most `max`) plus every attempt taking its whole\n\
         `[events.delivery] attempt_timeout`; the notes show the arithmetic. Lower the\n\
         attempts, the backoff or the attempt timeout, or widen the window. At run time a\n\
         consumer's `Retry-After` may still use the window up sooner: the event is then\n\
         dead-lettered as exhausted.";
    EventsSchemaVersions = "ERR_EVENTS_SCHEMA_VERSIONS", "V-INGEST",
        "an event type without its prior schema version, or with one declared twice",
        "Producers upgrade one at a time, so the edge accepts the current schema version of\n\
         each type and at least the one before it (seed 004: \"backward compatible for at\n\
         least one prior schema version\"). A type whose highest version N is above 1 must\n\
         also declare N−1 (`[[events.types]]` with the same `name`, `version = N-1` and the\n\
         fields it requires); each (name, version) is declared once.";
    EventsUnauthenticated = "ERR_EVENTS_UNAUTHENTICATED", "V-INGEST",
        "events without caller authentication or without an operator secret",
        "The edge records each event's tenant from the caller's verified token, so\n\
         `[events]` needs `[identity]` (the token rules); and list, inspect, replay and skip\n\
         are operator endpoints behind `[admin]`'s secret. Add the missing table. The\n\
         encryption key must also be a secret of its own, not the identity, admin or\n\
         consumer secret.";
    EventsOrderRelaxed = "WARN_EVENTS_ORDER_RELAXED", "V-ORDER",
        "warning: a dead letter does not hold its aggregate",
        "With `[events] dead_letter = \"continue\"` an aggregate's later events are delivered\n\
         past its dead letter, and a replayed dead letter then arrives out of order. That is\n\
         a choice for consumers that do not depend on order; the safe default is `\"hold\"`:\n\
         later events wait, reported and alerted, until an operator replays or skips it.";
}

/// Kept for `release::size`, which names the code by this constant.
pub const MODULE_TOO_LARGE: Code = Code::ModuleTooLarge;

impl Code {
    /// A warning code (`WARN_…`) rather than an error.
    pub fn is_warning(self) -> bool {
        self.as_str().starts_with("WARN_")
    }

    /// The code whose string is `s` (any case).
    pub fn find(s: &str) -> Option<Code> {
        Code::ALL
            .iter()
            .copied()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_strings_are_unique_and_prefixed_by_severity() {
        let mut seen = std::collections::BTreeSet::new();
        for c in Code::ALL {
            assert!(seen.insert(c.as_str()), "duplicate code {c}");
            assert!(
                c.as_str().starts_with("ERR_") || c.as_str().starts_with("WARN_"),
                "{c}"
            );
            assert!(!c.title().is_empty() && !c.page().is_empty(), "{c}");
        }
    }

    #[test]
    fn every_code_is_documented_in_docs() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/diagnostics.md"
        ))
        .expect("docs/diagnostics.md exists");
        for c in Code::ALL {
            assert!(
                doc.contains(&format!("## {c}\n")),
                "docs/diagnostics.md lacks a section for {c}"
            );
        }
    }

    #[test]
    fn codes_are_found_by_their_string_in_any_case() {
        assert_eq!(
            Code::find("err_budget_exceeded"),
            Some(Code::BudgetExceeded)
        );
        assert_eq!(Code::find("ERR_NOPE"), None);
    }
}
