//! [B-REGISTRY] The release registry survives what a cron job meets (issue 12): a writer
//! killed with SIGKILL at any moment, a lock left by a dead writer, a live writer to wait
//! for, a truncated history, an empty or missing ACTIVE, a release changed after it was
//! made. Through the binary, on the stand-in edge of tests/common.
//!
//! The crash test runs `UNDERSTUDY_CRASH_CYCLES` cycles (default 30; the full proof
//! is `UNDERSTUDY_CRASH_CYCLES=200 cargo test -p understudy --test registry crash`), each a
//! promote, a rollback or a re-bake killed at a random moment (`UNDERSTUDY_CRASH_SEED`
//! replays a run; the seed is printed).

mod common;

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use understudy_compiler::dist::edge::GLUE_JS;
use understudy_compiler::release::record::Record;
use understudy_compiler::release::registry::history;

const STEP_DELAY: &str = "UNDERSTUDY_REGISTRY_STEP_DELAY_MS";

impl Env {
    /// Starts `understudy ARGS` in the background, pausing `delay_ms` after each durable
    /// step of its registry writes.
    fn spawn_slow(&self, args: &[&str], delay_ms: u64) -> Child {
        Command::new(BIN)
            .args(args)
            .current_dir(&self.dir)
            .env(STEP_DELAY, delay_ms.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn record(&self, id: &str) -> Record {
        let text =
            std::fs::read_to_string(self.p(&format!("reg/releases/{id}/release.json"))).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn history(&self) -> history::Parsed {
        history::parse(&std::fs::read_to_string(self.p("reg/history.jsonl")).unwrap_or_default())
    }

    fn wait_for_lock(&self) {
        let t = Instant::now();
        while !std::fs::read_to_string(self.p("reg/.lock")).is_ok_and(|s| s.contains("pid")) {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the writer never took the lock"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn promote_args(id: &str) -> Vec<&str> {
    vec![
        "releases",
        "promote",
        id,
        "--registry",
        "reg",
        "--now",
        DAY2_NOON,
    ]
}

/// A writer killed while it holds the lock leaves `.lock` naming it; the next writer takes
/// it over with a message naming the dead process — no manual step.
#[test]
fn a_lock_left_by_a_killed_writer_is_taken_over_with_a_message() {
    let env = Env::new("dead-lock");
    let (_, current) = env.two_policies();
    let other = env.history().entries[1].release.clone();
    let mut child = env.spawn_slow(&promote_args(&other), 10_000);
    env.wait_for_lock();
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        env.p("reg/.lock").exists(),
        "the killed writer's lock stays behind"
    );
    assert_eq!(env.active(), current);

    let r = env.ok(&promote_args(&other));
    assert!(
        r.stderr.contains("took over the lock")
            && r.stderr.contains(&format!("process {pid}"))
            && r.stderr.contains("no longer running"),
        "{}",
        r.stderr
    );
    assert_eq!(env.active(), other);
    assert!(!env.p("reg/.lock").exists());
    env.ok(&["releases", "verify", "--registry", "reg"]);
}

/// A live writer's lock: refused at once without --wait (naming the holder), waited for
/// with it.
#[test]
fn a_live_lock_is_refused_at_once_or_waited_for_with_wait() {
    let env = Env::new("live-lock");
    let (_, current) = env.two_policies();
    let other = env.history().entries[1].release.clone();
    // About 1.5 s under the lock (a pause after each durable step).
    let mut child = env.spawn_slow(&promote_args(&other), 400);
    env.wait_for_lock();
    let r = env.run(&promote_args(&current));
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("locked by process {}", child.id()))
            && r.stderr.contains("releases promote")
            && r.stderr.contains("--wait"),
        "{}",
        r.stderr
    );
    let mut args = promote_args(&current);
    args.extend(["--wait", "30s"]);
    let t = Instant::now();
    let r = env.ok(&args);
    assert!(r.stderr.contains("waiting (at most 30s)"), "{}", r.stderr);
    assert!(child.wait().unwrap().success());
    assert!(t.elapsed() > Duration::from_millis(200));
    // Both changes happened, in order.
    let h = env.history();
    assert!(h.is_intact(), "{:?}", h.bad);
    let last: Vec<&str> = h
        .entries
        .iter()
        .rev()
        .take(2)
        .map(|e| e.release.as_str())
        .collect();
    assert_eq!(last, vec![current.as_str(), other.as_str()]);
    assert_eq!(env.active(), current);
}

/// A history cut short (a torn last line) is found by verify, blocks changes with a message
/// naming repair, and repair keeps every whole line and the damaged file.
#[test]
fn a_truncated_history_is_found_and_repaired() {
    let env = Env::new("truncated");
    let (_, current) = env.two_policies();
    let path = env.p("reg/history.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let whole = text.lines().count();
    std::fs::write(&path, &text[..text.len() - 20]).unwrap();

    let v = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(v.code, 2, "{}", v.stdout);
    assert!(
        v.stdout.contains(&format!("line {whole}: torn")),
        "{}",
        v.stdout
    );
    assert!(v.stdout.contains("releases repair"), "{}", v.stdout);
    let other = env.history().entries[1].release.clone();
    let r = env.run(&promote_args(&other));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("releases repair"), "{}", r.stderr);

    let r = env.ok(&["releases", "repair", "--registry", "reg"]);
    assert!(
        r.stdout
            .contains("the damaged file is kept as history.jsonl.damaged-"),
        "{}",
        r.stdout
    );
    env.ok(&["releases", "verify", "--registry", "reg"]);
    let h = env.history();
    // The torn line is gone; a repair entry links the whole lines to ACTIVE again.
    assert_eq!(h.entries.len(), whole);
    assert_eq!(h.entries.last().unwrap().action, "repair");
    assert_eq!(h.entries.last().unwrap().release, current);
    assert_eq!(env.active(), current);
    env.ok(&promote_args(&other));
    env.ok(&[
        "releases",
        "rollback",
        "--registry",
        "reg",
        "--now",
        DAY2_NOON,
    ]);
}

/// An empty or missing ACTIVE is rebuilt from the history's last entry.
#[test]
fn an_empty_or_missing_active_is_restored_from_the_history() {
    let env = Env::new("active");
    let (_, current) = env.two_policies();
    for damage in ["", "\n", "r-zz\n", "missing"] {
        if damage == "missing" {
            std::fs::remove_file(env.p("reg/ACTIVE")).unwrap();
        } else {
            env.write("reg/ACTIVE", damage);
        }
        let v = env.run(&["releases", "verify", "--registry", "reg"]);
        assert_eq!(v.code, 2, "{damage:?}: {}", v.stdout);
        assert!(
            v.stdout.contains("repair: write"),
            "{damage:?}: {}",
            v.stdout
        );
        let r = env.ok(&["releases", "repair", "--registry", "reg"]);
        assert!(
            r.stdout.contains(&format!("wrote {current} into ACTIVE")),
            "{}",
            r.stdout
        );
        assert_eq!(env.active(), current);
        env.ok(&["releases", "verify", "--registry", "reg"]);
    }
    // Nothing to tell which release was active: named, not guessed.
    std::fs::remove_file(env.p("reg/history.jsonl")).unwrap();
    env.write("reg/ACTIVE", "");
    let r = env.run(&["releases", "repair", "--registry", "reg"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("repair cannot fix it") && r.stdout.contains("releases promote"),
        "{}",
        r.stdout
    );
}

/// A changed file whose bytes the store still holds elsewhere is restored; a release whose
/// content (record and all) was rewritten is found by recomputing its ID, and named.
#[test]
fn tampered_releases_are_found_restored_from_the_store_or_named() {
    let env = Env::new("tampered");
    let (v1, current) = env.two_policies();
    // The glue is the same in every release: a damaged copy comes back from another.
    env.write(&format!("reg/releases/{current}/{GLUE_JS}"), "broken");
    env.write(&format!("reg/releases/{current}/extra.js"), "evil()");
    let v = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(v.code, 2);
    assert!(
        v.stdout.contains(&format!("DAMAGED  {current}")),
        "{}",
        v.stdout
    );
    let r = env.ok(&["releases", "repair", "--registry", "reg"]);
    assert!(
        r.stdout
            .contains(&format!("restored {GLUE_JS} of release {current}")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("lost+found"), "{}", r.stdout);
    assert!(env
        .p(&format!("reg/lost+found/{current}/extra.js"))
        .is_file());
    env.ok(&["releases", "verify", "--registry", "reg"]);

    // The policy source edited and release.json's hash of it updated to match: every file
    // checks against the record, but the content no longer hashes to the ID.
    let rel = format!("reg/releases/{v1}");
    let policy = env.p(&format!("{rel}/sources/policy.toml"));
    let text = std::fs::read_to_string(&policy)
        .unwrap()
        .replace("800ms", "900ms");
    std::fs::write(&policy, &text).unwrap();
    let mut rec = env.record(&v1);
    rec.files.insert(
        "sources/policy.toml".into(),
        understudy_compiler::dist::sha256_hex(text.as_bytes()),
    );
    std::fs::write(env.p(&format!("{rel}/release.json")), rec.to_json()).unwrap();
    let v = env.run(&["releases", "verify", "--registry", "reg"]);
    assert_eq!(v.code, 2);
    assert!(
        v.stdout.contains(&format!("DAMAGED  {v1}"))
            && v.stdout.contains("no longer hashes to its ID"),
        "{}",
        v.stdout
    );
    let r = env.run(&["releases", "repair", "--registry", "reg"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stdout
            .contains(&format!("release {v1} cannot be restored")),
        "{}",
        r.stdout
    );
    // It is refused wherever it would be used; the rest of the registry works.
    let p = env.run(&promote_args(&v1));
    assert_eq!(p.code, 2);
    assert_eq!(env.active(), current);
}

/// A small xorshift: reproducible random moments without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Where a kill left the registry, as `verify` found it.
fn classify(verify: &str) -> &'static str {
    if verify.contains("registry") && verify.contains(": ok") {
        "clean"
    } else if verify.contains("never took effect") {
        "interrupted change"
    } else if verify.contains("temporary file a killed writer left") {
        "orphan temporaries"
    } else {
        "other"
    }
}

/// The evidence: promote / rollback / re-bake, each killed with SIGKILL at a random
/// moment; after each, verify (and repair where verify says so) leaves a registry whose
/// ACTIVE is one of the two releases involved, with every earlier release intact and the
/// earlier history kept, with no manual step.
#[test]
fn crash_writers_killed_at_random_moments_never_lose_anything() {
    let cycles: usize = std::env::var("UNDERSTUDY_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let seed: u64 = std::env::var("UNDERSTUDY_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash test: {cycles} cycles, UNDERSTUDY_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let env = Env::new("crash");
    env.two_policies();
    let delay = 15;
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    let mut longest = Duration::from_millis(300);
    for cycle in 0..cycles {
        let before = env.active();
        let ids_before = env.releases();
        let history_before = env.history().entries;
        let kind = ["promote", "rollback", "bake"][cycle % 3];
        let args: Vec<String> = match kind {
            "promote" => {
                // A release with day 2's snapshot (fresh at DAY2_NOON) other than the active.
                let fresh: Vec<String> = ids_before
                    .iter()
                    .filter(|id| **id != before)
                    .filter(|id| {
                        env.record(id)
                            .catalog
                            .is_some_and(|c| c.snapshot_at == DAY2)
                    })
                    .cloned()
                    .collect();
                let target = fresh[rng.below(fresh.len() as u64) as usize].clone();
                promote_args(&target)
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            }
            "rollback" => [
                "releases",
                "rollback",
                "--registry",
                "reg",
                "--now",
                DAY2_NOON,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            _ => {
                let skus: Vec<String> = (0..3)
                    .map(|k| format!("SKU-{}", 100 + cycle * 3 + k))
                    .collect();
                let skus: Vec<&str> = skus.iter().map(String::as_str).collect();
                env.write(&format!("c{cycle}/catalog.json"), &catalog(&skus));
                env.write(&format!("c{cycle}/inventory.json"), &inventory(DAY2, &skus));
                [
                    "bake",
                    "--registry",
                    "reg",
                    "--catalog",
                    &format!("c{cycle}/catalog.json"),
                    "--inventory",
                    &format!("c{cycle}/inventory.json"),
                    "--now",
                    DAY2_NOON,
                    "--promote",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect()
            }
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let kill_after = Duration::from_millis(rng.below(longest.as_millis() as u64 + 1));
        let started = Instant::now();
        let mut child = env.spawn_slow(&args, delay);
        let mut finished = false;
        while started.elapsed() < kill_after {
            if child.try_wait().unwrap().is_some() {
                finished = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if finished {
            longest = longest.max(started.elapsed());
        } else {
            let _ = child.kill();
        }
        let status = child.wait().unwrap();

        let verify = env.run(&["releases", "verify", "--registry", "reg"]);
        let class = if finished && status.success() {
            "completed"
        } else {
            classify(&verify.stdout)
        };
        *tally.entry(class).or_default() += 1;
        let ctx =
            format!("cycle {cycle} ({kind} {args:?}, killed after {kill_after:?}, seed {seed})");
        if verify.code != 0 {
            assert_eq!(verify.code, 2, "{ctx}: {}{}", verify.stdout, verify.stderr);
            assert!(
                !verify.stdout.contains("repair cannot fix"),
                "{ctx}: {}",
                verify.stdout
            );
            let repair = env.run(&["releases", "repair", "--registry", "reg"]);
            assert_eq!(repair.code, 0, "{ctx}: {}{}", repair.stdout, repair.stderr);
            let again = env.run(&["releases", "verify", "--registry", "reg"]);
            assert_eq!(again.code, 0, "{ctx}: {}{}", again.stdout, again.stderr);
        }

        // ACTIVE is one of the two releases involved.
        let after = env.active();
        if after != before {
            let rec = env.record(&after);
            let ok = match kind {
                "promote" => args[2] == after,
                "rollback" => {
                    // A re-pairing made from the active release, or an existing one re-used.
                    rec.parent.as_deref() == Some(before.as_str()) || ids_before.contains(&after)
                }
                _ => rec.kind.as_str() == "bake" && rec.parent.as_deref() == Some(before.as_str()),
            };
            assert!(
                ok,
                "{ctx}: ACTIVE moved from {before} to {after}, not the operation's target"
            );
        }
        // Nothing lost: every earlier release is there (and verify found it intact), and
        // the earlier history is a prefix of the history now.
        let ids_after = env.releases();
        for id in &ids_before {
            assert!(ids_after.contains(id), "{ctx}: release {id} was lost");
        }
        let h = env.history();
        assert!(h.is_intact(), "{ctx}: {:?}", h.bad);
        assert!(
            h.entries.len() >= history_before.len(),
            "{ctx}: history lost entries"
        );
        for (a, b) in history_before.iter().zip(&h.entries) {
            assert_eq!(
                (&a.release, a.at_ms),
                (&b.release, b.at_ms),
                "{ctx}: history rewritten"
            );
        }
        assert_eq!(
            h.entries.last().map(|e| e.release.as_str()),
            Some(after.as_str()),
            "{ctx}"
        );
    }
    eprintln!("crash test: where the kills left the registry: {tally:?}");
}
