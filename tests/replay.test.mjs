// `understudy replay` proven against the real Worker (issue 37; docs/replay.md has the
// tolerances and the long form's figures).
//
// Self-consistency: seed 000's recovery drill in workerd writes its edge's log lines
// (`drill --logs`); replayed through the same policy, they give back the drill's own
// figures — shares, answers per tier, model calls, when the breaker opened and closed,
// when answers were normal again — within the tolerances below.
//
// Prediction: the same logs replayed through a changed policy predict what a drill of that
// policy against the same scripted origin measures, within the same tolerances; where the
// logs cannot tell (a longer deadline: calls the logs saw cut at 45 ms), the drill's figure
// lies within the replay's best–worst range, widened by those tolerances.
//
// Short form (the suite): time scale 0.1, a breaker that opens on 10 calls (known from the
// logs) and an 80 ms deadline (a range); 67 s on a quiet host. At time scale 0.05 a round
// missed (the breaker on 10 calls replayed as never healthy again) beside a light neighbour:
// its probings are too short for the logs to hold enough of them. The incident with its
// fault cut to 60 s (12,000 requests, 46 s) missed too, on a host with CPU steal: the
// category tier's share drilled 58.8% against 55.3–56.8% replayed — fewer answers, so each
// one that moves moves the share more.
// UNDERSTUDY_LONG=1: time scale 1 (185 s a drill) and two more changed policies — a 35 ms
// deadline and the user tier removed; about 19 min a round (docs/replay.md has its figures).
// UNDERSTUDY_REPLAY_SELF=N: the self-consistency proof alone, N drills one after another
// (about 25 s each at time scale 0.1), each replayed; a tally of those within the
// tolerances (docs/replay.md has its figures). Needs the edge build and the CLI
// (scripts/test.sh builds both). It runs in scripts/e2e.sh's real-time lane.

import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { cp, readFile, writeFile, mkdir, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

import { EDGE_DIR, ROOT, requireEdge, understudy, tempDir, preparePolicy } from "./harness.mjs";
import { INCONCLUSIVE, spendReplay, understudyAsync } from "./judged.mjs";

requireEdge();
const LONG = process.env.UNDERSTUDY_LONG === "1";
const SELF_RUNS = Number(process.env.UNDERSTUDY_REPLAY_SELF ?? 0);
const SCALE = LONG ? "1" : "0.1";
const SCENARIO = join(ROOT, "scenarios", "seed-000-recovery.toml");

/** How far a replay may be from the drill it replays or predicts (docs/replay.md). */
const TOLERANCE = {
  /** A share of answers (live, degraded, from one tier), in share points. */
  share: 0.02,
  /** Model calls: a tenth, or 10 calls, whichever is more. */
  calls: { share: 0.1, min: 10 },
  /** When the breaker opened, and closed again. */
  breakerMs: 300,
  /** When answers were normal again (99% live): one stray deadline miss moves it. */
  recoveredMs: 2000,
  /**
   * A changed deadline, in ms: the calls the host makes a few ms slower in one run than in
   * another decide a deadline this near the model's latency, so the drill of a deadline D
   * lies within the replays of D − this, D and D + this.
   */
  deadlineMs: 5,
};

/** The policy with its model's deadline (and attempt timeout) at `ms`, its budget 20 ms more
 * when that is past the logged 60 ms. */
const deadline = (ms) =>
  Object.assign(
    (t) =>
      t
        .replace('total = "60ms"', `total = "${Math.max(60, ms + 20)}ms"`)
        .replace('deadline = "45ms"', `deadline = "${ms}ms"`)
        .replace('attempt_timeout = "45ms"', `attempt_timeout = "${ms}ms"`),
    { deadlineMs: ms },
  );

/** The changed policies. A breaker change and a longer deadline (a range) in the short
 * form; the long form adds a shorter deadline and a tier removed. */
const CHANGES = {
  "breaker on 10 calls": (t) => t.replace("min_calls = 20", "min_calls = 10"),
  "deadline 80 ms": deadline(80),
  ...(LONG
    ? {
        // 35 ms, 10 over the model's 25: on a shared 2-core host the Worker sees a healthy
        // call take 26–40 ms; replayed, one probe the logs saw take 36 ms fails the last
        // probing, and the drill of 35 ms, whose probes all came within it, recovers. The
        // deadline tolerance (replays of 30 and 40 ms beside it) is what the host decides.
        "deadline 35 ms": deadline(35),
        "no user tier": (t) => t.replace(/\[\[cascade\.tiers\]\]\nname = "user"[\s\S]*?(?=\[\[cascade\.tiers\]\])/, ""),
      }
    : {}),
};

/**
 * A drill of `policy` with its log lines; its drill.json, the logs' path and its exit status
 * (drills of one round run side by side, so asynchronously).
 */
async function drill(dir, name, policy, scenario = SCENARIO) {
  const report = join(dir, `report-${name}`);
  const logs = join(dir, `${name}.ndjson`);
  const r = await understudyAsync(
    ["drill", policy, "--scenario", scenario, "--time-scale", SCALE, "--report", report, "--logs", logs, "--edge", EDGE_DIR],
    { timeoutMs: LONG ? 400_000 : 120_000 },
  );
  const file = join(report, "drill.json");
  assert.ok(existsSync(file), `no drill.json (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  return { name, json: JSON.parse(await readFile(file, "utf8")), logs, status: r.status };
}

/** `understudy replay CANDIDATE --logs LOGS --logged-policy LOGGED`, as JSON. */
function replay(candidate, logs, logged) {
  const r = understudy(["replay", candidate, "--logs", logs, "--logged-policy", logged, "--time-scale", SCALE, "--format", "json"], {
    timeoutMs: 300_000,
  });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  return JSON.parse(r.stdout).replay;
}

/** A drill's figures, in the replay's terms (instants in ms after the first request). */
function drillFigures(d) {
  const f = d.figures;
  const [from, to] = d.fault_window_ms;
  const rec = d.recovery;
  const byTier = Object.fromEntries(Object.entries(f.by_tier).map(([t, n]) => [t, n / f.requests]));
  return {
    live: f.live / f.requests,
    degraded: f.degraded / f.requests,
    byTier,
    calls: d.model_calls,
    degradedAt: rec.degraded_after_ms == null ? null : from + rec.degraded_after_ms,
    healthyAt: rec.breaker_healthy_after_ms == null ? null : to + rec.breaker_healthy_after_ms,
    recoveredAt: rec.recovered_after_ms == null ? null : to + rec.recovered_after_ms,
  };
}

/** A replayed case's figures, in the same terms. */
function replayFigures(c) {
  const i = c.incidents[0] ?? {};
  const byTier = Object.fromEntries(Object.entries(c.by_tier).map(([t, n]) => [t, n / c.answers]));
  return {
    live: c.live / c.answers,
    degraded: c.degraded / c.answers,
    byTier,
    calls: c.model_calls,
    degradedAt: i.degraded_at_ms ?? null,
    healthyAt: i.breaker_healthy_at_ms ?? null,
    recoveredAt: i.recovered_at_ms ?? null,
  };
}

/**
 * Where the drill's figures fall outside the range of the replayed `cases` (a best and a
 * worst case, and those of the replays beside them) widened by the tolerances: one line
 * each (empty: all within).
 */
function misses(drilled, cases) {
  const out = [];
  const within = (what, x, seen, tol) => {
    const known = seen.filter((v) => v != null);
    const show = seen.map((v) => (v == null ? "not seen" : v)).join(", ");
    if (known.length === 0) {
      if (x != null) out.push(`${what}: drill ${x}, replay ${show}`);
      return;
    }
    const lo = Math.min(...known) - tol;
    // An instant one case did not see ("not seen": later than the logs) makes the range
    // open-ended: from the earliest seen on.
    const hi = known.length < seen.length ? Infinity : Math.max(...known) + tol;
    if (x == null ? hi !== Infinity : x < lo || x > hi) out.push(`${what}: drill ${x?.toFixed?.(4) ?? x}, replay ${show} ± ${tol}`);
  };
  const all = (f) => cases.map(f);
  within("live share", drilled.live, all((c) => c.live), TOLERANCE.share);
  within("degraded share", drilled.degraded, all((c) => c.degraded), TOLERANCE.share);
  for (const t of new Set([...Object.keys(drilled.byTier), ...cases.flatMap((c) => Object.keys(c.byTier))])) {
    within(`share from ${t}`, drilled.byTier[t] ?? 0, all((c) => c.byTier[t] ?? 0), TOLERANCE.share);
  }
  within("model calls", drilled.calls, all((c) => c.calls), Math.max(TOLERANCE.calls.min, TOLERANCE.calls.share * drilled.calls));
  within("breaker opened at", drilled.degradedAt, all((c) => c.degradedAt), TOLERANCE.breakerMs);
  within("breaker healthy at", drilled.healthyAt, all((c) => c.healthyAt), TOLERANCE.breakerMs);
  within("recovered at", drilled.recoveredAt, all((c) => c.recoveredAt), TOLERANCE.recoveredMs);
  return out;
}

/**
 * One round: the logged policy's drill with its logs and each changed policy's drill; then
 * the replay of the logs through the logged policy and through each candidate. Returns every
 * miss, one line each, and the round's drills.
 */
async function round(t, dir) {
  await mkdir(dir, { recursive: true });
  const logged = await preparePolicy("recommendations", await mkdirIn(dir, "logged"));
  const candidates = [];
  for (const [name, edit] of Object.entries(CHANGES)) {
    const sub = await mkdirIn(dir, name.replaceAll(" ", "-"));
    const policy = await preparePolicy("recommendations", sub, { edit });
    // A policy without the user tier cannot be drilled with the scenario's user entries:
    // the same incident without them.
    let scenario = SCENARIO;
    if (name === "no user tier") {
      const text = await readFile(SCENARIO, "utf8");
      scenario = join(sub, "scenario.toml");
      await writeFile(scenario, text.split("[[kv]]").filter((p, i) => i === 0 || !p.includes('tier = "user"')).join("[[kv]]"));
    }
    // A changed deadline is replayed beside it at ± the deadline tolerance (not drilled).
    const beside = [];
    if (edit.deadlineMs != null) {
      for (const ms of [edit.deadlineMs - TOLERANCE.deadlineMs, edit.deadlineMs + TOLERANCE.deadlineMs]) {
        beside.push(await preparePolicy("recommendations", await mkdirIn(sub, `${ms}ms`), { edit: deadline(ms) }));
      }
    }
    candidates.push({ name, sub, policy, scenario, beside });
  }
  // One after another: side by side on a 2-core host, the drills stall each other and the
  // embedded tier's share moves with the stalls (measured: 16–17% drilled against 14%
  // replayed, every round inconclusive).
  const base = await drill(dir, "logged", logged);
  const drills = [];
  for (const c of candidates) drills.push(await drill(c.sub, "candidate", c.policy, c.scenario));
  const r = replay(logged, base.logs, logged);
  // The logged policy waits as long as the logs saw: what little it meets that the logs
  // cannot tell (an entry another request wrote back, a read that joined another's) is a
  // range like any other, judged with the same tolerances.
  const drilled = drillFigures(base.json);
  const [best, worst] = [replayFigures(r.logged_policy.best), replayFigures(r.logged_policy.worst)];
  t.diagnostic(`self: drill ${JSON.stringify(drilled)}\nbest ${JSON.stringify(best)}\nworst ${JSON.stringify(worst)}\nunknowable ${JSON.stringify(r.logged_policy.unknowable)}; cut on a busy isolate: ${r.calls_cut_busy}`);
  const missed = misses(drilled, [best, worst]).map((m) => `self-consistency: ${m}`);
  for (const [i, { name, policy, beside }] of candidates.entries()) {
    const d = drills[i];
    const c = replay(policy, base.logs, logged);
    const [best, worst] = [replayFigures(c.candidate.best), replayFigures(c.candidate.worst)];
    const around = beside.flatMap((p) => {
      const b = replay(p, base.logs, logged).candidate;
      return [replayFigures(b.best), replayFigures(b.worst)];
    });
    if (around.length > 0) t.diagnostic(`${name}: ± ${TOLERANCE.deadlineMs} ms: ${around.map((f) => JSON.stringify(f)).join("\n")}`);
    const episodes = d.json.breaker.transitions.map((x) => `${x.at_ms} ${x.to} ${JSON.stringify(x.evidence ?? null)}`);
    t.diagnostic(`${name}: the drill's breaker: ${episodes.join("; ")}`);
    t.diagnostic(`${name}: drill ${JSON.stringify(drillFigures(d.json))}\nbest ${JSON.stringify(best)}\nworst ${JSON.stringify(worst)}\nunknowable ${JSON.stringify(c.candidate.unknowable)}`);
    if (name === "deadline 80 ms") {
      // Calls the logs saw cut at 45 ms: what they answered by 80 ms is not in the logs.
      assert.ok(c.candidate.unknowable.calls_past_censoring > 0, JSON.stringify(c.candidate.unknowable));
      // Two worlds, two runs: a range (not always best above worst — an answer at 46 ms is
      // one the breaker judges slow).
      assert.notDeepEqual(c.candidate.best, c.candidate.worst, "a range");
    }
    missed.push(...misses(drillFigures(d.json), [best, worst, ...around]).map((m) => `${name}: ${m}`));
  }
  return { missed, drills: [base, ...drills] };
}

/** Keeps a missed run's files (its policies, logs and drill reports) for diagnosis. */
async function keep(t, dir, what) {
  const kept = join(ROOT, "target", "replay-misses", `${new Date().toISOString().replace(/[:.]/g, "-")}-${what}`);
  await cp(dir, kept, { recursive: true });
  t.diagnostic(`${what} missed: its logs and reports are kept in ${kept}`);
}

async function mkdirIn(dir, name) {
  const sub = join(dir, name);
  await mkdir(sub, { recursive: true });
  return sub;
}

test("docs/replay.md states the tolerances this test applies", async () => {
  const doc = await readFile(join(ROOT, "docs", "replay.md"), "utf8");
  const table = doc.slice(doc.indexOf("| figure | tolerance |"));
  const row = (figure) => table.split("\n").find((l) => l.startsWith(`| ${figure}`)) ?? `(no row "${figure}")`;
  assert.match(row("live, degraded and each tier's share"), new RegExp(`± ${TOLERANCE.share * 100} share points`));
  assert.match(row("model calls"), new RegExp(`± ${TOLERANCE.calls.share * 100}%, at least ± ${TOLERANCE.calls.min} calls`));
  assert.match(row("when the breaker opened"), new RegExp(`± ${TOLERANCE.breakerMs} ms`));
  assert.match(row("when answers were normal again"), new RegExp(`± ${TOLERANCE.recoveredMs / 1000} s`));
  assert.match(row("a changed deadline"), new RegExp(`± ${TOLERANCE.deadlineMs} ms`));
});

describe(`understudy replay against the real Worker (time scale ${SCALE})`, () => {
  test("the logged policy replayed gives the drill's own figures back; changed policies predict their drills", { timeout: LONG ? 4_000_000 : 600_000 }, async (t) => {
    const tmp = await tempDir("understudy-replay-");
    try {
      // A round that misses fails at once: the replay or the edge is to blame. Only a round
      // one of whose drills the host's witness judged inconclusive (exit 3: stalls explain an
      // invariant the drill broke) is played again, within the suite's replay budget and
      // recorded in its ledger (tests/judged.mjs), as every drill of the suite is.
      for (let n = 1; ; n++) {
        const dir = join(tmp.dir, `round-${n}`);
        const { missed, drills } = await round(t, dir);
        if (missed.length > 0) await keep(t, dir, `round-${n}`);
        const stalled = drills.filter((d) => d.status === INCONCLUSIVE);
        if (missed.length === 0 || stalled.length === 0) {
          assert.deepEqual(missed, [], `round ${n}: ${drills.map((d) => `${d.name} exit ${d.status}`).join(", ")}`);
          break;
        }
        t.diagnostic(`round ${n} missed with ${stalled.length} drill(s) inconclusive: ${missed.join("; ")}`);
        spendReplay(t, `replay round (${stalled.map((d) => d.name).join(", ")} inconclusive; missed: ${missed.join("; ")})`, stalled[0]);
      }
    } finally {
      await tmp.cleanup();
    }
  });
});

if (SELF_RUNS > 0) {
  test(`self-consistency, ${SELF_RUNS} drills one after another (UNDERSTUDY_REPLAY_SELF)`, { timeout: SELF_RUNS * 300_000 }, async (t) => {
    const tmp = await tempDir("understudy-replay-self-");
    const missed = [];
    const excused = [];
    try {
      const logged = await preparePolicy("recommendations", await mkdirIn(tmp.dir, "logged"));
      for (let n = 1; n <= SELF_RUNS; n++) {
        const dir = await mkdirIn(tmp.dir, `run-${n}`);
        const d = await drill(dir, "logged", logged);
        const r = replay(logged, d.logs, logged);
        const m = misses(drillFigures(d.json), [replayFigures(r.logged_policy.best), replayFigures(r.logged_policy.worst)]);
        if (m.length > 0) {
          await cp(dirname(logged), join(dir, "policy"), { recursive: true });
          await keep(t, dir, `self-${n}`);
          // As in the suite's rounds: a drill the host's witness judged inconclusive (exit
          // 3) is no proof either way, and is counted apart.
          (d.status === INCONCLUSIVE ? excused : missed).push(`run ${n} (drill exit ${d.status}): ${m.join("; ")}`);
        }
        await rm(dir, { recursive: true, force: true });
      }
      t.diagnostic(
        `${SELF_RUNS} drills replayed: ${SELF_RUNS - missed.length - excused.length} within the tolerances, ` +
          `${missed.length} missed, ${excused.length} missed with the drill inconclusive`,
      );
      for (const e of excused) t.diagnostic(`inconclusive: ${e}`);
      assert.deepEqual(missed, []);
    } finally {
      await tmp.cleanup();
    }
  });
}
