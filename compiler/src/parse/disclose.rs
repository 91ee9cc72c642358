//! `[disclosure]`, `[storm]`, `[catalog]` and `[admin]`: how degraded answers say so and
//! are throttled, the stub catalog, the status endpoint [P-DISCLOSE] [P-STORM] [P-CATALOG].

use schemars::JsonSchema;
use toml_span::value::Value;
use toml_span::{DeserError, Deserialize};
use understudy_core::policy::{Admin, CatalogRules, Disclosure, OnExpired, Storm};

use super::leaf::*;
use super::origin::{DAY, HOUR};
use super::route::bug;
use super::table::{Problems, Table, Unknown};

/// [P-DISCLOSE] How degraded answers say so.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Disclosure")]
pub struct RawDisclosure {
    /// Cache-Control of degraded answers from shared tiers.
    pub cache_control: Option<Spanned<CacheControl>>,
    /// Cache-Control of degraded answers from per-user tiers (default private, max-age=30).
    pub private_cache_control: Option<Spanned<CacheControl>>,
    /// Cache-Control of live answers (default private, no-store).
    pub live_cache_control: Option<Spanned<CacheControl>>,
    /// Retry-After on degraded answers and retryable errors (1s..=1d).
    pub retry_after: Option<Spanned<Dur<1_000, DAY>>>,
    /// Add degraded / is_personalized to the body (default true).
    pub body_fields: Option<Spanned<Flag>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawDisclosure {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let cache_control = t.opt("cache_control");
        let private_cache_control = t.opt("private_cache_control");
        let live_cache_control = t.opt("live_cache_control");
        let retry_after = t.opt("retry_after");
        let body_fields = t.opt("body_fields");
        let unknown = Unknown(t.finish()?);
        Ok(RawDisclosure {
            cache_control,
            private_cache_control,
            live_cache_control,
            retry_after,
            body_fields,
            span,
            unknown,
        })
    }
}

impl Problems for RawDisclosure {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

pub const DEFAULT_PRIVATE_CACHE_CONTROL: &str = "private, max-age=30";
pub const DEFAULT_LIVE_CACHE_CONTROL: &str = "private, no-store";

/// The disclosure of a policy without a `[disclosure]` table.
pub fn default_disclosure() -> Disclosure {
    Disclosure {
        cache_control: None,
        private_cache_control: DEFAULT_PRIVATE_CACHE_CONTROL.into(),
        live_cache_control: DEFAULT_LIVE_CACHE_CONTROL.into(),
        retry_after_s: None,
        body_fields: true,
    }
}

impl RawDisclosure {
    pub fn lower(&self) -> Disclosure {
        let s = |v: &Option<Spanned<CacheControl>>, d: &str| {
            v.as_ref()
                .map_or_else(|| d.to_string(), |c| c.value.0.clone())
        };
        Disclosure {
            cache_control: self.cache_control.as_ref().map(|c| c.value.0.clone()),
            private_cache_control: s(&self.private_cache_control, DEFAULT_PRIVATE_CACHE_CONTROL),
            live_cache_control: s(&self.live_cache_control, DEFAULT_LIVE_CACHE_CONTROL),
            // At most a day: whole seconds fit a u32.
            retry_after_s: self.retry_after.map(|r| r.value.0.div_ceil(1000) as u32),
            body_fields: self.body_fields.is_none_or(|b| b.value.0),
        }
    }
}

/// The Rate Limiting binding counts over 10 s or 60 s windows only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StormWindow(pub u64);

impl Words for StormWindow {
    const NAME: &'static str = "StormWindow";
    const ALL: &'static [(&'static str, StormWindow)] =
        &[("10s", StormWindow(10_000)), ("60s", StormWindow(60_000))];
}

/// [P-STORM] Client retry-storm limit.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Storm")]
pub struct RawStorm {
    /// Rate Limiting binding.
    pub binding: Spanned<Binding>,
    /// Retries allowed in the window (default 2, 0..=1000).
    pub max_retries: Option<Spanned<Count<0, 1000>>>,
    /// Window: the binding supports 10s or 60s (default 10s).
    pub window: Option<Spanned<Word<StormWindow>>>,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawStorm {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let mut t = Table::new(v)?;
        let binding = t.req("binding");
        let max_retries = t.opt("max_retries");
        let window = t.opt("window");
        let unknown = Unknown(t.finish()?);
        Ok(RawStorm {
            binding: binding.ok_or_else(bug)?,
            max_retries,
            window,
            unknown,
        })
    }
}

impl Problems for RawStorm {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

impl RawStorm {
    pub fn lower(&self) -> Storm {
        Storm {
            binding: self.binding.value.0.clone(),
            max_retries: self.max_retries.map_or(2, |m| m.value.0 as u32),
            window_ms: self.window.map_or(10_000, |w| w.value.0 .0),
        }
    }
}

impl Words for OnExpired {
    const NAME: &'static str = "OnExpired";
    const ALL: &'static [(&'static str, OnExpired)] = OnExpired::ALL;
}

/// [P-CATALOG] The stub catalog.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Catalog")]
pub struct RawCatalog {
    /// Catalog JSON, relative to the policy (inside its directory).
    pub stubs: Spanned<Text>,
    /// Inventory snapshot JSON, relative to the policy (inside its directory).
    pub inventory: Spanned<Text>,
    /// Stubs must be validated within this (default 24h, 1m..=30d).
    pub max_age: Option<Spanned<Dur<60_000, { 30 * DAY }>>>,
    /// Stubs need stock above this (default 50).
    pub min_stock: Option<Spanned<Count<0, { u32::MAX as u64 }>>>,
    /// What the edge does with stubs past max_age (default refuse).
    pub on_expired: Option<Spanned<Word<OnExpired>>>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawCatalog {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let stubs = t.req("stubs");
        let inventory = t.req("inventory");
        let max_age = t.opt("max_age");
        let min_stock = t.opt("min_stock");
        let on_expired = t.opt("on_expired");
        let unknown = Unknown(t.finish()?);
        Ok(RawCatalog {
            stubs: stubs.ok_or_else(bug)?,
            inventory: inventory.ok_or_else(bug)?,
            max_age,
            min_stock,
            on_expired,
            span,
            unknown,
        })
    }
}

impl Problems for RawCatalog {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

impl RawCatalog {
    pub fn lower(&self) -> CatalogRules {
        CatalogRules {
            stubs: self.stubs.value.0.clone(),
            inventory: self.inventory.value.0.clone(),
            max_age_ms: self.max_age.map_or(24 * HOUR, |m| m.value.0),
            min_stock: self.min_stock.map_or(50, |m| m.value.0),
            on_expired: self.on_expired.map_or(OnExpired::Refuse, |o| o.value.0),
        }
    }
}

/// The admin status endpoint.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Admin")]
pub struct RawAdmin {
    /// Path (default /__understudy/status); outside the service route.
    pub path: Option<Spanned<UrlPath>>,
    /// Secret binding with the admin bearer token.
    pub secret: Spanned<Binding>,
    #[serde(skip)]
    pub span: Span,
    #[serde(skip)]
    pub unknown: Unknown,
}

impl<'de> Deserialize<'de> for RawAdmin {
    fn deserialize(v: &mut Value<'de>) -> Result<Self, DeserError> {
        let span = (v.span.start, v.span.end);
        let mut t = Table::new(v)?;
        let path = t.opt("path");
        let secret = t.req("secret");
        let unknown = Unknown(t.finish()?);
        Ok(RawAdmin {
            path,
            secret: secret.ok_or_else(bug)?,
            span,
            unknown,
        })
    }
}

impl Problems for RawAdmin {
    fn problems(&self, out: &mut Vec<toml_span::Error>) {
        self.unknown.problems(out);
    }
}

pub const DEFAULT_ADMIN_PATH: &str = "/__understudy/status";

impl RawAdmin {
    pub fn lower(&self) -> Admin {
        Admin {
            path: self
                .path
                .as_ref()
                .map_or_else(|| DEFAULT_ADMIN_PATH.to_string(), |p| p.value.0.clone()),
            secret: self.secret.value.0.clone(),
        }
    }
}
