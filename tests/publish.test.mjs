// [B-PUBLISH] Tier 2, published (issue 12, "Evidence"): a lists fixture with bad SKUs
// across several categories lists every offender and writes nothing; the published file
// round-trips through `wrangler kv bulk put --local` (wrangler from node_modules, offline,
// no metrics) into the local storage workerd reads, and the edge serves it.

import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

import {
  ROOT,
  POLICIES,
  requireEdge,
  understudy,
  tempDir,
  preparePolicy,
  buildPolicy,
  publishTier,
  startOrigin,
  timedFetch,
  mintToken,
  devSecret,
} from "./harness.mjs";
import { startEdge } from "../scripts/edge-server.mjs";

requireEdge();

const LISTS = join(POLICIES, "recommendations.top-sellers.csv");
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");
const ISS = "https://auth.mercado.example";

describe("understudy publish", () => {
  let tmp;
  let policy;
  before(async () => {
    tmp = await tempDir();
    policy = await preparePolicy("recommendations", tmp.dir);
  });
  after(() => tmp?.cleanup());

  test("bad SKUs across several categories: every offender listed with its key and reason, nothing written", async () => {
    const inv = JSON.parse(await readFile(join(tmp.dir, "recommendations.inventory.json"), "utf8"));
    const row = (sku) => inv.skus.find((s) => s.sku === sku);
    row("SKU-2001").stock = 12; // audio and all
    row("SKU-2002").status = "discontinued"; // kitchen
    inv.skus = inv.skus.filter((s) => s.sku !== "SKU-2005"); // computing
    const badInv = join(tmp.dir, "bad-inventory.json");
    await writeFile(badInv, JSON.stringify(inv, null, 2));
    const out = join(tmp.dir, "bad.json");
    const r = understudy(["publish", policy, "--tier", "category", "--lists", LISTS, "--inventory", badInv, "--out", out]);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /ERR_UNTESTED_COMPENSATION_REJECTED/);
    assert.match(r.stderr, /4 SKU\(s\) in 4 list\(s\)/);
    for (const line of [
      "line 2: audio: SKU-2001: stock 12 ≤ 50",
      "line 14: all: SKU-2001: stock 12 ≤ 50",
      'line 5: kitchen: SKU-2002: not active (status "discontinued")',
      "line 10: computing: SKU-2005: missing from the inventory snapshot",
    ]) {
      assert.ok(r.stderr.includes(line), `${line}\n${r.stderr}`);
    }
    assert.equal(existsSync(out), false, "nothing is written");

    // With --drop-invalid: published without them, each named.
    const d = understudy(["publish", policy, "--tier", "category", "--lists", LISTS, "--inventory", badInv, "--out", out, "--drop-invalid"]);
    assert.equal(d.status, 0, d.stderr);
    assert.equal(d.stderr.match(/^dropped \(--drop-invalid\): /gm).length, 4, d.stderr);
    const text = await readFile(out, "utf8");
    assert.doesNotMatch(text, /SKU-2001|SKU-2002|SKU-2005/);
  });

  test("usage and I/O problems exit 2 and write nothing", async () => {
    const out = join(tmp.dir, "nothing.json");
    let r = understudy(["publish", policy, "--tier", "category", "--lists", join(tmp.dir, "missing.csv"), "--out", out]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--lists .*missing\.csv/);
    r = understudy(["publish", policy, "--lists", LISTS, "--out", out]);
    assert.equal(r.status, 2, "--tier is required");
    r = understudy(["publish", policy, "--tier", "curated", "--lists", LISTS, "--out", out]);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /only KV tiers are published/);
    assert.equal(existsSync(out), false);
  });

  test("deterministic: the same inputs give the same bytes", async () => {
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
    const a = await publishTier(policy, { tier: "category", lists: LISTS, out: join(tmp.dir, "a.json"), now });
    const b = await publishTier(policy, { tier: "category", lists: LISTS, out: join(tmp.dir, "b.json"), now });
    assert.equal(await readFile(join(tmp.dir, "a.json"), "utf8"), await readFile(join(tmp.dir, "b.json"), "utf8"));
    assert.equal(a.summary.keys, 5);
    assert.deepEqual(a.entries.map((e) => e.key), ["category_top:all", "category_top:audio", "category_top:bags", "category_top:computing", "category_top:kitchen"]);
    assert.equal(b.binding, "CATEGORY_TOP");
  });
});

describe("the published file through wrangler kv bulk put --local, served by the edge", () => {
  let tmp;
  let edge;
  let origin;
  before(async () => {
    tmp = await tempDir();
  });
  after(async () => {
    await edge?.dispose().catch(() => {});
    await origin?.stop().catch(() => {});
    await tmp?.cleanup();
  });

  test("round trip", { timeout: 120_000 }, async () => {
    const policy = await preparePolicy("recommendations", tmp.dir);
    const build = await buildPolicy(policy, join(tmp.dir, "dist"));
    const out = join(tmp.dir, "category_top.json");
    const pub = await publishTier(policy, { tier: "category", lists: LISTS, out });
    const state = join(tmp.dir, "kv-state");
    const w = spawnSync(WRANGLER, ["kv", "bulk", "put", out, "--binding", pub.binding, "--local", "--persist-to", state], {
      cwd: build.dir,
      encoding: "utf8",
      timeout: 90_000,
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" },
    });
    assert.equal(w.status, 0, `wrangler kv bulk put: ${w.stdout}\n${w.stderr}`);

    origin = await startOrigin();
    edge = await startEdge({ dist: build.dir, originUrl: origin.url, kvPersist: state });
    const kv = await edge.kv("CATEGORY_TOP");
    const stored = await kv.getWithMetadata("category_top:kitchen");
    assert.deepEqual(stored.metadata, pub.entries.find((e) => e.key === "category_top:kitchen").metadata);

    // One user per request: the retry-storm limit counts a user's repeats.
    const get = (sub, category = "kitchen") => {
      const token = mintToken(devSecret("TOKEN_HMAC_KEY"), { sub, iss: ISS, aud: "recommendations" });
      return timedFetch(`${edge.url}/v1/recommendations?category=${category}`, { headers: { authorization: `Bearer ${token}` } });
    };
    // A cold isolate instantiates the module and decodes the bake once; warm it up.
    for (let i = 0; i < 3; i++) await get(`warm-up-${i}`);
    await origin.setFault({ kind: "status", code: 503 });
    const r = await get("round-trip");
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers["x-degraded"], "true");
    assert.equal(r.headers["x-fallback-tier"], "category", JSON.stringify(edge.logs(true).at(-1)));
    assert.deepEqual(r.json.items.map((i) => i.sku), ["SKU-2002", "SKU-1004", "SKU-2003"]);
    assert.equal(r.json.items[0].title, "cast iron skillet");

    // An entry that did not come through `publish` — written by hand, another tool, an old
    // write-through — is a miss on a published tier, disclosed in the log line, never served.
    await kv.put("category_top:audio", JSON.stringify({ items: [{ sku: "SKU-1001" }] }), {
      metadata: { written_at: Date.now() },
    });
    const u = await get("unvalidated", "audio");
    assert.equal(u.status, 200, u.text);
    assert.equal(u.headers["x-fallback-tier"], "curated");
    const line = edge.logs(true).find((l) => l.correlation_id === u.headers["x-correlation-id"]);
    assert.ok(line?.notes?.some((n) => n.tier === "category" && n.code === "KV_NOT_VALIDATED"), JSON.stringify(line));
  });
});
