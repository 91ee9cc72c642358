// [R-GRADUAL] [R-STATE] A release's rollout against two real Workers (ADR 012): both releases
// run as versions of one Worker in workerd behind the local front, the simulated model behind
// them, steady traffic through the front, and `understudy releases rollout` — the real
// command, as a child of `understudy drill --rollout` — deciding the steps. The short form of
// the proofs (10% → 50% → 100%, a 2 s dwell, 120 answers per version, 5-point margins):
//   - a good release advances through every step to 100%, with its controller SIGKILLed
//     after its first advance and resumed from the registry: no step lost or repeated;
//   - a bad release (its deadline below the model's latency) is rolled back at its first
//     step, its exposure within the bound, and ACTIVE never leaves the old release.
// Judged on the SLO at 200 req/s against the host's witness (an inconclusive run is played
// again within the replay budget, tests/judged.mjs), so in scripts/e2e.sh's real-time lane; the front's split
// and the low-traffic hold are tests/rollout-holds.test.mjs.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";

import { requireEdge } from "./harness.mjs";
import { SHORT, failed, rolloutRig } from "./rollout-kit.mjs";
import { judged } from "./judged.mjs";

requireEdge();

describe("understudy drill --rollout", () => {
  const rig = rolloutRig();
  const { ids, active, drill } = rig;

  test("a good release advances to 100% by its policy's [rollout] steps, its controller killed mid-rollout and resumed with no step lost or repeated", async (t) => {
    const report = join(rig.tmp.dir, "report-good");
    const { r, out } = await judged(t, "rollout: a good release advances", () =>
      drill("active", ids.good, ["--rate", "200", "--expect", "advance", "--kill-controller", "--report", report]),
    );
    assert.equal(r.status, 0, `${failed(out).join("\n")}\n${r.stderr}`);
    assert.equal(out.phase, "done");
    assert.ok(out.killed_at, "the controller was killed once");
    assert.match(r.stderr, /resuming from the registry/);
    const distinct = out.deployments.map(([, p]) => p).filter((p, i, a) => i === 0 || a[i - 1] !== p);
    assert.deepEqual(distinct, [10, 50, 100], "the release's own [rollout] steps");
    assert.equal(out.record.slo.dwell_ms, 2000);
    const advances = out.record.state.log.filter((l) => l.judgement.verdict === "advance").map((l) => l.step);
    assert.deepEqual(advances, [10, 50], "each step advanced once");
    assert.ok(out.checks.some((c) => c.name === "ROLLOUT_AFTER" && c.held));
    assert.equal(out.active_after, ids.good, "the rolled-out release is active (in the drill's scratch registry)");
    assert.equal(await active(), ids.old, "the real registry is never changed by a drill");
    // (`rollouts/` holds the deployment lock that `releases add --promote` took: no record.)
    const records = await readdir(join(rig.reg, "rollouts")).catch(() => []);
    assert.deepEqual(records.filter((f) => f.endsWith(".json")), [], "no rollout record left in it");
    // [T-WITNESS] The host's witness ran beside the traffic, watching the versions' workerd.
    assert.ok(out.witness.summary.wakes > 1_000, JSON.stringify(out.witness.summary));
    assert.equal(out.witness.trace.watched[0]?.label, "workerd", JSON.stringify(out.witness.trace.watched));
    assert.equal(typeof out.traffic_started_at_ms, "number");
    // … and its stalls are drawn in the picture.
    const svg = await readFile(join(report, "rollout.svg"), "utf8");
    assert.match(svg, /host stalls seen by the witness \(\d+\)/);
  });

  test("a bad release is rolled back at its first step, its exposure within the bound", async (t) => {
    const before = await active();
    const { r, out } = await judged(t, "rollout: a bad release is rolled back", () =>
      drill(ids.old, ids.bad, ["--rate", "200", "--expect", "rollback", ...SHORT]),
    );
    assert.equal(r.status, 0, `${failed(out).join("\n")}\n${r.stderr}`);
    assert.equal(out.phase, "rolled_back");
    const verdicts = out.record.state.log.map((l) => l.judgement.verdict);
    assert.equal(verdicts.at(-1), "roll_back");
    assert.ok(out.record.state.log.at(-1).judgement.reasons[0].startsWith("worse — degraded share"), JSON.stringify(out.record.state.log.at(-1)));
    const e = out.exposure;
    assert.ok(e, "the exposure was measured");
    assert.ok(e.seconds <= e.bound_seconds, `exposed ${e.seconds} s, bound ${e.bound_seconds} s`);
    assert.ok(e.share < 0.2, `the bad release answered ${(100 * e.share).toFixed(1)}% while exposed (first step 10%)`);
    assert.equal(await active(), before, "ACTIVE never left the old release");
  });
});
