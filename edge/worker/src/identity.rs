//! [C-PRIVATE] Verified identity at the edge: the bearer token is checked with the HMAC key
//! from the secret binding the policy names (`understudy_core::token` does the checking),
//! and only its claims can fill `token_claim` parameters.

use std::collections::BTreeMap;

use understudy_core::policy::Policy;
use understudy_core::token::{self, TokenError};
use understudy_core::Millis;
use worker::Env;

/// The verified claims: `Ok(None)` when the policy has no identity rules or the request
/// carries no bearer token (a required claim parameter then answers 400); `Err` for a token
/// that was sent and is not valid (401).
pub fn claims(
    headers: &[(String, String)],
    env: &Env,
    policy: &Policy,
    now: Millis,
) -> Result<Option<BTreeMap<String, String>>, TokenError> {
    let Some(rules) = &policy.identity else {
        return Ok(None);
    };
    let auth = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.as_str());
    let Some(tok) = auth.and_then(token::bearer) else {
        return Ok(None);
    };
    // A missing secret verifies nothing (`NoKey`), it never makes tokens forgeable.
    let key = env
        .secret(&rules.secret)
        .map(|s| s.to_string())
        .unwrap_or_default();
    token::verify(tok, key.as_bytes(), rules, now).map(|c| Some(c.into_map()))
}
