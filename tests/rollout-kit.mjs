// The rig of the rollout drills' tests: a registry of three releases of the sample policy —
// `old` (promoted), `good` (with its own short [rollout] table) and `bad` (a deadline below the
// model's latency) — and `understudy drill --rollout` run against it. Used by
// tests/rollout.test.mjs (judged on the SLO in real time) and tests/rollout-holds.test.mjs
// (the front's split and the low-traffic hold, judged by counts).

import { before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile, mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";

import { ROOT, EDGE_DIR, understudy, tempDir, preparePolicy } from "./harness.mjs";
import { understudyAsync } from "./judged.mjs";

/** The short form's steps, dwell, least answers and margins. */
export const SHORT = [
  "--steps", "10,50,100", "--dwell", "2s", "--min-answers", "120",
  "--degraded-margin", "0.05", "--unavailable-margin", "0.05",
];

function ok(args) {
  const r = understudy(args, { timeoutMs: 120_000 });
  assert.equal(r.status, 0, `understudy ${args.join(" ")} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** The checks of a drill's JSON that did not hold, each with its detail. */
export const failed = (out) => out.checks.filter((c) => !c.held).map((c) => `${c.name}: ${c.detail}`);

/**
 * Registers the suite's hooks (the registry and its three releases) and returns the rig:
 * `reg`, `ids` and `tmp` once the hooks ran, `active()` the registry's ACTIVE release, and
 * `drill(old, neu, extra)` the drill's exit and JSON (a promise: drills may run side by side).
 */
export function rolloutRig() {
  const rig = { ids: {}, reg: null, tmp: null };
  const ids = rig.ids;
  rig.active = async () => (await readFile(join(rig.reg, "ACTIVE"), "utf8")).trim();

  before(async () => {
    rig.tmp = await tempDir("understudy-rollout-");
    const reg = (rig.reg = join(rig.tmp.dir, "reg"));
    const variants = {
      old: (t) => t,
      // The good release carries its own [rollout] table (the short form's numbers): a drill
      // given no flags sees the table's steps.
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
      const dir = join(rig.tmp.dir, name);
      await mkdir(dir);
      const policy = await preparePolicy("recommendations", dir, { edit });
      const before = new Set(await readdir(join(reg, "releases")).catch(() => []));
      ok(["releases", "add", policy, "--registry", reg, "--edge", EDGE_DIR, ...(name === "old" ? ["--promote"] : [])]);
      ids[name] = (await readdir(join(reg, "releases"))).find((id) => !before.has(id));
      assert.ok(ids[name], `the ${name} release was added`);
    }
  });
  after(() => rig.tmp?.cleanup());

  // `status` and `json` as `judged()` (tests/judged.mjs) reads a drill: an inconclusive
  // rollout drill (exit 3) is played again within the suite's replay budget.
  rig.drill = async (old, neu, extra) => {
    const r = await understudyAsync(
      ["drill", "--rollout", old, neu, "--registry", rig.reg, "--scenario", join(ROOT, "scenarios/rollout.toml"), "--format", "json", ...extra],
      { timeoutMs: 180_000 },
    );
    let out;
    try {
      out = JSON.parse(r.stdout);
    } catch {
      assert.fail(`drill --rollout printed no JSON (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
    }
    return { r, out, status: r.status, stderr: r.stderr, json: out };
  };
  return rig;
}
