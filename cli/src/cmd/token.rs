//! `understudy token`: mint an HS256 bearer token for a policy's `[identity]`, for `dev`,
//! the end-to-end tests and manual curl sessions. Prints the token alone on stdout.
//!
//! Exit codes: 0 printed, 1 the policy is invalid or declares no `[identity]`, 2 usage
//! errors (bad flags, no key, unreadable key file).

use crate::exit::Exit;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Map, Value};
use understudy_core::time::parse_duration;
use understudy_core::token;

use crate::args::TokenArgs;
use understudy_compiler::codes::Code;
use understudy_compiler::load::load_policy;

/// The environment variable holding the key when neither `--key` nor `--key-file` is given.
pub const KEY_ENV: &str = "UNDERSTUDY_TOKEN_KEY";

/// Claims the dedicated flags own; `--claim` may not set them.
const REGISTERED: [(&str, &str); 6] = [
    ("sub", "--sub"),
    ("iss", "--issuer or the policy"),
    ("aud", "--audience or the policy"),
    ("exp", "--ttl and --now"),
    ("iat", "--now"),
    ("nbf", "--now"),
];

pub fn run(args: TokenArgs) -> anyhow::Result<ExitCode> {
    let now = super::parse_now(args.now.as_deref())?;
    let ttl_ms = parse_duration(&args.ttl).map_err(|e| anyhow!("--ttl: {e}"))?;
    let key = read_key(&args)?;
    let extra = parse_claims(&args.claims)?;
    if args.sub.is_empty() {
        bail!("--sub must not be empty");
    }

    let (mut issuer, mut audience) = (None, None);
    if let Some(path) = &args.policy {
        let loaded = load_policy(path, now);
        let Some(policy) = loaded.policy else {
            let errors: Vec<_> = loaded.diagnostics.iter().filter(|d| d.is_error()).collect();
            if let Some(d) = errors.iter().find(|d| d.code == Code::PolicyUnreadable) {
                bail!("cannot read policy {}: {}", path.display(), d.message);
            }
            let first = errors
                .first()
                .map(|d| {
                    format!(
                        "; first: {}: {}",
                        d.code,
                        d.message.lines().next().unwrap_or("")
                    )
                })
                .unwrap_or_default();
            eprintln!(
                "error: {} is invalid ({} error(s){first}); run `understudy check {}`",
                path.display(),
                errors.len(),
                path.display()
            );
            return Ok(Exit::Invalid.into());
        };
        if let Some(identity) = policy.identity {
            issuer = Some(identity.issuer);
            audience = Some(identity.audience);
        }
    }
    let issuer = args.issuer.or(issuer);
    let audience = args.audience.or(audience);
    let (Some(issuer), Some(audience)) = (issuer, audience) else {
        eprintln!(
            "error: {} declares no [identity]; add one, or pass --issuer and --audience",
            args.policy
                .as_deref()
                .unwrap_or(Path::new("the policy"))
                .display()
        );
        return Ok(Exit::Invalid.into());
    };

    let iat = now.0 / 1000;
    let exp = now.plus(ttl_ms).0 / 1000;
    let mut claims = Map::new();
    claims.insert("iss".into(), json!(issuer));
    claims.insert("aud".into(), json!(audience));
    claims.insert("sub".into(), json!(args.sub));
    claims.insert("iat".into(), json!(iat));
    claims.insert("exp".into(), json!(exp));
    for (name, value) in extra {
        claims.insert(name, Value::String(value));
    }
    println!("{}", token::sign(&Value::Object(claims), &key));
    Ok(Exit::Ok.into())
}

/// `--key`, else `--key-file`, else `$UNDERSTUDY_TOKEN_KEY`; never empty.
fn read_key(args: &TokenArgs) -> anyhow::Result<Vec<u8>> {
    let key = if let Some(k) = &args.key {
        k.as_bytes().to_vec()
    } else if let Some(path) = &args.key_file {
        let mut bytes = std::fs::read(path)
            .with_context(|| format!("cannot read --key-file {}", path.display()))?;
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        bytes
    } else {
        match std::env::var_os(KEY_ENV) {
            Some(v) => v.into_encoded_bytes(),
            None => bail!(
                "no signing key: pass --key or --key-file, or set {KEY_ENV} (the same key the Worker \
                 reads from the secret binding named by [identity].secret)"
            ),
        }
    };
    if key.is_empty() {
        bail!("the signing key is empty");
    }
    Ok(key)
}

/// `NAME=VALUE` pairs, split at the first `=`.
fn parse_claims(raw: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    raw.iter()
        .map(|c| {
            let (name, value) = c
                .split_once('=')
                .ok_or_else(|| anyhow!("--claim `{c}` is not NAME=VALUE"))?;
            if name.is_empty() {
                bail!("--claim `{c}` has an empty name");
            }
            if let Some((_, flag)) = REGISTERED.iter().find(|(n, _)| *n == name) {
                bail!("--claim cannot set `{name}`; it comes from {flag}");
            }
            Ok((name.to_string(), value.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_split_at_the_first_equals_sign() {
        let c = parse_claims(&["tier=gold".into(), "q=a=b".into(), "e=".into()]).unwrap();
        assert_eq!(
            c,
            vec![
                ("tier".to_string(), "gold".to_string()),
                ("q".to_string(), "a=b".to_string()),
                ("e".to_string(), String::new())
            ]
        );
    }

    #[test]
    fn bad_or_registered_claims_are_refused() {
        assert!(parse_claims(&["novalue".into()]).is_err());
        assert!(parse_claims(&["=x".into()]).is_err());
        for name in ["sub", "iss", "aud", "exp", "iat", "nbf"] {
            let e = parse_claims(&[format!("{name}=x")])
                .unwrap_err()
                .to_string();
            assert!(e.contains(name), "{e}");
        }
    }
}
