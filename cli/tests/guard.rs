//! [R-GUARD] The rails around a rollout, each a defect found by trying the rollout as a new
//! CDN ops engineer would (docs/rollout.md, "Misuse"): the binary against a real registry and
//! a stand-in of the local front (the split, the figures) on loopback, with the wall clock —
//! a rollout here takes a second or two.
//!
//! The misuse table of docs/rollout.md is run row by row: each row's command, its exit code
//! and what it says.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Env, BIN, DAY1, DAY1_NOON, DAY2_NOON};
use understudy_compiler::release::registry::Registry;
use understudy_compiler::release::rollout::record::{self, RolloutRecord};
use understudy_compiler::release::rollout::{guard, Figures, Histogram, Phase};

/// The front's state: the split, every deployment, and how each version answers.
struct Split {
    old: String,
    new: String,
    new_percent: u8,
    deployments: Vec<(u64, u8)>,
    /// Answers per second in all.
    rate: u64,
    /// The new version's degraded share.
    degraded_new: f64,
}

/// A stand-in of scripts/rollout-front.mjs's control routes, on loopback.
struct Front {
    url: String,
    split: Arc<Mutex<Split>>,
}

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

impl Front {
    fn start(old: &str, new: &str, rate: u64, degraded_new: f64) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let split = Arc::new(Mutex::new(Split {
            old: old.into(),
            new: new.into(),
            new_percent: 0,
            deployments: Vec::new(),
            rate,
            degraded_new,
        }));
        let shared = Arc::clone(&split);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                let answer = answer(&shared, &path, &body);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        Front { url, split }
    }

    fn deployed(&self) -> Vec<u8> {
        self.split
            .lock()
            .unwrap()
            .deployments
            .iter()
            .map(|d| d.1)
            .collect()
    }
}

fn answer(split: &Mutex<Split>, path: &str, body: &[u8]) -> String {
    let mut s = split.lock().unwrap();
    if path == "/__rollout/deploy" {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let p = v["new_percent"].as_u64().unwrap_or(0) as u8;
        s.new_percent = p;
        s.deployments.push((epoch_ms(), p));
        return "{}".into();
    }
    if let Some(q) = path.strip_prefix("/__rollout/figures?") {
        let arg = |k: &str| -> u64 {
            q.split('&')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let n = arg("to").saturating_sub(arg("from")) * s.rate / 1000;
        let new_n = n * u64::from(s.new_percent) / 100;
        let f = |n: u64, share: f64| Figures {
            answers: n,
            degraded: (n as f64 * share) as u64,
            unavailable: 0,
            latency: Histogram(BTreeMap::from([(30, n)])),
        };
        return serde_json::json!({"old": f(n - new_n, 0.0), "new": f(new_n, s.degraded_new)})
            .to_string();
    }
    let deployments: Vec<_> = s
        .deployments
        .iter()
        .map(|(at, p)| serde_json::json!({"at": at, "new_percent": p}))
        .collect();
    serde_json::json!({"worker": "svc", "old": s.old, "new": s.new, "new_percent": s.new_percent, "deployments": deployments})
        .to_string()
}

/// A registry with v1 active and v2 beside it: (old, new).
fn two(env: &Env) -> (String, String) {
    for (v, promote) in [("v1", true), ("v2", false)] {
        let p = env.policy_dir(v, v, "800ms", &["SKU-1", "SKU-2"], DAY1);
        let mut args = vec![
            "releases",
            "add",
            p.to_str().unwrap(),
            "--registry",
            "reg",
            "--edge",
            "edge",
            "--now",
            DAY1_NOON,
        ];
        if promote {
            args.push("--promote");
        }
        env.ok(&args);
    }
    let active = env.active();
    let other = env.releases().into_iter().find(|r| *r != active).unwrap();
    (active, other)
}

/// The short form: two steps a second apart, judged on 100 answers.
const SHORT: [&str; 6] = ["--steps", "50,100", "--dwell", "1s", "--min-answers", "100"];

fn rollout(env: &Env, new: &str, front: &Front, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "releases",
        "rollout",
        new,
        "--registry",
        "reg",
        "--front",
        &front.url,
    ];
    args.extend_from_slice(extra);
    env.run(&args)
}

/// A rollout left stranded: recorded as deploying its first step, its controller gone.
fn strand(env: &Env, old: &str, new: &str) {
    let reg = Registry::open(&env.p("reg")).unwrap();
    let (c, _) = understudy_compiler::release::rollout::Controller::start(
        understudy_compiler::release::rollout::Slo {
            steps: vec![50, 100],
            dwell_ms: 1_000,
            min_answers: 100,
            ..Default::default()
        },
    );
    let rec = RolloutRecord {
        format: record::FORMAT,
        service: reg.load(new).unwrap().record.service.clone(),
        old: old.into(),
        new: new.into(),
        driver: "local http://127.0.0.1:1".into(),
        slo: c.slo().clone(),
        state: c.state().clone(),
        started_at_ms: epoch_ms(),
        updated_at_ms: epoch_ms(),
        replay: None,
    };
    record::write(&reg, &rec).unwrap();
}

/// `--dwell 0s` was accepted on the command line though the policy key refuses it, and a
/// good release was rolled back on no evidence; `--steps 50,10,100` (and four others) exited
/// 1, the "rolled back" code, without the value, and `--dry-run` accepted all five.
#[test]
fn a_bad_setting_is_refused_the_same_way_on_every_path_with_its_value_named() {
    let env = Env::new("guard-settings");
    let (_old, new) = two(&env);
    for (steps, code) in [
        ("50,10,100", "ERR_ROLLOUT_STEPS"),
        ("0,100", "ERR_OUT_OF_RANGE"),
        ("10,10,100", "ERR_ROLLOUT_STEPS"),
        ("10,50", "ERR_ROLLOUT_STEPS"),
        ("10,50,101", "ERR_OUT_OF_RANGE"),
    ] {
        for path in [
            vec![
                "releases",
                "rollout",
                &new,
                "--registry",
                "reg",
                "--front",
                "http://127.0.0.1:9",
                "--steps",
                steps,
            ],
            vec![
                "releases",
                "rollout",
                &new,
                "--registry",
                "reg",
                "--dry-run",
                "--steps",
                steps,
            ],
            vec![
                "drill",
                "--rollout",
                "active",
                &new,
                "--registry",
                "reg",
                "--scenario",
                "none.toml",
                "--steps",
                steps,
            ],
        ] {
            let r = env.run(&path);
            assert_eq!(r.code, 2, "{path:?}: {}", r.stderr);
            assert!(
                r.stderr.contains(code) && r.stderr.contains(steps),
                "{path:?}: {}",
                r.stderr
            );
            assert!(r.stderr.contains("`--steps`"), "{path:?}: {}", r.stderr);
            // The value is named once, as it was given (it was repeated as a list).
            let listed = format!("[{}]", steps.replace(',', ", "));
            assert!(!r.stderr.contains(&listed), "{path:?}: {}", r.stderr);
            assert_eq!(r.stderr.matches(steps).count(), 1, "{path:?}: {}", r.stderr);
        }
    }
    for (dwell, says) in [
        ("0s", "`--dwell` is 0s"),
        ("1ms", "`--dwell` is 1ms, outside its valid range 1s..=1d"),
        ("-1s", "`-1s` is negative"),
    ] {
        // A real rollout, its rehearsal, and the drill (which rolled a good release back on
        // no answers with `--dwell 0s`).
        for path in [
            &["--front", "http://127.0.0.1:9"][..],
            &["--dry-run"][..],
            &[][..],
        ] {
            let mut args = if path.is_empty() {
                vec![
                    "drill",
                    "--rollout",
                    "active",
                    &new,
                    "--scenario",
                    "none.toml",
                ]
            } else {
                vec!["releases", "rollout", &new]
            };
            args.extend_from_slice(&["--registry", "reg"]);
            args.extend_from_slice(path);
            args.extend_from_slice(&["--dwell", dwell]);
            let r = env.run(&args);
            assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
            assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        }
    }
    // The policy's key refuses the same value with the same code.
    let bad = env.write(
        "bad/policy.toml",
        &format!(
            "{}\n[rollout]\ndwell = \"0s\"\n",
            common::policy("b", "800ms")
        ),
    );
    let r = env.run(&["check", bad.to_str().unwrap()]);
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("ERR_OUT_OF_RANGE"),
        "{}{}",
        r.stdout,
        r.stderr
    );
}

/// `promote` during a running rollout succeeded: ACTIVE named the bad release while traffic
/// was split 99/1. Now one lock covers everything that moves ACTIVE or the deployment, and
/// `--wait` waits for it.
#[test]
fn nothing_moves_active_while_a_controller_runs_and_wait_really_waits() {
    let env = Env::new("guard-lock");
    let (old, new) = two(&env);
    let reg = Registry::open(&env.p("reg")).unwrap();
    let held = guard::take(&reg, "releases rollout", None, true).unwrap();
    let r = env.run(&["releases", "promote", &new, "--registry", "reg"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("releases rollout"), "{}", r.stderr);
    let r = env.run(&["releases", "rollback", "--registry", "reg", "--to", &old]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(env.active(), old, "ACTIVE never moved");
    // --wait: a bounded wait, then the same refusal with how long it waited.
    let t = Instant::now();
    let r = env.run(&[
        "releases",
        "promote",
        &new,
        "--registry",
        "reg",
        "--wait",
        "1s",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    assert!(r.stderr.contains("after waiting 1s"), "{}", r.stderr);
    // A second rollout waits for the first's controller the same way.
    let r = env.run(&[
        "releases",
        "rollout",
        &new,
        "--registry",
        "reg",
        "--front",
        "http://127.0.0.1:9",
        "--wait",
        "1s",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("after waiting 1s"), "{}", r.stderr);
    // … and when the controller ends meanwhile, the waiter goes on.
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        drop(held);
    });
    let r = env.run(&[
        "releases",
        "promote",
        &new,
        "--registry",
        "reg",
        "--wait",
        "20s",
        "--now",
        DAY1_NOON,
    ]);
    release.join().unwrap();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.active(), new);
}

/// A rollout whose controller died left its split deployed; `verify` said ok, a promote or a
/// rollout of another release went ahead over it. Now the record holds everything until its
/// own `--resume` or `--abort`, which is its own phase and exit code (3).
#[test]
fn a_stranded_rollout_is_named_by_verify_and_resolved_only_by_its_own_resume_or_abort() {
    let env = Env::new("guard-stranded");
    let (old, new) = two(&env);
    strand(&env, &old, &new);
    let r = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("no controller runs it") && r.stdout.contains("--abort"),
        "{}",
        r.stdout
    );
    let r = env.run(&["releases", "promote", &new, "--registry", "reg"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("has not ended") && r.stderr.contains("--resume"),
        "{}",
        r.stderr
    );
    let front = Front::start(&old, &new, 2_000, 0.0);
    let r = rollout(&env, &new, &front, &SHORT);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    let s = env.ok(&["releases", "status", "--registry", "reg"]);
    assert!(s.stdout.contains("NOT running"), "{}", s.stdout);
    assert!(
        resumes(&env, &new),
        "the sample workflow resumes a stranded rollout"
    );
    // The abort: its own phase, its own code, the old version at 100%.
    let r = env.run(&[
        "releases",
        "rollout",
        &new,
        "--registry",
        "reg",
        "--front",
        &front.url,
        "--abort",
    ]);
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("aborted"), "{}", r.stdout);
    assert_eq!(front.deployed(), vec![0]);
    let reg = Registry::open(&env.p("reg")).unwrap();
    assert_eq!(
        record::read(&reg, &new).unwrap().unwrap().state.phase,
        Phase::Aborted
    );
    env.ok(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(env.active(), old);
    // The sample workflow resumed any rollout whose phase was not done or rolled back: an
    // aborted one too. It reads `ended` now.
    assert!(!resumes(&env, &new), "an aborted rollout is not resumed");
}

/// Whether .github/workflows/policy-rollout.yml's check (its `node -e` script, fed
/// `releases status --id ID --format json`) says to `--resume` the rollout of `id`.
fn resumes(env: &Env, id: &str) -> bool {
    let yml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../.github/workflows/policy-rollout.yml"
    ))
    .unwrap();
    let script = yml
        .split("node -e '")
        .nth(1)
        .and_then(|t| t.split('\'').next())
        .expect("policy-rollout.yml checks the status with node -e '…'");
    let status = env.ok(&[
        "releases",
        "status",
        "--registry",
        "reg",
        "--id",
        id,
        "--format",
        "json",
    ]);
    let mut node = std::process::Command::new("node")
        .args(["-e", script])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    node.stdin
        .take()
        .unwrap()
        .write_all(status.stdout.as_bytes())
        .unwrap();
    node.wait().unwrap().success()
}

/// A rollout of *another* release started over a stranded split with a warning only, and
/// replaced it.
#[test]
fn a_rollout_of_another_release_does_not_replace_a_stranded_split() {
    let env = Env::new("guard-stranded-other");
    let (old, new) = two(&env);
    strand(&env, &old, &new);
    let p = env.policy_dir("v3", "v3", "800ms", &["SKU-1", "SKU-2"], DAY1);
    let before = env.releases();
    env.ok(&[
        "releases",
        "add",
        p.to_str().unwrap(),
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY1_NOON,
    ]);
    let third = env
        .releases()
        .into_iter()
        .find(|r| !before.contains(r))
        .unwrap();
    let front = Front::start(&old, &third, 2_000, 0.0);
    let r = rollout(&env, &third, &front, &SHORT);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&new) && r.stderr.contains("--force"),
        "the stranded rollout and the flag are named: {}",
        r.stderr
    );
    assert!(front.deployed().is_empty(), "nothing was deployed");
    assert_eq!(env.active(), old);
}

/// `releases rollback` without `--deploy` told the operator to run the release's deploy.sh,
/// which rebuilds and deploys around the versions a rollout keeps.
#[test]
fn a_rollback_without_deploy_prints_the_command_that_deploys_it() {
    let env = Env::new("guard-rollback-says");
    let (old, new) = two(&env);
    env.ok(&[
        "releases",
        "promote",
        &new,
        "--registry",
        "reg",
        "--now",
        DAY1_NOON,
    ]);
    let r = env.ok(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY1_NOON,
    ]);
    assert_eq!(env.active(), old);
    assert!(
        r.stdout
            .contains(&format!("understudy releases deploy {old} --registry ")),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("deploy.sh"), "{}", r.stdout);
}

/// An abort of a stale record deployed its old version at 100% over a newer deployment.
#[test]
fn an_abort_never_deploys_over_a_deployment_that_is_not_the_rollouts() {
    let env = Env::new("guard-abort-newer");
    let (old, new) = two(&env);
    strand(&env, &old, &new);
    // The front serves a third release now.
    let front = Front::start("r-0000000000aa", &new, 2_000, 0.0);
    front.split.lock().unwrap().new_percent = 0;
    let r = env.run(&[
        "releases",
        "rollout",
        &new,
        "--registry",
        "reg",
        "--front",
        &front.url,
        "--abort",
    ]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("r-0000000000aa@100%") && r.stderr.contains("Nothing was deployed"),
        "{}",
        r.stderr
    );
    assert!(front.deployed().is_empty());
}

/// With `rollouts/ID.json` damaged, `--resume`, `--abort` and a new rollout all failed with
/// no way out while `verify` said ok, and a rollout of another release replaced the split
/// with a warning only.
#[test]
fn a_damaged_record_is_named_with_its_way_out_and_abort_force_takes_it() {
    let env = Env::new("guard-damaged");
    let (old, new) = two(&env);
    strand(&env, &old, &new);
    let reg = Registry::open(&env.p("reg")).unwrap();
    std::fs::write(record::path(&reg, &new), "").unwrap();
    let r = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(r.code, 2);
    assert!(r.stdout.contains("--abort --force"), "{}", r.stdout);
    let r = env.run(&["releases", "repair", "--registry", "reg"]);
    assert_eq!(r.code, 2, "repair cannot decide it: {}", r.stdout);
    let front = Front::start(&old, &new, 2_000, 0.0);
    front.split.lock().unwrap().new_percent = 50;
    for extra in [&["--resume"][..], &["--abort"][..], &SHORT[..]] {
        let r = rollout(&env, &new, &front, extra);
        assert_eq!(r.code, 2, "{extra:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("--abort --force"),
            "{extra:?}: {}",
            r.stderr
        );
    }
    let r = env.run(&["releases", "rollback", "--registry", "reg", "--to", &old]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let s = env.ok(&["releases", "status", "--registry", "reg"]);
    assert!(s.stdout.contains("DAMAGED"), "{}", s.stdout);
    // While a controller runs, status names the damaged record (it showed the previous
    // rollout as done), and nothing moves ACTIVE.
    {
        let _held = guard::take(&reg, "releases rollout", None, true).unwrap();
        let s = env.ok(&["releases", "status", "--registry", "reg"]);
        assert!(
            s.stdout
                .contains(&format!("DAMAGED rollout record of {new}")),
            "{}",
            s.stdout
        );
        let r = env.run(&["releases", "rollback", "--registry", "reg", "--to", &old]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert_eq!(env.active(), old);
    }
    // A rollout of another release does not start over the damaged record's split.
    let p = env.policy_dir("v3", "v3", "800ms", &["SKU-1", "SKU-2"], DAY1);
    let before = env.releases();
    env.ok(&[
        "releases",
        "add",
        p.to_str().unwrap(),
        "--registry",
        "reg",
        "--edge",
        "edge",
        "--now",
        DAY1_NOON,
    ]);
    let third = env
        .releases()
        .into_iter()
        .find(|r| !before.contains(r))
        .unwrap();
    let r = rollout(&env, &third, &front, &SHORT);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--abort --force") && r.stderr.contains("--force to start anyway"),
        "{}",
        r.stderr
    );
    assert_eq!(front.deployed(), Vec::<u8>::new(), "nothing was deployed");
    let r = rollout(&env, &new, &front, &["--abort", "--force"]);
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(front.deployed(), vec![0]);
    env.ok(&["releases", "verify", "--registry", "reg"]);
}

/// `releases verify` and `repair` cover `versions/` as they cover `rollouts/`: a version
/// record that does not read is moved aside by `repair` (the next upload finds the version
/// by its tag), and an upload whose result was never recorded is named with the command
/// that finds it.
#[test]
fn verify_and_repair_cover_the_version_records() {
    let env = Env::new("guard-versions");
    let (old, new) = two(&env);
    let reg = Registry::open(&env.p("reg")).unwrap();
    env.write(
        &format!("reg/versions/{new}.json"),
        "{ not a version record",
    );
    let r = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!("versions/{new}.json"))
            && r.stdout.contains("lost+found/versions/")
            && r.stdout.contains("releases repair"),
        "{}",
        r.stdout
    );
    let r = env.run(&["releases", "repair", "--registry", "reg"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "did: moved the damaged versions/{new}.json to lost+found/versions/"
        )),
        "{}",
        r.stdout
    );
    assert!(env
        .p(&format!("reg/lost+found/versions/{new}.json"))
        .is_file());
    assert!(!env.p(&format!("reg/versions/{new}.json")).exists());
    env.ok(&["releases", "verify", "--registry", "reg"]);
    // An upload asked for whose result was lost: named, with the command that finds it.
    understudy_compiler::release::versions::write(
        &reg,
        &understudy_compiler::release::versions::Uploaded {
            format: understudy_compiler::release::versions::FORMAT,
            release: old.clone(),
            worker: "svc".into(),
            version_id: None,
            message: "understudy release".into(),
            intended_at_ms: epoch_ms(),
            uploaded_at_ms: None,
        },
    )
    .unwrap();
    let r = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("never recorded")
            && r.stdout
                .contains(&format!("understudy releases upload {old} --registry")),
        "{}",
        r.stdout
    );
}

/// Between judgements nothing was printed, the end was one line, `status` had no times, and
/// `status | head` panicked on the closed pipe.
#[test]
fn a_rollout_shows_where_it_stands_and_ends_with_a_summary_and_a_report() {
    let env = Env::new("guard-progress");
    let (old, new) = two(&env);
    let front = Front::start(&old, &new, 2_000, 0.0);
    let report = env.p("report");
    let r = rollout(
        &env,
        &new,
        &front,
        &[&SHORT[..], &["--report", report.to_str().unwrap()]].concat(),
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for says in [
        "step 1 of 2 (50%): deployed",
        "at 50%: advanced",
        "advanced to 100% in",
        "the new release",
        "served: 50% for",
    ] {
        assert!(r.stdout.contains(says), "{says}:\n{}", r.stdout);
    }
    let svg = std::fs::read_to_string(report.join("rollout.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("share (%)"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    assert!(report.join("rollout.json").is_file());
    let s = env.ok(&["releases", "status", "--registry", "reg"]);
    for says in ["started 20", "deployed: 50% at 20", "ended 20"] {
        assert!(s.stdout.contains(says), "{says}:\n{}", s.stdout);
    }
    // Margins read as percentages everywhere ("0.02" in the header, "margin 2.00" in the
    // judgement lines before).
    assert!(
        s.stdout
            .contains("margins: degraded share +2.00%, no-tier 5xx share +0.50%, p95 +20%"),
        "{}",
        s.stdout
    );
    assert!(r.stdout.contains("margin +2.00%"), "{}", r.stdout);
    for out in [&s.stdout, &r.stdout] {
        for (i, _) in out.match_indices("margin") {
            let rest = &out[i..];
            let end = rest.find([',', ';', '\n', ')']).unwrap_or(rest.len());
            assert!(
                rest[..end].ends_with('%') || rest.starts_with("margins:"),
                "a margin not as a percentage: {}",
                &rest[..end]
            );
        }
    }
    for word in ["Done", "RolledBack", "Watching"] {
        assert!(
            !s.stdout.contains(word) && !r.stdout.contains(word),
            "{word}"
        );
    }
    // `status | head`: the reader closes the pipe at once.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("for i in 1 2 3 4 5 6 7 8 9 10 11 12; do {BIN} releases status --registry reg; done | head -c 1"))
        .current_dir(&env.dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

/// `releases status` had no times; for a rollout under way it shows where it stands with
/// the heartbeat's fields: the step, how long it has been watched, the answers it needs, the
/// holds, the next judgement and the earliest end — and never claims figures it did not read.
#[test]
fn status_shows_a_running_rollout_with_its_times_step_holds_and_next_judgement() {
    let env = Env::new("guard-status-running");
    let (old, new) = two(&env);
    strand(&env, &old, &new);
    let reg = Registry::open(&env.p("reg")).unwrap();
    let path = record::path(&reg, &new);
    let mut rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let now = epoch_ms();
    rec["state"]["phase"] = "watching".into();
    rec["state"]["since"] = (now - 10_000).into();
    rec["state"]["due"] = (now + 60_000).into();
    rec["state"]["holds"] = 2.into();
    rec["state"]["deployed"] = serde_json::json!([{"at": now - 10_000, "new_percent": 50}]);
    std::fs::write(&path, rec.to_string()).unwrap();
    let _held = guard::take(&reg, "releases rollout", None, true).unwrap();
    let s = env.ok(&["releases", "status", "--registry", "reg"]);
    for says in [
        "controller: running (process",
        "started 20",
        "step 1 of 2 (50%), watching for 1",
        "100 answers each needed (the controller reads them at each judgement)",
        "2 of 6 holds",
        "next judgement ",
        " s); end at the earliest ",
        "deployed: 50% at 20",
    ] {
        assert!(s.stdout.contains(says), "{says}:\n{}", s.stdout);
    }
    assert!(!s.stdout.contains("unavailable"), "{}", s.stdout);
    let j = env.ok(&[
        "releases",
        "status",
        "--registry",
        "reg",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    assert_eq!(v["phase"], "watching");
    assert_eq!(v["ended"], false);
    for key in ["started_at", "next_judgement_at", "earliest_end_at"] {
        assert!(
            v[key]
                .as_str()
                .is_some_and(|t| t.starts_with("20") && t.ends_with('Z')),
            "{key}: {}",
            j.stdout
        );
    }
}

/// A held step's heartbeat: with a 5-minute dwell (or one whose tick does not divide 30 s),
/// the controller speaks at least every 30 s with the step, the answers against the minimum,
/// the holds and the next judgement.
#[test]
fn a_heartbeat_comes_at_least_every_30_seconds_between_judgements() {
    use understudy_compiler::release::rollout::run::{run, Clock, Driver, Start};
    struct Fake(u64);
    impl Clock for Fake {
        fn now_ms(&mut self) -> u64 {
            self.0
        }
        fn sleep_ms(&mut self, ms: u64) {
            self.0 += ms;
        }
    }
    struct Thin(u8, String, String);
    impl Driver for Thin {
        fn name(&self) -> String {
            "scripted".into()
        }
        fn check(&mut self, _: &str, _: &str) -> anyhow::Result<()> {
            Ok(())
        }
        fn deploy(&mut self, p: u8) -> anyhow::Result<()> {
            self.0 = p;
            Ok(())
        }
        fn figures(&mut self, from: u64, to: u64) -> anyhow::Result<(Figures, Figures)> {
            let n = (to - from) / 1000; // one answer a second: always too few
            let f = |n| Figures {
                answers: n,
                degraded: 0,
                unavailable: 0,
                latency: Histogram(BTreeMap::from([(30, n)])),
            };
            Ok((f(n), f(n / 10)))
        }
        fn current(&mut self) -> anyhow::Result<Vec<(String, u8)>> {
            Ok(vec![
                (self.1.clone(), 100 - self.0),
                (self.2.clone(), self.0),
            ])
        }
    }
    let env = Env::new("guard-heartbeat");
    let (old, new) = two(&env);
    let reg = Registry::open(&env.p("reg")).unwrap();
    let rollout = |dwell_ms: u64| {
        let slo = understudy_compiler::release::rollout::Slo {
            steps: vec![10, 50, 100],
            dwell_ms,
            max_holds: 1,
            ..Default::default()
        };
        let mut out = Vec::new();
        let rec = run(
            &reg,
            &new,
            Start::New {
                old: None,
                slo,
                force: false,
                replay: None,
            },
            &mut Thin(0, old.clone(), new.clone()),
            &mut Fake(1_800_000_000_000),
            &mut out,
        )
        .unwrap();
        assert_eq!(rec.state.phase, Phase::RolledBack);
        // Each judgement on time: its window whole dwells long, never a tick late.
        for l in &rec.state.log {
            let window = l.evidence.to - l.evidence.from;
            assert_eq!(
                window % dwell_ms,
                0,
                "a window of {window} ms, dwell {dwell_ms} ms"
            );
        }
        let out = String::from_utf8(out).unwrap();
        // No silence over 30 s between the lines the controller prints as it goes (each
        // starts with its time: `2027-01-15T08:00:00Z` first, `08:00:30Z` after).
        let mut last: Option<u64> = None;
        for line in out.lines().filter(|l| !l.starts_with(' ')) {
            let first = line.split_whitespace().next().unwrap_or("");
            let hms = first.rsplit('T').next().unwrap_or("");
            let Some(hms) = hms.strip_suffix('Z') else {
                continue;
            };
            let parts: Vec<u64> = hms.split(':').filter_map(|x| x.parse().ok()).collect();
            let [h, m, s] = parts[..] else { continue };
            let at = h * 3600 + m * 60 + s;
            if let Some(before) = last {
                assert!(
                    (at + 86_400 - before) % 86_400 <= 30,
                    "silent over 30 s before `{line}` (dwell {dwell_ms} ms):\n{out}"
                );
            }
            last = Some(at);
        }
        assert!(last.is_some(), "{out}");
        std::fs::remove_file(record::path(&reg, &new)).unwrap();
        out
    };
    // A tick that does not divide 30 s (a 45 s dwell ticks every 4.5 s) spoke after 31.5 s.
    rollout(45_000);
    let out = rollout(300_000);
    let beats: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("next judgement"))
        .collect();
    // Two dwells of 5 minutes: at least 18 heartbeats.
    assert!(beats.len() >= 18, "{out}");
    assert!(
        beats[0].contains("step 1 of 3 (10%), watching")
            && beats[0].contains("of 1200 each")
            && beats[0].contains("0 of 1 holds")
            && beats[0].contains("end at the earliest"),
        "{}",
        beats[0]
    );
    assert!(out.contains("holding"), "{out}");
}

/// The nightly re-bake (README, "For catalog owners"; .github/workflows/nightly-catalog.yml)
/// promotes a new release and deploys it at 100%: while a rollout's controller runs, `bake
/// --promote --wait D` waits for it and is then refused; while a rollout is stranded it is
/// refused at once with the rollout's way out. Nothing is written either way.
#[test]
fn the_nightly_bake_waits_for_a_running_rollout_and_is_refused_during_an_unfinished_one() {
    // The sample workflow is what this test runs: `bake … --wait … --promote`, in the
    // rollout workflow's concurrency group, and it says a re-bake is not rolled out gradually.
    let workflow = |name: &str| {
        std::fs::read_to_string(format!(
            "{}/../.github/workflows/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let (nightly, rollout) = (
        workflow("nightly-catalog.yml"),
        workflow("policy-rollout.yml"),
    );
    let group = |yml: &str| {
        yml.lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("group:")
                    .map(|g| g.trim().to_string())
            })
            .expect("a concurrency group")
    };
    assert_eq!(group(&nightly), group(&rollout));
    let bake_step = nightly
        .split("understudy bake ")
        .nth(1)
        .and_then(|t| t.split("- name:").next())
        .expect("the nightly workflow runs understudy bake");
    assert!(
        bake_step.contains("--wait ") && bake_step.contains("--promote"),
        "{bake_step}"
    );
    assert!(
        nightly.contains("does not roll out gradually"),
        "the workflow says whether a re-bake rolls out gradually"
    );
    let env = Env::new("guard-nightly");
    let (old, new) = two(&env);
    let bake = |wait: &str| {
        env.run(&[
            "bake",
            "--registry",
            "reg",
            "--wait",
            wait,
            "--catalog",
            "v1/catalog.json",
            "--inventory",
            "v1/inventory.json",
            "--now",
            DAY1_NOON,
            "--promote",
        ])
    };
    let reg = Registry::open(&env.p("reg")).unwrap();
    let count = env.releases().len();
    let held = guard::take(&reg, "releases rollout", None, true).unwrap();
    let t = Instant::now();
    let r = bake("1s");
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    assert!(
        r.stderr.contains("after waiting 1s")
            && r.stderr.contains("a rollout's controller holds this lock"),
        "{}",
        r.stderr
    );
    drop(held);
    strand(&env, &old, &new);
    let t = Instant::now();
    let r = bake("10m");
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(t.elapsed() < Duration::from_secs(60), "refused at once");
    assert!(
        r.stderr.contains("has not ended")
            && r.stderr.contains("--resume")
            && r.stderr.contains("--abort"),
        "{}",
        r.stderr
    );
    assert_eq!((env.active(), env.releases().len()), (old, count));
}

/// `releases list` was about 250 characters wide; it fits in 100 columns, with every column
/// behind `--wide` and every field in `--format json`.
#[test]
fn releases_list_fits_in_100_columns_and_wide_keeps_every_column() {
    let env = Env::new("guard-list");
    let (old, new) = two(&env);
    // The longest rollout state there is: holding, with holds counted.
    strand(&env, &old, &new);
    let reg = Registry::open(&env.p("reg")).unwrap();
    let path = record::path(&reg, &new);
    let mut rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    rec["state"]["phase"] = "watching".into();
    rec["state"]["holds"] = 3.into();
    std::fs::write(&path, rec.to_string()).unwrap();
    // And a release that does not read.
    env.write(
        "reg/releases/r-000000000000/release.json",
        "{ not a release record, and a long explanation of why would not fit in a table",
    );
    let list = env.ok(&["releases", "list", "--registry", "reg", "--now", DAY1_NOON]);
    for line in list.stdout.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} wide: {line}",
            line.chars().count()
        );
    }
    for says in [
        format!("* {old}"),
        "holding 1/2 (50%), 3 holds".into(),
        "r-000000000000  DAMAGED: ".into(),
        "2026-12-01 01:00".into(),
    ] {
        assert!(list.stdout.contains(&says), "{says}:\n{}", list.stdout);
    }
    let wide = env.ok(&[
        "releases",
        "list",
        "--registry",
        "reg",
        "--now",
        DAY1_NOON,
        "--wide",
    ]);
    assert!(
        wide.stdout.lines().any(|l| l.chars().count() > 100),
        "{}",
        wide.stdout
    );
    for says in [
        "VALIDATED",
        "NOTE",
        "holding at step 1 of 2 (50%), 3 of 6 holds",
        "is not a valid release record (key must be a string at line 1 column 3)",
    ] {
        assert!(wide.stdout.contains(says), "{says}:\n{}", wide.stdout);
    }
    let json = env.ok(&["releases", "list", "--registry", "reg", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["releases"].as_array().unwrap().len(), 2);
    assert!(v["releases"][0]["note"].is_string() && v["releases"][0]["validated_at"].is_string());
    assert_eq!(v["damaged"][0]["id"], "r-000000000000");
}

/// `drill --rollout` on the shipped sample failed with only "its policy does not read": the
/// stale snapshot's diagnostic was not shown, and `drill` had no `--now`. Now the diagnostic
/// is printed as `check` renders it, with the instant read and the way to read another.
#[test]
fn drill_rollout_shows_why_a_release_does_not_read_and_reads_it_with_now() {
    let env = Env::new("guard-drill-stale");
    let (_old, new) = two(&env);
    let drill = |extra: &[&str]| {
        let mut args = vec![
            "drill",
            "--rollout",
            "active",
            &new,
            "--registry",
            "reg",
            "--scenario",
            "no-such-scenario.toml",
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    // Validated on DAY1 (the snapshot of 01:00): stale a day later.
    let r = drill(&["--now", DAY2_NOON]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    for says in [
        "its policy does not read as of 2026-12-01T12:00:00Z (--now)",
        "error[ERR_UNTESTED_COMPENSATION_REJECTED]",
        "policy.toml",
    ] {
        assert!(r.stderr.contains(says), "missing `{says}`:\n{}", r.stderr);
    }
    // Without --now it reads as of the wall clock, and says how to read another instant.
    let r = drill(&[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("ERR_UNTESTED_COMPENSATION_REJECTED")
            && r.stderr
                .contains("pass --now to read it as of another instant"),
        "{}",
        r.stderr
    );
    // As of the day it was validated it reads, and the drill goes on to its scenario.
    let r = drill(&["--now", DAY1_NOON]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        !r.stderr.contains("does not read") && r.stderr.contains("no-such-scenario.toml"),
        "{}",
        r.stderr
    );
}

/// The misuse table of docs/rollout.md, row by row: in the state the row names, its command
/// (through `sh`, `understudy` being this binary) exits with the row's code and says what
/// the row quotes.
#[test]
fn the_misuse_table_of_docs_rollout_md_is_what_the_commands_do() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/rollout.md"))
        .unwrap();
    let table = doc
        .split("<!-- misuse -->")
        .nth(1)
        .and_then(|t| t.split("<!-- /misuse -->").next())
        .expect("docs/rollout.md has the misuse table");
    let unquote = |c: &str| -> String {
        let c = c.trim();
        match c.strip_prefix("`` ").and_then(|x| x.strip_suffix(" ``")) {
            Some(x) => x.to_string(),
            None => c.trim_matches('`').to_string(),
        }
    };
    let bin_dir = std::path::Path::new(BIN).parent().unwrap().to_path_buf();
    let link = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(BIN, link.path().join("understudy")).unwrap();
    let mut rows = 0;
    for line in table.lines().filter(|l| l.starts_with("| ")).skip(1) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
        let [with, command, exit, says] = cells[..] else {
            panic!("a row of four cells: {line}");
        };
        let (command, says) = (unquote(command), unquote(says));
        let env = Env::new("guard-misuse");
        let (old, new) = two(&env);
        let front = Front::start(&old, &new, 2_000, 0.0);
        let reg = Registry::open(&env.p("reg")).unwrap();
        let _held = match with.trim() {
            "nothing" => None,
            "running" => Some(guard::take(&reg, "releases rollout", None, true).unwrap()),
            "stranded" | "damaged" => {
                strand(&env, &old, &new);
                if with.trim() == "damaged" {
                    std::fs::write(record::path(&reg, &new), "").unwrap();
                }
                None
            }
            other => panic!("unknown state `{other}` in: {line}"),
        };
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(&env.dir)
            .env(
                "PATH",
                format!(
                    "{}:{}:{}",
                    link.path().display(),
                    bin_dir.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("REGISTRY", "reg")
            .env("OLD", &old)
            .env("NEW", &new)
            .env("FRONT", &front.url)
            .env_remove("CLOUDFLARE_ACCOUNT_ID")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            out.status.code(),
            Some(exit.trim().parse().unwrap()),
            "{line}\n{text}"
        );
        assert!(text.contains(&says), "{line}\nsays:\n{text}");
        rows += 1;
    }
    assert!(rows >= 20, "{rows} rows");
}
