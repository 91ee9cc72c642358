// Issue 24 in the real Worker: a fleet-scoped breaker (docs/adr/011-fleet-scoped-breaker.md)
// in workerd (Miniflare), its coordinator the Worker's own Durable Object class. The isolate
// reports after answering, off every request's path, and applies the fleet's verdict; the
// build declares the coordinator's binding and its migration.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import {
  ROOT, buildPolicy, devSecret, mintToken, preparePolicy, requireEdge, startOrigin, startStack, tempDir, timedFetch,
} from "./harness.mjs";
import { startEdges } from "../scripts/edge-server.mjs";
import { drill as drillAt, judged, why } from "./judged.mjs";

const LONG = process.env.UNDERSTUDY_LONG === "1";

requireEdge();

const ISS = "https://auth.mercado.example";
const ADMIN = { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` };

/** Polls `check` every 50 ms for at most `ms`; its last value. */
async function eventually(check, ms = 5_000) {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v || Date.now() > until) return v;
    await sleep(50);
  }
}

describe("fleet-scoped breaker in workerd [F-SCOPE]", () => {
  let stack;
  let n = 0;
  const get = () => {
    n += 1;
    const token = mintToken(devSecret("TOKEN_HMAC_KEY"), { sub: `fleet-${n}`, iss: ISS, aud: "recommendations" });
    return stack.fetch(`/v1/recommendations?category=audio`, { headers: { authorization: `Bearer ${token}` } });
  };
  const status = async () => (await stack.fetch("/__understudy/status", { headers: ADMIN })).json;

  before(async () => {
    stack = await startStack("recommendations", {
      build: { edit: (t) => t.replace('failed_probe_hold = "60s"', 'failed_probe_hold = "60s"\nscope = "fleet"') },
    });
  });
  after(() => stack?.dispose());

  test("the build declares the coordinator's Durable Object and its own migration", async () => {
    const wrangler = await readFile(join(stack.build.dir, "wrangler.toml"), "utf8");
    assert.match(wrangler, /\[\[durable_objects\.bindings\]\]\nname = "BREAKER_COORDINATOR"\nclass_name = "BreakerCoordinator"/);
    assert.match(wrangler, /\[\[migrations\]\]\ntag = "breaker-v1"\nnew_sqlite_classes = \["BreakerCoordinator"\]/);
    const dos = stack.build.manifest.bindings.durable_objects.map((d) => d.class_name);
    assert.deepEqual(dos, ["BreakerCoordinator"]);
  });

  test("healthy: one request, and its answer's background work sends the first report and a watch within 4 s", async () => {
    // A healthy isolate's first report waits for its phase of a heartbeat (ten report
    // intervals, 10 s) — unless it is thin: no second request within 2 s, and the first
    // answer's waitUntil wakes the engine at its phase of the next 2 s and sends it, with a
    // watch. The status request's own calls go after its answer, so what it shows came
    // before it; asked at 5 s, a second after the latest wake (room for a late timer on a
    // busy host and the report's round trip).
    assert.equal((await get()).status, 200);
    await sleep(5_000);
    const s = await status();
    assert.equal(s?.breaker?.fleet?.coordinator?.health, "ok", `the coordinator answered: ${JSON.stringify(s?.breaker)}`);
    assert.equal(s.breaker.scope, "fleet");
    assert.equal(s.breaker.mode, "PRIMARY_HEALTHY");
    assert.equal(s.breaker.fleet.verdict.mode, "CLOSED");
    assert.ok(s.breaker.fleet.verdict.isolates >= 1);
    assert.ok(s.breaker.fleet.coordinator.reports >= 1);
    assert.equal(s.breaker.fleet.coordinator.failures, 0);
    // Its answers also left a watch with the coordinator, held while the fleet is closed.
    assert.ok(s.breaker.fleet.coordinator.watching >= 1, JSON.stringify(s.breaker.fleet.coordinator));
    assert.equal(s.breaker.fleet.coordinator.pushed, 0, "nothing to push while the fleet is closed");
  });

  test("the model hung: the fleet's verdict opens the breaker; every answer disclosed", async () => {
    await stack.origin.setFault({ kind: "hang" });
    try {
      // 20 timeouts (seed 000's min_calls), then requests a second apart so reports go out.
      const answers = await Promise.all(Array.from({ length: 24 }, () => get()));
      for (const r of answers) {
        assert.equal(r.status, 200, r.text);
        assert.equal(r.headers["x-degraded"], "true");
      }
      const s = await eventually(async () => {
        await get();
        const st = await status();
        return st?.breaker?.fleet?.verdict?.mode === "OPEN" ? st : null;
      }, 8_000);
      assert.ok(s, `the fleet opened: ${JSON.stringify((await status())?.breaker)}`);
      assert.equal(s.breaker.mode, "DEGRADED_FALLBACK");
      // A fleet of one: the verdict stands on this isolate's reports alone (it names it
      // `sole`), so its own breaker decides, the verdict's evidence a report later.
      assert.equal(s.breaker.fleet.decided_by, "isolate");
      assert.ok(s.breaker.fleet.verdict.calls >= 20, JSON.stringify(s.breaker.fleet.verdict));
      const r = await get();
      assert.equal(r.headers["x-breaker-mode"], "DEGRADED_FALLBACK");
      assert.equal(r.headers["x-degraded-reason"], "BREAKER_OPEN");
    } finally {
      await stack.origin.clearFault();
    }
  });
});

// `understudy drill --isolates 8`: 8 copies of the built Worker in one workerd, each its own
// isolate, sharing KV and the coordinator's Durable Object; seed 000's incident at 120 req/s
// in all (15 a second each), the incident's clock shrunk 10×. Fleet scope must degrade within
// 3 s and recover within 45 s (scaled: 4.5 s) on every isolate; isolate scope, run the same
// way, cannot recover in time — each isolate's 2% of 15 req/s takes its 20 probes too long.
// Why 120 req/s and not fewer: seed 000's last probing in this incident starts ~30 s after the
// fault's end, so the fleet must send 20 probes (2% of its traffic) in the 15 s left: at least
// ~70 req/s in all (docs/fleet.md).
describe("drill --isolates 8 [F-SCOPE]", () => {
  const drill = (scope, ...extra) =>
    drillAt(join(ROOT, "policies", "recommendations.toml"), join(ROOT, "scenarios", "seed-000-fleet.toml"), [
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
// worse than isolate scope's under the same load — and the isolates must be back in fleet
// scope once it returns.
describe("the coordinator's faults [F-SCOPE]", () => {
  const K = 4;
  const RATE = 40; // in all: 10 a second per isolate
  let origin;
  const builds = {};
  let tmp;

  before(async () => {
    tmp = await tempDir("understudy-coordinator-faults-");
    for (const scope of ["fleet", "isolate"]) {
      const dir = join(tmp.dir, scope);
      await mkdir(dir, { recursive: true });
      const policy = await preparePolicy("recommendations", dir, {
        edit: (t) => t.replace("max_retries = 2", "max_retries = 1000").replace('failed_probe_hold = "60s"', `failed_probe_hold = "60s"\nscope = "${scope}"`),
      });
      builds[scope] = (await buildPolicy(policy, join(dir, "dist"))).dir;
    }
    origin = await startOrigin();
  });
  after(async () => {
    await origin?.stop();
    await tmp?.cleanup();
  });

  const start = (scope) =>
    startEdges(
      Array.from({ length: K }, (_, i) => ({ dist: builds[scope], name: `isolate-${i}`, originUrl: origin.url })),
      { direct: true, shared: true, coordinatorFaults: scope === "fleet" },
    );
  const urls = (edges) => Array.from({ length: K }, (_, i) => edges.direct[`isolate-${i}`]);

  /**
   * `ms` of load at `rate` (default RATE), round-robin over `targets`, each request with its
   * own user; with `cfs`, request i carries `cfs[i % targets.length]` as its `cf` (workerd's
   * cf blob header).
   */
  let user = 0;
  async function load(targets, ms, cfs, rate = RATE) {
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
  }
  const statusOf = async (url) => (await timedFetch(`${url}/__understudy/status`, { headers: ADMIN })).json.breaker;
  const p99 = (answers) => {
    const l = answers.map((a) => a.elapsedMs).sort((a, b) => a - b);
    return l[Math.min(l.length - 1, Math.ceil(0.99 * l.length) - 1)];
  };
  const assertStatus = (answers) => {
    for (const a of answers) assert.equal(a.status, 200, `${a.status} ${a.text}`);
  };
  const assertDisclosed = (answers, what) => {
    for (const a of answers) {
      assert.equal(a.status, 200, `${what}: ${a.status} ${a.text}`);
      assert.equal(a.headers["x-degraded"], "true", `${what}: ${JSON.stringify(a.headers)}`);
      assert.ok(a.headers["x-degraded-reason"] && a.headers["x-breaker-mode"], `${what}: ${JSON.stringify(a.headers)}`);
    }
  };
  const MODES = ["error", "throw", "hang", "reset:1"];

  // ADR 011, "The verdict pushed": isolates 1–3 answer a few healthy requests (each leaves a
  // watch with the coordinator), then only isolate 0 meets the hung model. When its reports
  // open the fleet, the held watches bring the opening to the others: with no request since,
  // they are open, decided by the fleet.
  test("the opening reaches isolates that had no request since, through their watches", { timeout: 60_000 }, async () => {
    const fleet = await start("fleet");
    try {
      const targets = urls(fleet);
      // A healthy isolate's first report (and its first watch) goes past its phase of a
      // heartbeat, ten report intervals: load for a heartbeat. Thin load (2 req/s each): the
      // healthy calls their reports carry must not outweigh isolate 0's ~20 timeouts before
      // its own breaker opens — at 13 req/s each, up to ~280 healthy calls held the fleet's
      // slow share under seed 000's 5% (by its Wilson bound), and the fleet opened or not as
      // the isolates' phases put their last heartbeat early or late in the load.
      assertStatus(await load(targets.slice(1), 10_500, undefined, 6));
      for (const u of targets.slice(1)) {
        const held = await eventually(async () => {
          const b = await statusOf(u);
          return b.fleet.coordinator.health === "ok" && b.fleet.coordinator.watching >= 1 ? b : null;
        });
        assert.ok(held, `a watch is held for ${u}: ${JSON.stringify((await statusOf(u)).fleet)}`);
      }
      await origin.setFault({ kind: "hang" });
      assertDisclosed(await load([targets[0]], 2_000), "isolate 0 meets the hung model");
      for (const u of targets.slice(1)) {
        const open = await eventually(async () => {
          const b = await statusOf(u);
          return b.mode === "DEGRADED_FALLBACK" && b.fleet.decided_by === "fleet" ? b : null;
        });
        assert.ok(open, `pushed to ${u}: ${JSON.stringify(await statusOf(u))}`);
        assert.ok(open.fleet.coordinator.pushed >= 1, JSON.stringify(open.fleet));
        assert.equal(open.fleet.verdict.mode, "OPEN");
      }
    } finally {
      await fleet.dispose();
      await origin.clearFault();
    }
  });

  test("answers do not notice the coordinator failing, and isolates return to fleet scope", { timeout: 180_000 }, async (t) => {
    await origin.setFault({ kind: "hang" });
    const faulty = {};
    // Fleet scope, with the coordinator failing in each way in turn.
    const fleet = await start("fleet");
    try {
      const targets = urls(fleet);
      assertDisclosed(await load(targets, 3_000), "the fleet opening");
      for (const u of targets) {
        const b = await statusOf(u);
        assert.equal(b.fleet.verdict?.mode, "OPEN", JSON.stringify(b.fleet));
      }
      for (const mode of MODES) {
        await fleet.setCoordinatorFault(mode);
        const answers = await load(targets, 2_000);
        assertDisclosed(answers, `coordinator ${mode}`);
        faulty[mode] = answers;
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
      await fleet.dispose();
    }
    // Isolate scope under the same load, for the p99 side by side.
    const iso = await start("isolate");
    let isolateAnswers = [];
    try {
      const targets = urls(iso);
      assertDisclosed(await load(targets, 3_000), "isolate scope opening");
      for (const _ of MODES) isolateAnswers = isolateAnswers.concat(await load(targets, 2_000));
      assertDisclosed(isolateAnswers, "isolate scope");
    } finally {
      await iso.dispose();
      await origin.clearFault();
    }
    const all = Object.values(faulty).flat();
    const [pf, pi] = [p99(all), p99(isolateAnswers)];
    t.diagnostic(`p99 with the coordinator failing ${pf.toFixed(1)} ms (${MODES.map((m) => `${m} ${p99(faulty[m]).toFixed(1)}`).join(", ")}); isolate scope ${pi.toFixed(1)} ms`);
    // Both pay at most the deadline (45 ms) while an isolate's own evidence builds; the
    // coordinator adds nothing on the request's path. 15 ms of room for this shared host.
    assert.ok(pf <= pi + 15, `p99 ${pf.toFixed(1)} ms with the coordinator failing against ${pi.toFixed(1)} ms in isolate scope`);
  });

  // ADR 011, "Failing over": a coordinator writes its decisions to its storage (at most once a
  // second, when one changed) and a restarted one resumes from them. workerd itself restarts
  // here — the whole process, on the same storage directory — with the model healthy again:
  // fresh isolates, whose reports carry only the model's good answers, still hear the fleet
  // open (its hold-down runs from the opening), serve from the cascade and do not hammer a
  // model the fleet found down. A coordinator that restarted empty would close at once.
  test("workerd restarted: the coordinator resumes from its snapshot, and fresh isolates hear the fleet still open", { timeout: 90_000 }, async () => {
    const persist = join(tmp.dir, "persist");
    const restartable = () =>
      startEdges(
        Array.from({ length: K }, (_, i) => ({ dist: builds.fleet, name: `isolate-${i}`, originUrl: origin.url })),
        { direct: true, shared: true, persist },
      );
    await origin.setFault({ kind: "hang" });
    let fleet = await restartable();
    try {
      const targets = urls(fleet);
      assertDisclosed(await load(targets, 3_000), "the fleet opening");
      const b = await statusOf(targets[0]);
      assert.equal(b.fleet.verdict?.mode, "OPEN", JSON.stringify(b.fleet));
      // Reports a second on: the opening is in storage.
      assertDisclosed(await load(targets, 1_500), "the fleet open");
    } finally {
      await fleet.dispose();
      await origin.clearFault();
    }
    fleet = await restartable();
    try {
      const targets = urls(fleet).slice(0, 2);
      // One healthy request each; a thin new isolate reports within 2–4 s of it.
      const first = await load(targets, 500, undefined, 4);
      assertStatus(first);
      for (const a of first) assert.equal(a.headers["x-degraded"], "false", "the model answers: live");
      // A status request is an answer too (it would make the isolate busy): ask after the wake.
      await sleep(4_300);
      for (const u of targets) {
        const heard = await eventually(async () => {
          const s = await statusOf(u);
          return s.fleet.coordinator.health === "ok" && s.fleet.coordinator.reports >= 1 && s.fleet.verdict ? s : null;
        }, 8_000);
        assert.ok(heard, `${u} reported: ${JSON.stringify((await statusOf(u)).fleet)}`);
        assert.equal(heard.fleet.verdict.mode, "OPEN", `resumed open: ${JSON.stringify(heard.fleet)}`);
        assert.equal(heard.mode, "DEGRADED_FALLBACK", JSON.stringify(heard));
        assert.equal(heard.fleet.decided_by, "fleet", JSON.stringify(heard.fleet));
      }
      const after = await load(targets, 500, undefined, 4);
      for (const a of after) {
        assert.equal(a.status, 200, a.text);
        assert.equal(a.headers["x-degraded-reason"], "BREAKER_OPEN", JSON.stringify(a.headers));
      }
    } finally {
      await fleet.dispose();
    }
  });

  // Regional coordinators: isolates 0 and 2 in enam, 1 and 3 in weur (their requests' `cf`),
  // one coordinator each and the global one merging their windows. A region's coordinator
  // down: the global one stands in for it; both down, its isolates run in isolate scope
  // (their own breakers adopted the opening), the other region's stay with their fleet. The global one down or hung: every region decides
  // on its own evidence, and every isolate stays with its region's verdict. Answers never
  // notice: every one 200 and disclosed.
  test("a region's coordinator down, then the global one: answers do not notice, each isolate's decided_by is right", { timeout: 180_000 }, async () => {
    const CFS = [
      { continent: "NA", country: "US", longitude: "-77.04" },
      { continent: "EU", country: "FR", longitude: "2.35" },
      { continent: "NA", country: "US", longitude: "-77.04" },
      { continent: "EU", country: "FR", longitude: "2.35" },
    ];
    const REGION = ["enam", "weur", "enam", "weur"];
    await origin.setFault({ kind: "hang" });
    const fleet = await start("fleet");
    try {
      const targets = urls(fleet);
      assertDisclosed(await load(targets, 3_000, CFS), "the fleet opening");
      for (const [i, u] of targets.entries()) {
        const b = await statusOf(u);
        assert.equal(b.fleet.region, REGION[i], JSON.stringify(b.fleet));
        assert.equal(b.fleet.verdict?.mode, "OPEN", JSON.stringify(b.fleet));
        assert.equal(b.fleet.decided_by, "fleet", JSON.stringify(b.fleet));
      }
      const expect = async (what, want) => {
        for (const [i, u] of targets.entries()) {
          const b = await statusOf(u);
          const [health, decidedBy] = want(REGION[i]);
          assert.equal(b.fleet.coordinator.health, health, `${what}, isolate ${i} (${REGION[i]}): ${JSON.stringify(b.fleet)}`);
          assert.equal(b.fleet.decided_by, decidedBy, `${what}, isolate ${i} (${REGION[i]}): ${JSON.stringify(b.fleet)}`);
          assert.equal(b.mode, "DEGRADED_FALLBACK", `${what}, isolate ${i}: ${JSON.stringify(b)}`);
        }
      };
      const back = async (what) => {
        await fleet.setCoordinatorFault("");
        assertDisclosed(await load(targets, 1_500, CFS), `after ${what}`);
        await expect(`back after ${what}`, () => ["ok", "fleet"]);
      };
      // weur's coordinator answers 500: after two failures in a row weur's isolates report to
      // the global coordinator, which stands in for it (ADR 011, "Failing over"); every
      // isolate stays with the fleet.
      // An open isolate does not hurry: its reports go a report interval apart, two to weur's
      // coordinator, then the global one's.
      await fleet.setCoordinatorFault("error@weur");
      assertDisclosed(await load(targets, 4_000, CFS), "weur's coordinator down");
      await expect("weur's coordinator down", () => ["ok", "fleet"]);
      for (const [i, u] of targets.entries()) {
        const b = await statusOf(u);
        assert.equal(b.fleet.coordinator.failover, REGION[i] === "weur", `isolate ${i} (${REGION[i]}): ${JSON.stringify(b.fleet)}`);
      }
      // The global one down too: weur's isolates on their own, enam's with their region.
      await fleet.setCoordinatorFault("error@weur,error@global");
      assertDisclosed(await load(targets, 2_000, CFS), "weur's coordinator and the global one down");
      await expect("weur's and the global coordinator down", (r) => (r === "weur" ? ["failing", "isolate"] : ["ok", "fleet"]));
      await back("weur's coordinator down");
      // The global coordinator answers 500, then hangs: each region on its own evidence.
      for (const mode of ["error@global", "hang@global"]) {
        await fleet.setCoordinatorFault(mode);
        assertDisclosed(await load(targets, 2_000, CFS), `the global coordinator ${mode}`);
        await expect(`the global coordinator ${mode}`, () => ["ok", "fleet"]);
        await back(`the global coordinator ${mode}`);
      }
    } finally {
      await fleet.dispose();
      await origin.clearFault();
    }
  });
});
