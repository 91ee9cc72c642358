// The rig of the coordinator's tests (ADR 011): 4 copies of the Worker in one workerd, each
// its own isolate, sharing KV and the coordinator's Durable Object, behind one simulated
// model. Used by tests/coordinator.test.mjs (faults judged by state: every answer disclosed,
// each isolate's verdict and who decided it) and tests/fleet.test.mjs (the p99 with the
// coordinator failing, judged against isolate scope's in real time).

import { before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { buildPolicy, devSecret, mintToken, preparePolicy, startOrigin, tempDir, timedFetch } from "./harness.mjs";
import { startEdges } from "../scripts/edge-server.mjs";

export const ISS = "https://auth.mercado.example";
export const ADMIN = { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` };
/** The coordinator's fault modes (scripts/edge-server.mjs, `coordinatorFaults`). */
export const MODES = ["error", "throw", "hang", "reset:1"];

/** Polls `check` every 50 ms for at most `ms`; its last value. */
export async function eventually(check, ms = 5_000) {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v || Date.now() > until) return v;
    await sleep(50);
  }
}

export const p99 = (answers) => {
  const l = answers.map((a) => a.elapsedMs).sort((a, b) => a - b);
  return l[Math.min(l.length - 1, Math.ceil(0.99 * l.length) - 1)];
};
export const assertStatus = (answers) => {
  for (const a of answers) assert.equal(a.status, 200, `${a.status} ${a.text}`);
};
export const assertDisclosed = (answers, what) => {
  for (const a of answers) {
    assert.equal(a.status, 200, `${what}: ${a.status} ${a.text}`);
    assert.equal(a.headers["x-degraded"], "true", `${what}: ${JSON.stringify(a.headers)}`);
    assert.ok(a.headers["x-degraded-reason"] && a.headers["x-breaker-mode"], `${what}: ${JSON.stringify(a.headers)}`);
  }
};
export const statusOf = async (url) => (await timedFetch(`${url}/__understudy/status`, { headers: ADMIN })).json.breaker;

/**
 * Registers the suite's hooks (the fleet- and isolate-scoped builds of the sample policy,
 * retries unbounded, and the model) and returns the rig: `start(scope)` runs the K isolates,
 * `urls(edges)` their addresses, `load(...)` paced traffic; `origin`, `builds` and `tmp` once
 * the hooks ran.
 */
export function coordinatorRig({ K = 4, RATE = 40 } = {}) {
  const rig = { K, RATE, builds: {}, origin: null, tmp: null };
  before(async () => {
    rig.tmp = await tempDir("understudy-coordinator-faults-");
    for (const scope of ["fleet", "isolate"]) {
      const dir = join(rig.tmp.dir, scope);
      await mkdir(dir, { recursive: true });
      const policy = await preparePolicy("recommendations", dir, {
        edit: (t) => t.replace("max_retries = 2", "max_retries = 1000").replace('failed_probe_hold = "60s"', `failed_probe_hold = "60s"\nscope = "${scope}"`),
      });
      rig.builds[scope] = (await buildPolicy(policy, join(dir, "dist"))).dir;
    }
    rig.origin = await startOrigin();
  });
  after(async () => {
    await rig.origin?.stop();
    await rig.tmp?.cleanup();
  });

  rig.start = (scope, opts = {}) =>
    startEdges(
      Array.from({ length: K }, (_, i) => ({ dist: rig.builds[scope], name: `isolate-${i}`, originUrl: rig.origin.url })),
      { direct: true, shared: true, coordinatorFaults: scope === "fleet", ...opts },
    );
  rig.urls = (edges) => Array.from({ length: K }, (_, i) => edges.direct[`isolate-${i}`]);

  /**
   * `ms` of load at `rate` (default RATE), round-robin over `targets`, each request with its
   * own user; with `cfs`, request i carries `cfs[i % targets.length]` as its `cf` (workerd's
   * cf blob header).
   */
  let user = 0;
  rig.load = async (targets, ms, cfs, rate = RATE) => {
    const n = Math.round((rate * ms) / 1000);
    const t0 = performance.now();
    const pending = [];
    for (let i = 0; i < n; i++) {
      const due = t0 + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      user += 1;
      const token = mintToken(devSecret("TOKEN_HMAC_KEY"), { sub: `cf-${user}`, iss: ISS, aud: "recommendations" });
      const headers = { authorization: `Bearer ${token}` };
      if (cfs) headers["mf-cf-blob"] = JSON.stringify(cfs[i % targets.length]);
      pending.push(timedFetch(`${targets[i % targets.length]}/v1/recommendations?category=audio`, { headers }));
    }
    return Promise.all(pending);
  };
  return rig;
}
