// [R-GRADUAL] [R-STATE] What a rollout does besides judging on the SLO (ADR 012): the local
// front splits traffic as gradual deployments do — by percentage, by version key, by override
// — and a low-traffic window holds instead of judging on too few answers, a rollout held too
// long at one step rolling back — and a red rollout drill blames the edge: a bad release
// drilled as if it should advance fails with the answers that broke it named, none excused.
// Judged by counts at 20–40 req/s, so in scripts/e2e.sh's other lane; the drills judged on
// the SLO are tests/rollout.test.mjs.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";

import { requireEdge, timedFetch } from "./harness.mjs";
import { startRollout } from "../scripts/rollout-front.mjs";
import { SHORT, failed, rolloutRig } from "./rollout-kit.mjs";
import { judged } from "./judged.mjs";

requireEdge();

describe("understudy drill --rollout: the front's split and the low-traffic hold", () => {
  const rig = rolloutRig();
  const { ids, drill } = rig;

  test("the front splits as gradual deployments do: by percentage, by version key, by override", async () => {
    const front = await startRollout({ oldDir: join(rig.reg, "releases", ids.old), newDir: join(rig.reg, "releases", ids.good) });
    try {
      const deploy = (p) => timedFetch(`${front.url}/__rollout/deploy`, { method: "POST", body: JSON.stringify({ new_percent: p }) });
      // Which version answered: every answer names its release, a refused request too.
      const ask = async (headers = {}) => (await timedFetch(`${front.url}/v1/recommendations`, { headers })).headers["x-policy-version"];
      const keys = Array.from({ length: 60 }, (_, i) => `user-${i}`);
      const byKey = async () => Object.fromEntries(await Promise.all(keys.map(async (k) => [k, await ask({ "Cloudflare-Workers-Version-Key": k })])));
      assert.equal((await deploy(10)).status, 200);
      const at10 = await byKey();
      for (const k of keys.slice(0, 10)) assert.equal(await ask({ "Cloudflare-Workers-Version-Key": k }), at10[k], `key ${k} stays on its version`);
      assert.equal((await deploy(50)).status, 200);
      const at50 = await byKey();
      const moved = keys.filter((k) => at10[k] === ids.good && at50[k] !== ids.good);
      assert.deepEqual(moved, [], "keys already on the new version stay there as it grows");
      const onNew = keys.filter((k) => at50[k] === ids.good).length;
      assert.ok(onNew > 10 && onNew < 50, `${onNew} of 60 keys on the new version at 50%`);
      // An override names a version of the deployment, even one at 0%; another is ignored.
      assert.equal((await deploy(0)).status, 200);
      const override = (id) => ({ "Cloudflare-Workers-Version-Overrides": `${front.worker}="${id}"` });
      assert.equal(await ask(override(ids.good)), ids.good);
      assert.equal(await ask(override("r-000000000000")), ids.old);
      assert.equal(await ask(), ids.old, "at 0% without an override: the old version");
      assert.equal((await deploy(101)).status, 400, "a split over 100% is refused");
    } finally {
      await front.dispose();
    }
  });

  test("[T-WITNESS] a release that broke its promise is red, its answers blamed on the edge, never excused as the host's", async (t) => {
    // The bad release (its deadline 8 ms, the model's latency 20 ms) drilled with --expect
    // advance: every answer it degraded is a deadline no healthy model can meet, which no
    // stall of the host explains. Red at once (exit 1), never played again.
    const { r, out } = await drill(ids.old, ids.bad, [
      "--rate", "40", "--expect", "advance", "--steps", "50,100", "--dwell", "1s", "--min-answers", "30",
      "--degraded-margin", "0.05", "--unavailable-margin", "0.05",
    ]);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(out.phase, "rolled_back");
    const verdict = out.checks.find((c) => c.name === "ROLLOUT_VERDICT");
    assert.equal(verdict.judgement, "failed", JSON.stringify(verdict));
    assert.ok(verdict.blamed_count >= 30, `the bad release's degraded answers are blamed: ${JSON.stringify(verdict)}`);
    assert.match(verdict.blamed[0].what, /^request \d+ \(HTTP 200, [\d.]+ ms, degraded, (ML_TIMEOUT|BREAKER_OPEN)\)$/, verdict.blamed[0].what);
    assert.equal(verdict.excused_count, 0);
    t.diagnostic(verdict.detail);
    assert.match(r.stderr, /blamed on the edge: request \d+/);
    // The old version, on the same healthy model, answered live: the baseline held (or, on a
    // host that stalled it, is inconclusive — never blamed).
    const baseline = out.checks.find((c) => c.name === "ROLLOUT_BASELINE");
    assert.notEqual(baseline.judgement, "failed", JSON.stringify(baseline));
  });

  test("a low-traffic window holds rather than judge on too few answers, and holding too long rolls back", async (t) => {
    const { r, out } = await judged(t, "rollout: a low-traffic window holds", () =>
      drill(ids.old, ids.good, ["--rate", "20", "--expect", "rollback", "--max-holds", "2", ...SHORT]),
    );
    assert.equal(r.status, 0, `${failed(out).join("\n")}\n${r.stderr}`);
    const log = out.record.state.log;
    assert.deepEqual(log.map((l) => l.judgement.verdict), ["hold", "hold", "roll_back"]);
    for (const l of log) assert.match(l.judgement.reasons[0], /^too few answers/);
    assert.match(log[2].judgement.reasons.at(-1), /^held 2 times at 10%/);
    assert.ok(out.checks.some((c) => c.name === "ROLLOUT_EVIDENCE" && c.held));
  });
});
