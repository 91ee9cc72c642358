// Issue 12: the catalog owners' nightly recipe, as README "For catalog owners" gives it —
// three commands from the inventory snapshot to a promoted release with fresh Tier 2 and
// Tier 3 — run end to end, and the result served in workerd.
//
// Deploying is the one remote step: deploy.sh runs `$WRANGLER kv bulk put … --remote` and
// `$WRANGLER deploy`. Here WRANGLER is a stand-in that sends the KV loads to local storage
// (`--local --persist-to`, the real wrangler from node_modules, offline) and makes the deploy a
// dry run; the edge then starts from the release directory on that local storage.

import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmod, copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

import {
  ROOT,
  POLICIES,
  EDGE_DIR,
  requireEdge,
  understudy,
  tempDir,
  preparePolicy,
  startOrigin,
  timedFetch,
  mintToken,
  devSecret,
} from "./harness.mjs";
import { startEdge } from "../scripts/edge-server.mjs";

requireEdge();

const ISS = "https://auth.mercado.example";
const HOUR = 3_600_000;

describe("the nightly recipe", () => {
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

  test("inventory snapshot to a promoted release with fresh Tier 2 and Tier 3, served", { timeout: 180_000 }, async () => {
    const reg = join(tmp.dir, "reg");
    // Yesterday: the release in service (its snapshot 25 h old by now).
    const old = await preparePolicy("recommendations", tmp.dir, { snapshotAgeMs: 25 * HOUR });
    const yesterday = new Date(Date.now() - 24 * HOUR).toISOString().replace(/\.\d{3}Z$/, "Z");
    const add = understudy(["releases", "add", old, "--registry", reg, "--edge", EDGE_DIR, "--now", yesterday, "--promote"]);
    assert.equal(add.status, 0, add.stderr);
    const before = (await readFile(join(reg, "ACTIVE"), "utf8")).trim();

    // Tonight's exports: the catalog, a fresh snapshot, the top sellers.
    const exports = join(tmp.dir, "exports");
    await mkdir(exports, { recursive: true });
    await preparePolicy("recommendations", exports, { snapshotAgeMs: HOUR });
    await copyFile(join(exports, "recommendations.catalog.json"), join(exports, "catalog.json"));
    await copyFile(join(exports, "recommendations.inventory.json"), join(exports, "inventory.json"));
    await copyFile(join(POLICIES, "recommendations.top-sellers.csv"), join(exports, "top-sellers.csv"));

    // The stand-in for the remote wrangler (see the top of this file).
    const state = join(tmp.dir, "kv-state");
    const shim = join(tmp.dir, "wrangler-local.sh");
    await writeFile(
      shim,
      `#!/bin/sh
real="${join(ROOT, "node_modules", ".bin", "wrangler")}"
case "$1" in
  kv) args=""; for a in "$@"; do [ "$a" = "--remote" ] || args="$args $a"; done
      exec "$real" $args --local --persist-to "${state}" ;;
  deploy) exec "$real" "$@" --dry-run --outdir "${join(tmp.dir, "deploy-out")}" ;;
  *) exec "$real" "$@" ;;
esac
`,
    );
    await chmod(shim, 0o755);

    // The recipe: three commands.
    const env = { WRANGLER: shim, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" };
    const bake = understudy(
      ["bake", "--registry", reg, "--wait", "10m", "--catalog", join(exports, "catalog.json"), "--inventory", join(exports, "inventory.json"),
        "--publish", `category=${join(exports, "top-sellers.csv")}`, "--promote"],
      { env },
    );
    assert.equal(bake.status, 0, `${bake.stdout}\n${bake.stderr}`);
    const verify = understudy(["releases", "verify", "--registry", reg]);
    assert.equal(verify.status, 0, verify.stdout);
    const active = (await readFile(join(reg, "ACTIVE"), "utf8")).trim();
    assert.notEqual(active, before);
    const dir = join(reg, "releases", active);
    const deploy = spawnSync(join(dir, "deploy.sh"), [], { encoding: "utf8", timeout: 120_000, env: { ...process.env, ...env } });
    assert.equal(deploy.status, 0, `deploy.sh: ${deploy.stdout}\n${deploy.stderr}`);
    assert.match(deploy.stdout, /--dry-run: exiting now/);

    // What the release says about its expiry: both tiers fresh for about 23 more hours.
    const list = JSON.parse(understudy(["releases", "list", "--registry", reg, "--format", "json"]).stdout);
    const rel = list.releases.find((r) => r.id === active);
    assert.equal(rel.published[0].tier, "category");
    for (const t of [rel.stubs_expire_at_ms, rel.published[0].expires_at_ms]) {
      const left = (t - Date.now()) / HOUR;
      assert.ok(left > 22 && left < 24, `${left} h left`);
    }

    // Served in workerd from the release directory and the KV storage deploy.sh loaded.
    origin = await startOrigin();
    edge = await startEdge({ dist: dir, originUrl: origin.url, kvPersist: state });
    const get = (sub, category) => {
      const token = mintToken(devSecret("TOKEN_HMAC_KEY"), { sub, iss: ISS, aud: "recommendations" });
      return timedFetch(`${edge.url}/v1/recommendations?category=${category}`, { headers: { authorization: `Bearer ${token}` } });
    };
    for (let i = 0; i < 3; i++) await get(`warm-up-${i}`, "audio");
    await origin.setFault({ kind: "status", code: 503 });
    const t2 = await get("tier-2", "computing");
    assert.equal(t2.headers["x-policy-version"], active);
    assert.equal(t2.headers["x-fallback-tier"], "category", t2.text);
    assert.deepEqual(t2.json.items.map((i) => i.sku), ["SKU-2005", "SKU-1010", "SKU-2006"]);
    const t3 = await get("tier-3", "toys"); // no list for toys: the freshly baked stubs answer
    assert.equal(t3.headers["x-fallback-tier"], "curated", t3.text);
    assert.ok(t3.json.items.length > 0);
  });
});
