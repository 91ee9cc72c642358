// [B-RELEASE] [E-VERSION] Releases end to end, with the real prebuilt edge: a release
// directory deploys as it is (`wrangler deploy --dry-run --outdir`, through its deploy.sh
// carrying the release ID as the version tag), a nightly re-bake publishes a new release
// without compiling Rust, and the edge serves each release's ID as `X-Policy-Version` —
// including after a rollback, which keeps the current catalog.

import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFile, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

import { ROOT, EDGE_DIR, requireEdge, understudy, tempDir, preparePolicy, timedFetch } from "./harness.mjs";
import { startEdge } from "../scripts/edge-server.mjs";

requireEdge();
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");

function ok(args) {
  const r = understudy(args, { timeoutMs: 120_000 });
  assert.equal(r.status, 0, `understudy ${args.join(" ")} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  return r;
}

const isoNow = (offsetMs = 0) => new Date(Date.now() + offsetMs).toISOString().replace(/\.\d{3}Z$/, "Z");

describe("understudy releases", () => {
  let tmp;
  let policy;
  let reg;
  const active = async () => (await readFile(join(reg, "ACTIVE"), "utf8")).trim();

  before(async () => {
    tmp = await tempDir("understudy-releases-");
    policy = await preparePolicy("recommendations", tmp.dir);
    reg = join(tmp.dir, "reg");
    ok(["releases", "add", policy, "--registry", reg, "--edge", EDGE_DIR, "--promote"]);
  });
  after(() => tmp?.cleanup());

  test("a release directory deploys as it is, tagged with its release ID", async () => {
    const id = await active();
    const dir = join(reg, "releases", id);
    const out = join(tmp.dir, "dry-run-out");
    const r = spawnSync(join(dir, "deploy.sh"), ["--dry-run", "--outdir", out], {
      encoding: "utf8",
      timeout: 120_000,
      env: { ...process.env, WRANGLER, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" },
    });
    assert.equal(r.status, 0, `deploy.sh --dry-run failed:\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /--dry-run: exiting now/);
    const script = await readFile(join(dir, "deploy.sh"), "utf8");
    assert.match(script, new RegExp(`deploy --tag ${id} --message "understudy release ${id}`));
    const uploaded = await readdir(out);
    assert.ok(uploaded.some((f) => f.endsWith(".wasm")), `a .wasm is uploaded (got ${uploaded.join(", ")})`);

    // Plain `wrangler deploy` in the directory works too, and leaves the release intact.
    const plain = spawnSync(WRANGLER, ["deploy", "--dry-run", "--outdir", join(tmp.dir, "plain-out"), "--tag", id], {
      cwd: dir,
      encoding: "utf8",
      timeout: 120_000,
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" },
    });
    assert.equal(plain.status, 0, `wrangler deploy --dry-run failed:\n${plain.stdout}\n${plain.stderr}`);
    ok(["releases", "verify", "--registry", reg]);
  });

  test("a nightly re-bake publishes a new release the edge serves as X-Policy-Version", async () => {
    const before = await active();
    const catalog = JSON.parse(await readFile(join(tmp.dir, "recommendations.catalog.json"), "utf8"));
    const inventory = JSON.parse(await readFile(join(tmp.dir, "recommendations.inventory.json"), "utf8"));
    catalog.items = catalog.items.slice(1);
    inventory.taken_at = isoNow(-60_000);
    await writeFile(join(tmp.dir, "tonight.catalog.json"), JSON.stringify(catalog));
    await writeFile(join(tmp.dir, "tonight.inventory.json"), JSON.stringify(inventory));
    const r = ok([
      "bake", "--registry", reg, "--catalog", join(tmp.dir, "tonight.catalog.json"),
      "--inventory", join(tmp.dir, "tonight.inventory.json"), "--promote",
    ]);
    const id = await active();
    assert.notEqual(id, before, r.stdout);
    const edge = await startEdge({ dist: join(reg, "releases", id) });
    try {
      const res = await timedFetch(`${edge.url}/v1/recommendations?category=audio`);
      assert.equal(res.headers["x-policy-version"], id, JSON.stringify(res.headers));
    } finally {
      await edge.dispose();
    }
  });

  test("a rollback keeps the current catalog and serves its own release ID", async () => {
    const text = await readFile(policy, "utf8");
    const v2 = join(tmp.dir, "recommendations-v2.toml");
    await writeFile(v2, text.replace(/^version = ".*"$/m, 'version = "v2"').replace(/^deadline = "45ms"$/m, 'deadline = "40ms"').replace(/^attempt_timeout = "45ms"$/m, 'attempt_timeout = "40ms"'));
    ok(["releases", "add", v2, "--registry", reg, "--edge", EDGE_DIR, "--promote"]);
    const current = await active();
    const diff = ok(["releases", "diff", current, current, "--registry", reg]);
    assert.match(diff.stdout, /policy: unchanged/);
    const r = ok(["releases", "rollback", "--registry", reg]);
    const rolled = await active();
    assert.notEqual(rolled, current);
    assert.match(r.stdout, /with the current catalog/);
    const d = ok(["releases", "diff", current, rolled, "--registry", reg]);
    assert.match(d.stdout, /budget\.deadline: 40ms → 45ms/);
    assert.match(d.stdout, /catalog: unchanged/);
    const edge = await startEdge({ dist: join(reg, "releases", rolled) });
    try {
      const res = await timedFetch(`${edge.url}/v1/recommendations`);
      assert.equal(res.headers["x-policy-version"], rolled);
    } finally {
      await edge.dispose();
    }
    ok(["releases", "verify", "--registry", reg]);
  });
});
