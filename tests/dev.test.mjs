// [B-DEV] `understudy dev`: the local run the README's main command uses, and the KV
// seeding it and the tests rely on.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";

import { ROOT, UNDERSTUDY, EDGE_DIR, requireEdge, understudy, tempDir, preparePolicy, buildPolicy } from "./harness.mjs";
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
