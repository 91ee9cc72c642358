// [B-DEV] `understudy dev`: the local run the README's main command uses, and the KV
// seeding it and the tests rely on.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";

import { ROOT, UNDERSTUDY, EDGE_DIR, requireEdge, understudy, tempDir, preparePolicy, buildPolicy, timedFetch, mintToken, devSecret } from "./harness.mjs";
import { startEdge } from "../scripts/edge-server.mjs";

requireEdge();

/** Runs the compiler asynchronously (the demo needs the event loop free), bounded. */
function run(args, timeoutMs = 90_000) {
  return new Promise((resolve, reject) => {
    const child = spawn(UNDERSTUDY, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`understudy ${args.join(" ")} did not finish in ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("exit", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

let tmp;
before(async () => {
  tmp = await tempDir();
});
after(() => tmp?.cleanup());

describe("understudy dev", () => {
  test("--demo shows a live answer, then a disclosed fallback when the origin hangs, and exits 0", async () => {
    const policy = await preparePolicy("semantic-search", tmp.dir);
    const r = await run(["dev", policy, "--demo"]);
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /edge {4}http:\/\/127\.0\.0\.1:\d+/);
    assert.match(r.stdout, /origin {2}http:\/\/127\.0\.0\.1:\d+/);
    const [healthy, degraded] = r.stdout.split("=== 2.");
    assert.match(healthy, /-> HTTP 200/);
    assert.match(healthy, /^x-degraded: false$/m);
    assert.match(healthy, /^x-result-source: origin$/m);
    assert.match(degraded, /^x-degraded: true$/m);
    assert.match(degraded, /^x-result-source: fallback$/m);
    assert.match(degraded, /^x-degraded-reason: ML_TIMEOUT$/m);
    assert.match(degraded, /"is_personalized": false/);
  });

  test("an invalid policy exits 1 before anything starts; a missing seed file exits 2", async () => {
    const good = await preparePolicy("semantic-search", tmp.dir);
    const bad = join(tmp.dir, "bad.toml");
    await writeFile(bad, "version = 1\n");
    let r = await run(["dev", bad, "--demo"]);
    assert.equal(r.status, 1, r.stderr);
    assert.doesNotMatch(r.stdout, /edge listening|edge {4}http/);

    r = await run(["dev", good, "--demo", "--seed", join(tmp.dir, "nope.json")]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--seed .*nope\.json/);
  });
});

/**
 * Starts `understudy dev ARGS` interactively (in its own process group, on free ports) and
 * waits for its banner. Returns { edge, events (the URL deliveries go to), note (what the
 * banner says about it), stdout(), stop() }.
 */
async function startDev(args, timeoutMs = 120_000) {
  const child = spawn(UNDERSTUDY, ["dev", ...args, "--port", "0", "--origin-port", "0"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let stdout = "";
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const stop = () => {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {}
  };
  process.once("exit", () => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {}
  });
  const banner = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`understudy dev did not print its banner in ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.stdout.on("data", (d) => {
      stdout += d;
      const edge = /^ {2}edge {4}(http:\/\/127\.0\.0\.1:\d+)/m.exec(stdout);
      // The events help is the banner's last part.
      if (edge && /understudy events list/.test(stdout)) {
        clearTimeout(timer);
        const events = /^ {2}events {2}(\S+) +(.*)$/m.exec(stdout);
        resolve({ edge: edge[1], events: events?.[1], note: events?.[2] ?? "" });
      }
    });
    child.on("exit", (status) => {
      clearTimeout(timer);
      reject(new Error(`understudy dev exited ${status} before its banner:\n${stdout}\n${stderr}`));
    });
  });
  return { ...banner, stdout: () => stdout, stop };
}

/** An event of policies/api.toml's `order.placed` version 2. */
function orderPlaced(id) {
  return {
    eventId: id, type: "order.placed", schemaVersion: 2, aggregateId: `agg-${id}`, sequence: 1,
    occurredAt: "2026-11-30T12:00:00Z", correlationId: `c-${id}`,
    payload: { orderId: "o-1", total: 12.5, currency: "EUR" },
  };
}

const eventToken = () =>
  mintToken(devSecret("API_TOKEN_KEY"), { iss: "https://auth.mercado.example", aud: "orders-api", sub: "dev-test", tenant: "acme" });

describe("understudy dev: where events are delivered", () => {
  test("--events-url delivers to the developer's own consumer instead of the simulated one, and says so", { timeout: 180_000 }, async () => {
    // The developer's consumer: records each delivery and acknowledges it.
    const received = [];
    const consumer = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        received.push({ path: req.url, key: req.headers["idempotency-key"], body: JSON.parse(body) });
        res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
      });
    });
    await new Promise((r) => consumer.listen(0, "127.0.0.1", r));
    const mine = `http://127.0.0.1:${consumer.address().port}/my/events`;
    const policy = await preparePolicy("api", tmp.dir);
    const dev = await startDev([policy, "--events-url", mine]);
    try {
      assert.equal(dev.events, mine, dev.stdout());
      assert.match(dev.note, /--events-url/);
      assert.match(dev.note, /https:\/\/orders\.internal\.example\/v1\/events/, "the overridden policy URL is named");
      const id = `evt-dev-${process.pid}`;
      const r = await timedFetch(`${dev.edge}/v1/events`, {
        method: "POST",
        headers: { authorization: `Bearer ${eventToken()}`, "content-type": "application/json" },
        body: JSON.stringify(orderPlaced(id)),
      });
      assert.equal(r.status, 202, r.text);
      const end = Date.now() + 20_000;
      while (received.length === 0 && Date.now() < end) await new Promise((res) => setTimeout(res, 100));
      assert.equal(received.length, 1, "delivered once, to our consumer");
      assert.deepEqual([received[0].path, received[0].key, received[0].body.eventId], ["/my/events", id, id]);
    } finally {
      dev.stop();
      consumer.close();
    }
  });

  test("by default events go to the simulated consumer, and the banner says the policy's URL is overridden", { timeout: 180_000 }, async () => {
    const policy = await preparePolicy("api", tmp.dir);
    const dev = await startDev([policy]);
    try {
      assert.match(dev.events, /^http:\/\/127\.0\.0\.1:\d+\/__events\/deliver$/, dev.stdout());
      assert.match(dev.note, /simulated consumer/);
      assert.match(dev.note, /https:\/\/orders\.internal\.example\/v1\/events/);
      const id = `evt-dev-default-${process.pid}`;
      const r = await timedFetch(`${dev.edge}/v1/events`, {
        method: "POST",
        headers: { authorization: `Bearer ${eventToken()}`, "content-type": "application/json" },
        body: JSON.stringify(orderPlaced(id)),
      });
      assert.equal(r.status, 202, r.text);
      const ledgerUrl = dev.events.replace(/\/__events\/deliver$/, "/__origin/ledger");
      const end = Date.now() + 20_000;
      let ledger;
      do {
        ledger = (await timedFetch(ledgerUrl)).json;
        if (ledger.delivered?.[id]) break;
        await new Promise((res) => setTimeout(res, 100));
      } while (Date.now() < end);
      assert.equal(ledger.delivered[id], 1, JSON.stringify(ledger));
    } finally {
      dev.stop();
    }
  });

  test("--events-url must be an http(s) URL, or `policy`", async () => {
    const policy = await preparePolicy("api", tmp.dir);
    const r = await run(["dev", policy, "--demo", "--events-url", "ftp://x"]);
    assert.equal(r.status, 2, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /--events-url ftp:\/\/x/);
  });
});

describe("KV seeding", () => {
  test("seed entries land in local KV with their write time in the metadata", async () => {
    const policy = await preparePolicy("recommendations", tmp.dir);
    const { dir } = await buildPolicy(policy, join(tmp.dir, "seeded"));
    const before = Date.now();
    const edge = await startEdge({
      dist: dir,
      seed: {
        USER_RECS: [{ key: "user_rec:u1", value: { items: [{ sku: "SKU-1001" }] }, age_ms: 60_000 }],
        CATEGORY_TOP: [{ key: "category_top:audio", value: '{"items":[]}', written_at: 1_700_000_000_000 }],
      },
    });
    try {
      const user = await (await edge.kv("USER_RECS")).getWithMetadata("user_rec:u1", "json");
      assert.deepEqual(user.value, { items: [{ sku: "SKU-1001" }] });
      assert.ok(Math.abs(user.metadata.written_at - (before - 60_000)) < 5_000, JSON.stringify(user.metadata));
      const cat = await (await edge.kv("CATEGORY_TOP")).getWithMetadata("category_top:audio");
      assert.equal(cat.value, '{"items":[]}');
      assert.deepEqual(cat.metadata, { written_at: 1_700_000_000_000 });
    } finally {
      await edge.dispose();
    }
  });

  test("a malformed seed is refused with the binding and entry named", async () => {
    const policy = await preparePolicy("recommendations", tmp.dir);
    const { dir } = await buildPolicy(policy, join(tmp.dir, "bad-seed"));
    await assert.rejects(startEdge({ dist: dir, seed: { USER_RECS: [{ value: 1 }] } }), /USER_RECS\[0\]/);
    await assert.rejects(startEdge({ dist: dir, seed: { USER_RECS: { key: "x" } } }), /USER_RECS/);
  });
});

// Keep the compiler's usage errors honest without starting anything.
test("understudy dev with a missing policy exits 2 naming it", () => {
  const r = understudy(["dev", join(tmp.dir, "absent.toml"), "--demo"]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /absent\.toml/);
});
