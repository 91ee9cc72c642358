// Issue 24 in the real Worker: a fleet-scoped breaker (docs/adr/011-fleet-scoped-breaker.md)
// in workerd (Miniflare), its coordinator the Worker's own Durable Object class. The isolate
// reports after answering, off every request's path, and applies the fleet's verdict; the
// build declares the coordinator's binding and its migration.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { requireEdge, startStack, devSecret, mintToken } from "./harness.mjs";

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

  test("healthy: the isolate reports after answering and holds the coordinator's CLOSED verdict", async () => {
    for (let i = 0; i < 5; i++) assert.equal((await get()).status, 200);
    const s = await eventually(async () => {
      const st = await status();
      return st?.breaker?.fleet?.coordinator?.health === "ok" ? st : null;
    });
    assert.ok(s, `the coordinator answered: ${JSON.stringify((await status())?.breaker)}`);
    assert.equal(s.breaker.scope, "fleet");
    assert.equal(s.breaker.mode, "PRIMARY_HEALTHY");
    assert.equal(s.breaker.fleet.verdict.mode, "CLOSED");
    assert.ok(s.breaker.fleet.verdict.isolates >= 1);
    assert.ok(s.breaker.fleet.coordinator.reports >= 1);
    assert.equal(s.breaker.fleet.coordinator.failures, 0);
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
      assert.equal(s.breaker.fleet.decided_by, "fleet");
      assert.ok(s.breaker.fleet.verdict.calls >= 20, JSON.stringify(s.breaker.fleet.verdict));
      const r = await get();
      assert.equal(r.headers["x-breaker-mode"], "DEGRADED_FALLBACK");
      assert.equal(r.headers["x-degraded-reason"], "BREAKER_OPEN");
    } finally {
      await stack.origin.clearFault();
    }
  });
});
