// [R-GRADUAL] [R-STATE] A release's rollout against two real Workers (ADR 012): both releases
// run as versions of one Worker in workerd behind the local front, the simulated model behind
// them, steady traffic through the front, and `understudy releases rollout` — the real
// command, as a child of `understudy drill --rollout` — deciding the steps. The short form of
// the proofs (10% → 50% → 100%, a 2 s dwell, 120 answers per version, 5-point margins):
//   - a good release advances through every step to 100%, with its controller SIGKILLed
//     after its first advance and resumed from the registry: no step lost or repeated;
//   - a bad release (its deadline below the model's latency) is rolled back at its first
//     step, its exposure within the bound, and ACTIVE never leaves the old release;
//   - a low-traffic window holds instead of judging on too few answers, and a rollout held
//     too long at one step rolls back.

import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile, mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";

import { ROOT, EDGE_DIR, requireEdge, understudy, tempDir, preparePolicy, timedFetch } from "./harness.mjs";
import { startRollout } from "../scripts/rollout-front.mjs";

requireEdge();

const SHORT = [
  "--steps", "10,50,100", "--dwell", "2s", "--min-answers", "120",
  "--degraded-margin", "0.05", "--unavailable-margin", "0.05",
];

function ok(args) {
  const r = understudy(args, { timeoutMs: 120_000 });
  assert.equal(r.status, 0, `understudy ${args.join(" ")} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return r;
}

describe("understudy drill --rollout", () => {
  let tmp;
  let reg;
  const ids = {};
  const active = async () => (await readFile(join(reg, "ACTIVE"), "utf8")).trim();

  before(async () => {
    tmp = await tempDir("understudy-rollout-");
    reg = join(tmp.dir, "reg");
    const variants = {
      old: (t) => t,
      // The good release carries its own [rollout] table (the short form's numbers): the
      // first test passes no flags, so the steps it sees are the table's.
      good: (t) =>
        t.replace(/^version = ".*"$/m, 'version = "2026-12-03.good"') +
        '\n[rollout]\nsteps = [10, 50, 100]\ndwell = "2s"\nmin_answers = 120\ndegraded_margin = 0.05\nunavailable_margin = 0.05\n',
      // The model answers in 20 ms; this release gives it 8.
      bad: (t) =>
        t
          .replace(/^version = ".*"$/m, 'version = "2026-12-03.bad"')
          .replace(/^deadline = "45ms"$/m, 'deadline = "8ms"')
          .replace(/^attempt_timeout = "45ms"$/m, 'attempt_timeout = "8ms"'),
    };
    for (const [name, edit] of Object.entries(variants)) {
      const dir = join(tmp.dir, name);
      await mkdir(dir);
      const policy = await preparePolicy("recommendations", dir, { edit });
      const before = new Set(await readdir(join(reg, "releases")).catch(() => []));
      ok(["releases", "add", policy, "--registry", reg, "--edge", EDGE_DIR, ...(name === "old" ? ["--promote"] : [])]);
      ids[name] = (await readdir(join(reg, "releases"))).find((id) => !before.has(id));
      assert.ok(ids[name], `the ${name} release was added`);
    }
  });
  after(() => tmp?.cleanup());

  function drill(old, neu, extra) {
    const r = understudy(
      ["drill", "--rollout", old, neu, "--registry", reg, "--scenario", join(ROOT, "scenarios/rollout.toml"), "--format", "json", ...extra],
      { timeoutMs: 180_000 },
    );
    let out;
    try {
      out = JSON.parse(r.stdout);
    } catch {
      assert.fail(`drill --rollout printed no JSON (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
    }
    return { r, out };
  }

  const failed = (out) => out.checks.filter((c) => !c.held).map((c) => `${c.name}: ${c.detail}`);

  test("a good release advances to 100% by its policy's [rollout] steps, its controller killed mid-rollout and resumed with no step lost or repeated", async () => {
    const report = join(tmp.dir, "report-good");
    const { r, out } = drill("active", ids.good, ["--rate", "200", "--expect", "advance", "--kill-controller", "--report", report]);
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
    const records = await readdir(join(reg, "rollouts")).catch(() => []);
    assert.deepEqual(records.filter((f) => f.endsWith(".json")), [], "no rollout record left in it");
    // [T-WITNESS] The host's witness ran beside the traffic, watching the versions' workerd.
    assert.ok(out.witness.summary.wakes > 1_000, JSON.stringify(out.witness.summary));
    assert.equal(out.witness.trace.watched[0]?.label, "workerd", JSON.stringify(out.witness.trace.watched));
    assert.equal(typeof out.traffic_started_at_ms, "number");
    // … and its stalls are drawn in the picture.
    const svg = await readFile(join(report, "rollout.svg"), "utf8");
    assert.match(svg, /host stalls seen by the witness \(\d+\)/);
  });

  test("a bad release is rolled back at its first step, its exposure within the bound", async () => {
    const before = await active();
    const { r, out } = drill(ids.old, ids.bad, ["--rate", "200", "--expect", "rollback", ...SHORT]);
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

  test("the front splits as gradual deployments do: by percentage, by version key, by override", async () => {
    const front = await startRollout({ oldDir: join(reg, "releases", ids.old), newDir: join(reg, "releases", ids.good) });
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

  test("a low-traffic window holds rather than judge on too few answers, and holding too long rolls back", async () => {
    const { r, out } = drill(ids.old, ids.good, ["--rate", "20", "--expect", "rollback", "--max-holds", "2", ...SHORT]);
    assert.equal(r.status, 0, `${failed(out).join("\n")}\n${r.stderr}`);
    const log = out.record.state.log;
    assert.deepEqual(log.map((l) => l.judgement.verdict), ["hold", "hold", "roll_back"]);
    for (const l of log) assert.match(l.judgement.reasons[0], /^too few answers/);
    assert.match(log[2].judgement.reasons.at(-1), /^held 2 times at 10%/);
    assert.ok(out.checks.some((c) => c.name === "ROLLOUT_EVIDENCE" && c.held));
  });
});
