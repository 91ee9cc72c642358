// The fleet-scoped breaker (docs/adr/011-fleet-scoped-breaker.md) in workerd (Miniflare), its
// coordinator the Worker's own Durable Object class, judged by state, not by latency: the
// build declares the coordinator; a healthy isolate reports and watches; the fleet's verdict
// opens the breaker; an opening reaches isolates with no request since, through their
// watches; a restarted workerd resumes from the coordinator's snapshot; regional
// coordinators and the global one fail and every isolate's `decided_by` follows. The
// coordinator's p99 and the drills of 8 isolates, judged in real time, are in
// tests/fleet.test.mjs. It runs in scripts/e2e.sh's other lane.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { devSecret, mintToken, requireEdge, startStack } from "./harness.mjs";
import { startEdges } from "../scripts/edge-server.mjs";
import { ADMIN, ISS, assertDisclosed, assertStatus, coordinatorRig, eventually, statusOf } from "./coordinator-kit.mjs";

requireEdge();

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


// The coordinator is a dependency like any other (ADR 011): 4 copies of the Worker in one
// workerd, the model hung, the fleet open; then the coordinator fails. Answers must not
// notice — every one 200 and disclosed — and each isolate's verdict must come from where it
// should.
describe("the coordinator's faults [F-SCOPE]", () => {
  const rig = coordinatorRig();
  const { K, start, urls, load } = rig;

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
      await rig.origin.setFault({ kind: "hang" });
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
      await rig.origin.clearFault();
    }
  });

  // ADR 011, "Failing over": a coordinator writes its decisions to its storage (at most once a
  // second, when one changed) and a restarted one resumes from them. workerd itself restarts
  // here — the whole process, on the same storage directory — with the model healthy again:
  // fresh isolates, whose reports carry only the model's good answers, still hear the fleet
  // open (its hold-down runs from the opening), serve from the cascade and do not hammer a
  // model the fleet found down. A coordinator that restarted empty would close at once.
  test("workerd restarted: the coordinator resumes from its snapshot, and fresh isolates hear the fleet still open", { timeout: 90_000 }, async () => {
    const persist = join(rig.tmp.dir, "persist");
    const restartable = () =>
      startEdges(
        Array.from({ length: K }, (_, i) => ({ dist: rig.builds.fleet, name: `isolate-${i}`, originUrl: rig.origin.url })),
        { direct: true, shared: true, persist },
      );
    await rig.origin.setFault({ kind: "hang" });
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
      await rig.origin.clearFault();
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
    await rig.origin.setFault({ kind: "hang" });
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
      await rig.origin.clearFault();
    }
  });
});
