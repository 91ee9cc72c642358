//! `kind = "http"`: a secondary HTTP source in its own failure domain. Its host and its
//! credential are checked against the origin's by the rules every tier meets [C-DOMAIN],
//! from the facts its kind gives (`url`, `secret`).

use schemars::JsonSchema;
use understudy_core::policy::HttpTier;

use super::Raw;
use crate::parse::leaf::*;
use crate::parse::origin::{result_path, MINUTE};
use crate::parse::table::Table;

/// A secondary HTTP source in its own failure domain.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Http")]
pub struct RawHttp {
    /// URL of the secondary source.
    pub url: Spanned<Url>,
    /// Timeout (1ms..=1m).
    pub timeout: Spanned<Dur<1, MINUTE>>,
    /// Secret binding with its credential.
    pub credential_secret: Option<Spanned<Binding>>,
    /// Dotted path of the result list (default items).
    pub result_path: Option<Spanned<JsonPath>>,
}

impl Raw for RawHttp {
    type Model = HttpTier;

    fn read(t: &mut Table<'_>) -> Option<RawHttp> {
        let url = t.req("url");
        let timeout = t.req("timeout");
        let credential_secret = t.opt("credential_secret");
        let result_path = t.opt("result_path");
        Some(RawHttp {
            url: url?,
            timeout: timeout?,
            credential_secret,
            result_path,
        })
    }

    fn lower(&self) -> Option<HttpTier> {
        Some(HttpTier {
            url: self.url.value.0.clone(),
            timeout_ms: self.timeout.value.0,
            credential_secret: self.credential_secret.as_ref().map(|s| s.value.0.clone()),
            result_path: result_path(self.result_path.as_ref()),
        })
    }
}
