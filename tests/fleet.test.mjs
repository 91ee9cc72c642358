// The fleet-scoped breaker (docs/adr/011-fleet-scoped-breaker.md) in workerd, judged in real
// time: seed 000's incident drilled on 8 isolates (one region, then two), each isolate's
// breaker against `simulate`'s; and the answers' p99 with the coordinator failing against
// isolate scope's. The coordinator's behaviour judged by state (its build, reports, watches,
// snapshot, regions' failover) is in tests/coordinator.test.mjs. It runs in scripts/e2e.sh's
// real-time lane.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";

import { ROOT, editedScenario, requireEdge, tempDir } from "./harness.mjs";
import { drill as drillAt, judged, why } from "./judged.mjs";
import { MODES, assertDisclosed, coordinatorRig, p99, statusOf } from "./coordinator-kit.mjs";

const LONG = process.env.UNDERSTUDY_LONG === "1";

requireEdge();

// `understudy drill --isolates 8`: 8 copies of the built Worker in one workerd, each its own
// isolate, sharing KV and the coordinator's Durable Object; seed 000's incident at 120 req/s
// in all (15 a second each), the incident's clock shrunk 10×. Fleet scope must degrade within
// 3 s and recover within 45 s (scaled: 4.5 s) on every isolate; isolate scope, run the same
// way, cannot recover in time — each isolate's 2% of 15 req/s takes its 20 probes too long.
// Why 120 req/s and not fewer: seed 000's last probing in this incident starts ~30 s after the
// fault's end, so the fleet must send 20 probes (2% of its traffic) in the 15 s left: at least
// ~70 req/s in all (docs/fleet.md).
// The short form shortens the incident's fault from 120 s to 60 s (155 s in all instead of
// 215): its decisive moments are the same — the onset, a probing that fails in the fault, the
// last probing 30 s after the fault's end — and so is what `simulate --isolates 8` finds at
// 120 req/s (fleet verdict closed 39.56 s after the fault's end, against 39.91 s; isolate
// scope never). UNDERSTUDY_LONG=1 drills the incident as it is.
describe("drill --isolates 8 [F-SCOPE]", () => {
  let scenario = join(ROOT, "scenarios", "seed-000-fleet.toml");
  let tmp;
  before(async () => {
    if (LONG) return;
    tmp = await tempDir("understudy-fleet-");
    scenario = await editedScenario(scenario, tmp.dir, [
      ['to = "150s"', 'to = "90s"'],
      ["requests = 516000", "requests = 372000"],
    ]);
  });
  after(() => tmp?.cleanup());
  const drill = (scope, ...extra) =>
    drillAt(join(ROOT, "policies", "recommendations.toml"), scenario, [
      "--isolates", "8", "--rate", "120", "--time-scale", "0.1", "--scope", scope, ...extra,
    ]);
  const verdict = (d, name) => d.json?.verdicts?.find((v) => v.name === name);

  test("fleet scope passes seed 000's scenario on every isolate, as simulate --isolates 8 does", { timeout: 480_000 }, async (t) => {
    // A real-time run on a shared 2-core machine: 8 isolates, the load and the origin on two
    // cores. A stall of the host at one of the incident's few decisive moments used to break
    // a run whatever the edge did — one probe over 45 ms in the last probing holds the fleet
    // open 60 s (seed 000's rule), a burst of deadline misses in an isolate's last second
    // reads as "not normal". The drill's witness now tells those runs apart (inconclusive,
    // played again within the suite's budget); a run the edge is blamed for fails at once.
    const d = await judged(t, "drill --isolates 8, fleet scope", () => drill("fleet", "--compare-simulate"));
    const episodes = (d.json?.isolates ?? []).map((i) => `isolate ${i.isolate}: ${i.transitions.map((x) => `${Math.round(x.at_ms)} ${x.to}`).join(", ")}`);
    assert.equal(d.status, 0, `${why(d)}\nbreakers: ${episodes.join(" | ")}\n${d.stdout}\n${d.stderr}`);
    for (const name of ["ANSWERED", "DISCLOSED", "DEGRADE_WITHIN", "RECOVER_WITHIN", "SIMULATE_AGREES"]) {
      assert.equal(verdict(d, name)?.ok, true, `${name}: ${JSON.stringify(verdict(d, name))}`);
    }
    // Each isolate's breaker went through the same episodes as in simulate (one each: open
    // at the onset, healthy again after the fault), each moment within the stated tolerance.
    assert.match(verdict(d, "SIMULATE_AGREES").detail, /^all 8 isolates: the same breaker episodes/);
    assert.equal(d.json.simulate_disagreements.length, 0);
    assert.equal(d.json.isolates.length, 8);
    for (const iso of d.json.isolates) {
      assert.ok(iso.requests > 100, JSON.stringify(iso));
      assert.ok(iso.degraded_after_ms <= 3000, JSON.stringify(iso));
      assert.ok(iso.recovered_after_ms !== null, JSON.stringify(iso));
    }
    t.diagnostic(`fleet scope: ${verdict(d, "DEGRADE_WITHIN").detail}; ${verdict(d, "RECOVER_WITHIN").detail}; ${verdict(d, "SIMULATE_AGREES").detail}`);
  });

  // Regional coordinators (ADR 011, "Regions and the global merge"): the 8 isolates round
  // robin over enam and weur — each isolate's requests carry its region's `cf` (workerd's cf
  // blob header) — one coordinator Durable Object per region and the global one merging
  // their windows, against `simulate --isolates 8 --regions 2`.
  test("drill --isolates 8 --regions 2: each region's coordinator and the global merge meet seed 000's bounds, as simulate does", { timeout: 480_000 }, async (t) => {
    const d = await judged(t, "drill --isolates 8 --regions 2, fleet scope", () => drill("fleet", "--regions", "2", "--compare-simulate"));
    const episodes = (d.json?.isolates ?? []).map((i) => `isolate ${i.isolate}: ${i.transitions.map((x) => `${Math.round(x.at_ms)} ${x.to}`).join(", ")}`);
    assert.equal(d.status, 0, `${why(d)}\nbreakers: ${episodes.join(" | ")}\n${d.stdout}\n${d.stderr}`);
    for (const name of ["ANSWERED", "DISCLOSED", "DEGRADE_WITHIN", "RECOVER_WITHIN", "SIMULATE_AGREES"]) {
      assert.equal(verdict(d, name)?.ok, true, `${name}: ${JSON.stringify(verdict(d, name))}`);
    }
    assert.match(verdict(d, "SIMULATE_AGREES").detail, /^all 8 isolates: the same breaker episodes/);
    assert.equal(d.json.isolates.length, 8);
    t.diagnostic(`--regions 2: ${verdict(d, "DEGRADE_WITHIN").detail}; ${verdict(d, "RECOVER_WITHIN").detail}; ${verdict(d, "SIMULATE_AGREES").detail}`);
  });

  // The long form's (UNDERSTUDY_LONG=1): the same drill in isolate scope, red on the
  // breaker's clock. In the short form, what it shows is shown without it: `simulate`
  // agrees with workerd isolate by isolate (the fleet-scope drills above, and this one's run
  // in docs/fleet.md: no isolate comes back in either driver), `simulate`'s isolate scope is
  // slower than its fleet scope (cli/tests/simulate.rs), and a drill blames an edge that
  // breaks a promise (tests/drill.test.mjs, [T-WITNESS]).
  if (LONG) test("isolate scope, the same drill: no isolate recovers in time (recorded)", { timeout: 200_000 }, async (t) => {
    // Red whatever the host does: each isolate's 2% of 15 req/s sends its probes too slowly
    // for the breaker to close in time even had every probing passed, and the verdict says so.
    const d = await drill("isolate");
    assert.equal(d.status, 1, `${why(d)}\n${d.stdout}\n${d.stderr}`);
    assert.equal(verdict(d, "RECOVER_WITHIN")?.ok, false, JSON.stringify(verdict(d, "RECOVER_WITHIN")));
    assert.equal(verdict(d, "RECOVER_WITHIN")?.judgement, "failed");
    assert.ok(verdict(d, "RECOVER_WITHIN").blamed.some((o) => /breaker/.test(o.what)), JSON.stringify(verdict(d, "RECOVER_WITHIN").blamed));
    assert.equal(verdict(d, "ANSWERED")?.ok, true);
    assert.equal(verdict(d, "DISCLOSED")?.ok, true);
    t.diagnostic(`isolate scope: ${verdict(d, "DEGRADE_WITHIN").detail}; ${verdict(d, "RECOVER_WITHIN").detail}`);
  });
});

// The coordinator is a dependency like any other (ADR 011): 4 copies of the Worker in one
// workerd, the model hung, the fleet open; then the coordinator answers 500, throws, hangs,
// restarts empty. Answers must not notice — every one 200 and disclosed, no 5xx, p99 no
// worse than isolate scope's, 4 more isolates measured beside them at the same moments — and
// the isolates must be back in fleet scope once it returns. Judged on latency, so in scripts/e2e.sh's real-time lane; the
// coordinator's faults judged by state are in tests/coordinator.test.mjs.
describe("the coordinator's faults: the p99 [F-SCOPE]", () => {
  const rig = coordinatorRig();
  const { start, urls, load } = rig;

  test("answers do not notice the coordinator failing, and isolates return to fleet scope", { timeout: 180_000 }, async (t) => {
    await rig.origin.setFault({ kind: "hang" });
    const faulty = {};
    let isolateAnswers = [];
    // Fleet scope, with the coordinator failing in each way in turn; beside it, at the same
    // moments and under the same load, isolate scope: the p99s side by side meet the same host.
    const [fleet, iso] = await Promise.all([start("fleet"), start("isolate")]);
    try {
      const targets = urls(fleet);
      const isoTargets = urls(iso);
      const both = async (ms, what) => {
        const [f, i] = await Promise.all([load(targets, ms), load(isoTargets, ms)]);
        assertDisclosed(f, what);
        assertDisclosed(i, `isolate scope: ${what}`);
        return [f, i];
      };
      await both(3_000, "the fleet opening");
      for (const u of targets) {
        const b = await statusOf(u);
        assert.equal(b.fleet.verdict?.mode, "OPEN", JSON.stringify(b.fleet));
      }
      for (const mode of MODES) {
        await fleet.setCoordinatorFault(mode);
        const [answers, beside] = await both(2_000, `coordinator ${mode}`);
        faulty[mode] = answers;
        isolateAnswers = isolateAnswers.concat(beside);
        const b = await statusOf(targets[0]);
        if (mode.startsWith("reset")) {
          // A restarted coordinator rebuilds from the next reports: the fleet is open again.
          assert.equal(b.fleet.coordinator.health, "ok", JSON.stringify(b.fleet));
          assert.equal(b.fleet.verdict?.mode, "OPEN", JSON.stringify(b.fleet));
        } else {
          assert.equal(b.fleet.coordinator.health, "failing", `${mode}: ${JSON.stringify(b.fleet)}`);
          assert.equal(b.fleet.decided_by, "isolate", `${mode}: ${JSON.stringify(b.fleet)}`);
          assert.match(b.fleet.coordinator.last_error ?? "", mode === "hang" ? /500 ms/ : /HTTP 500|threw/);
        }
        await fleet.setCoordinatorFault("");
        assertDisclosed(await load(targets, 1_500), `after ${mode}`);
        for (const u of targets) {
          const after = await statusOf(u);
          assert.equal(after.fleet.coordinator.health, "ok", `back after ${mode}: ${JSON.stringify(after.fleet)}`);
          assert.equal(after.fleet.decided_by, "fleet", `back after ${mode}: ${JSON.stringify(after.fleet)}`);
        }
      }
    } finally {
      await Promise.all([fleet.dispose(), iso.dispose()]);
      await rig.origin.clearFault();
    }
    const all = Object.values(faulty).flat();
    const [pf, pi] = [p99(all), p99(isolateAnswers)];
    t.diagnostic(`p99 with the coordinator failing ${pf.toFixed(1)} ms (${MODES.map((m) => `${m} ${p99(faulty[m]).toFixed(1)}`).join(", ")}); isolate scope ${pi.toFixed(1)} ms`);
    // Both pay at most the deadline (45 ms) while an isolate's own evidence builds; the
    // coordinator adds nothing on the request's path. 15 ms of room for this shared host.
    assert.ok(pf <= pi + 15, `p99 ${pf.toFixed(1)} ms with the coordinator failing against ${pi.toFixed(1)} ms in isolate scope`);
  });
});
