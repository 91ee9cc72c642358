//! `understudy token` end to end: the binary mints a token that the edge's own verifier
//! (`understudy_core::token::verify`) accepts for the policy's `[identity]`, and refuses
//! usage errors with exit 2 and invalid policies with exit 1.

use std::path::PathBuf;
use std::process::{Command, Output};

use understudy_core::policy::IdentityRules;
use understudy_core::token::{verify, TokenError};
use understudy_core::Millis;

const KEY: &str = "dev-only-hmac-key-for-tests";
const NOW: &str = "2026-11-30T12:00:00Z";
/// `NOW` in seconds since the epoch.
const NOW_S: u64 = 1_796_040_000;

fn policy(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../policies")
        .join(name)
}

fn recommendations() -> PathBuf {
    policy("recommendations.toml")
}

/// The rules `policies/recommendations.toml` declares.
fn rules() -> IdentityRules {
    IdentityRules {
        secret: "TOKEN_HMAC_KEY".into(),
        issuer: "https://auth.mercado.example".into(),
        audience: "recommendations".into(),
        leeway_ms: 30_000,
    }
}

/// Runs `understudy token ARGS` with no key in the environment.
fn token(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_understudy"))
        .arg("token")
        .args(args)
        .env_remove("UNDERSTUDY_TOKEN_KEY")
        .output()
        .expect("the binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The token printed by a successful run: one line, nothing else.
fn minted(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(out));
    let text = stdout(out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "exactly the token on stdout: {text:?}");
    lines[0].to_string()
}

fn at(seconds: u64) -> Millis {
    Millis(seconds * 1000)
}

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("token-cli");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

#[test]
fn a_minted_token_verifies_against_the_policy() {
    let path = recommendations();
    let out = token(&[
        "--policy",
        path.to_str().unwrap(),
        "--sub",
        "alice",
        "--claim",
        "tier=gold",
        "--claim",
        "note=a=b",
        "--now",
        NOW,
        "--key",
        KEY,
    ]);
    let t = minted(&out);
    assert_eq!(t.split('.').count(), 3);
    let claims = verify(&t, KEY.as_bytes(), &rules(), at(NOW_S)).expect("verifies");
    assert_eq!(claims.claim("sub"), Some("alice"));
    assert_eq!(claims.claim("iss"), Some("https://auth.mercado.example"));
    assert_eq!(claims.claim("aud"), Some("recommendations"));
    assert_eq!(claims.claim("tier"), Some("gold"));
    assert_eq!(claims.claim("note"), Some("a=b"));
    assert_eq!(claims.claim("iat"), Some(NOW_S.to_string().as_str()));
    // Default lifetime: one hour.
    assert_eq!(claims.expires_at(), at(NOW_S + 3600));
    // Not with another key, and not after it expires (beyond the 30 s leeway).
    assert_eq!(
        verify(&t, b"another-key", &rules(), at(NOW_S)).unwrap_err(),
        TokenError::BadSignature
    );
    assert_eq!(
        verify(&t, KEY.as_bytes(), &rules(), at(NOW_S + 3600 + 31)).unwrap_err(),
        TokenError::Expired
    );
}

#[test]
fn ttl_sets_the_expiry() {
    let path = recommendations();
    let out = token(&[
        "--policy",
        path.to_str().unwrap(),
        "--sub",
        "bob",
        "--ttl",
        "5m",
        "--now",
        NOW,
        "--key",
        KEY,
    ]);
    let t = minted(&out);
    let claims = verify(&t, KEY.as_bytes(), &rules(), at(NOW_S + 60)).expect("verifies");
    assert_eq!(claims.expires_at(), at(NOW_S + 300));
    assert_eq!(
        verify(&t, KEY.as_bytes(), &rules(), at(NOW_S + 600)).unwrap_err(),
        TokenError::Expired
    );
}

#[test]
fn the_key_comes_from_a_file_or_the_environment() {
    let path = recommendations();
    let key_file = tmp("key.txt");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let from_file = token(&[
        "--policy",
        path.to_str().unwrap(),
        "--sub",
        "alice",
        "--now",
        NOW,
        "--key-file",
        key_file.to_str().unwrap(),
    ]);
    let t = minted(&from_file);
    assert!(
        verify(&t, KEY.as_bytes(), &rules(), at(NOW_S)).is_ok(),
        "trailing newline ignored"
    );

    let from_env = Command::new(env!("CARGO_BIN_EXE_understudy"))
        .args([
            "token",
            "--policy",
            path.to_str().unwrap(),
            "--sub",
            "alice",
            "--now",
            NOW,
        ])
        .env("UNDERSTUDY_TOKEN_KEY", KEY)
        .output()
        .unwrap();
    let t = minted(&from_env);
    assert!(verify(&t, KEY.as_bytes(), &rules(), at(NOW_S)).is_ok());
}

#[test]
fn issuer_and_audience_flags_work_without_a_policy() {
    let out = token(&[
        "--issuer",
        "https://issuer.test",
        "--audience",
        "api",
        "--sub",
        "carol",
        "--now",
        NOW,
        "--key",
        KEY,
    ]);
    let t = minted(&out);
    let rules = IdentityRules {
        secret: "K".into(),
        issuer: "https://issuer.test".into(),
        audience: "api".into(),
        leeway_ms: 0,
    };
    assert_eq!(
        verify(&t, KEY.as_bytes(), &rules, at(NOW_S))
            .unwrap()
            .subject(),
        Some("carol")
    );
    // Against the policy's audience the same token is refused.
    assert_eq!(
        verify(&t, KEY.as_bytes(), &self::rules(), at(NOW_S)).unwrap_err(),
        TokenError::WrongIssuer
    );
}

#[test]
fn audience_override_mints_a_token_the_policy_refuses() {
    let path = recommendations();
    let out = token(&[
        "--policy",
        path.to_str().unwrap(),
        "--audience",
        "billing",
        "--sub",
        "alice",
        "--now",
        NOW,
        "--key",
        KEY,
    ]);
    let t = minted(&out);
    assert_eq!(
        verify(&t, KEY.as_bytes(), &rules(), at(NOW_S)).unwrap_err(),
        TokenError::WrongAudience
    );
}

#[test]
fn usage_errors_exit_2() {
    let path = recommendations();
    let p = path.to_str().unwrap();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("no key", vec!["--policy", p, "--sub", "a", "--now", NOW]),
        (
            "empty key",
            vec!["--policy", p, "--sub", "a", "--now", NOW, "--key", ""],
        ),
        (
            "missing --sub",
            vec!["--policy", p, "--now", NOW, "--key", KEY],
        ),
        ("no policy nor issuer", vec!["--sub", "a", "--key", KEY]),
        (
            "bad ttl",
            vec![
                "--policy", p, "--sub", "a", "--ttl", "soon", "--now", NOW, "--key", KEY,
            ],
        ),
        (
            "bad now",
            vec![
                "--policy",
                p,
                "--sub",
                "a",
                "--now",
                "yesterday",
                "--key",
                KEY,
            ],
        ),
        (
            "bad claim",
            vec![
                "--policy", p, "--sub", "a", "--claim", "x", "--now", NOW, "--key", KEY,
            ],
        ),
        (
            "registered claim",
            vec![
                "--policy", p, "--sub", "a", "--claim", "exp=1", "--now", NOW, "--key", KEY,
            ],
        ),
        (
            "key and key file",
            vec!["--policy", p, "--sub", "a", "--key", KEY, "--key-file", "k"],
        ),
        (
            "missing key file",
            vec![
                "--policy",
                p,
                "--sub",
                "a",
                "--now",
                NOW,
                "--key-file",
                "/nonexistent/key",
            ],
        ),
        (
            "unreadable policy",
            vec![
                "--policy",
                "/nonexistent/policy.toml",
                "--sub",
                "a",
                "--key",
                KEY,
            ],
        ),
    ];
    for (what, args) in cases {
        let out = token(&args);
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{what}: nothing on stdout");
        assert!(
            !stderr(&out).contains(KEY),
            "{what}: the key is never echoed"
        );
    }
}

#[test]
fn an_invalid_policy_exits_1_with_one_line() {
    let bad = tmp("invalid.toml");
    std::fs::write(&bad, "version = \"x\"\n[service]\nname = 3\n").unwrap();
    let out = token(&[
        "--policy",
        bad.to_str().unwrap(),
        "--sub",
        "a",
        "--now",
        NOW,
        "--key",
        KEY,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("is invalid") && err.contains("understudy check"),
        "{err}"
    );
}

#[test]
fn a_policy_without_identity_exits_1() {
    let path = policy("semantic-search.toml");
    let out = token(&[
        "--policy",
        path.to_str().unwrap(),
        "--sub",
        "a",
        "--now",
        NOW,
        "--key",
        KEY,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("[identity]"), "{}", stderr(&out));
    // With both overrides it mints.
    let out = token(&[
        "--policy",
        path.to_str().unwrap(),
        "--issuer",
        "i",
        "--audience",
        "a",
        "--sub",
        "a",
        "--now",
        NOW,
        "--key",
        KEY,
    ]);
    minted(&out);
}
