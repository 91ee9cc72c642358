// [T-WITNESS] The proof that a verdict says why (docs/scenarios.md, "Verdicts that say why").
// Built to hold whatever the host does — docs/scenarios.md counts the same drill, healthy and
// with its late timer, over 20 runs beside two busy loops: no red on the healthy edge — so
// scripts/e2e.sh runs it beside the bench.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";

import { ROOT, requireEdge } from "./harness.mjs";
import { INCONCLUSIVE, drill as drillAt, lateTimerEdge, why } from "./judged.mjs";

requireEdge();
const POLICIES = join(ROOT, "policies");
const SCENARIOS = join(ROOT, "scenarios");

const drill = (policy, scenario, extra = [], opts = {}) => drillAt(join(POLICIES, policy), scenario, extra, opts);
const verdict = (json, name) => json.verdicts.find((v) => v.name === name);

// Seed 000's recovery drill with workerd stopped (SIGSTOP) for 150 ms as the breaker trips, 120 ms as its last probing begins (a
// slow probe there once held the breaker open 6 s more: CI's red runs) and 80 ms as the
// answers settle after its close. A healthy edge may come out green or inconclusive, never
// red; an edge whose engine's timer fires 60 ms late is red, and blamed for answers no stall
// covers. The two run side by side: each judgement must hold whatever the other does to the
// host.
const STALLS = ["--inject-stall", "150ms+150ms", "--inject-stall", "15450ms+120ms", "--inject-stall", "16700ms+80ms"];
const recoveryWith = (extra, opts) => drill("recommendations.toml", join(SCENARIOS, "seed-000-recovery.toml"), ["--time-scale", "0.1", ...extra], opts);

/** Whether the witness saw each injected stop on its own (a stall it names covering most of it). */
function assertWitnessed(d) {
  const injected = d.json.injected_stalls;
  assert.ok(injected.length >= 2, JSON.stringify(injected));
  for (const s of injected) {
    const seen = d.json.witness.stalls
      .filter((w) => w.seen_by.includes("workerd stopped"))
      .reduce((sum, w) => sum + Math.max(0, Math.min(w.to_ms, s.to_ms) - Math.max(w.from_ms, s.from_ms)), 0);
    assert.ok(seen >= 0.8 * (s.to_ms - s.from_ms), `the witness saw ${seen.toFixed(0)} ms of the stop ${JSON.stringify(s)}`);
  }
}

const witnessProofs = () => {
  test("a healthy edge with workerd stopped at the decisive moments is green or inconclusive, never red", { timeout: 120_000 }, async () => {
    const d = await recoveryWith(STALLS);
    assert.notEqual(d.status, 1, `a healthy edge was blamed:\n${why(d)}\n${d.stderr}`);
    assert.ok([0, INCONCLUSIVE].includes(d.status), `exit ${d.status}\n${d.stderr}`);
    assertWitnessed(d);
    for (const v of d.json.verdicts.filter((v) => v.judgement === "inconclusive")) {
      assert.ok(v.excused.length > 0 && v.excused.every((e) => e.stalls.length > 0), JSON.stringify(v));
    }
    if (d.status === INCONCLUSIVE) assert.match(d.stderr, /^inconclusive: invariant [A-Z_]+ broken only by answers that stalls of the host explain/m);
  });

  test("an edge whose timer fires 60 ms late is red, its late answers blamed, stalls or not", { timeout: 120_000 }, async () => {
    const late = await lateTimerEdge(60);
    try {
      const d = await recoveryWith(["--inject-stall", "150ms+150ms", "--inject-stall", "15450ms+120ms"], { edge: late.dir });
      assert.equal(d.status, 1, `${why(d)}\n${d.stderr}`);
      assertWitnessed(d);
      // The deadline answers: every one 60 ms late. Those a stop covers are set aside, and
      // the rest are still late: blamed, away from the stops. (LATENCY_BUDGET's tail may be
      // the host's as well: failed or inconclusive, never held.)
      const kept = verdict(d.json, "DEADLINE_KEPT");
      assert.equal(kept.judgement, "failed", JSON.stringify(kept));
      assert.notEqual(verdict(d.json, "LATENCY_BUDGET").judgement, "held");
      const stops = d.json.injected_stalls;
      const near = (o) => stops.some((s) => s.to_ms > o.from_ms - 50 && s.from_ms < o.to_ms);
      assert.ok(kept.blamed.some((o) => !near(o)), `no blamed answer away from the stops: ${JSON.stringify(kept.blamed.slice(0, 3))}`);
      assert.ok(kept.blamed.every((o) => o.late_ms > 0 && o.what.startsWith("request ")), JSON.stringify(kept.blamed[0]));
      assert.match(d.stderr, /blamed on the edge: request \d+/);
      assert.match(d.svg, /blamed on the edge \(\d+\)/);
    } finally {
      await late.cleanup();
    }
  });
};


describe("verdicts that say why: stalls injected, a defect built in [T-WITNESS]", { concurrency: true }, witnessProofs);
