// [R-VERSION] [R-GRADUAL] [R-OFFLINE] The rollout's Cloudflare driver with the installed
// wrangler running every command line it builds: `releases upload` (and its `--dry-run`,
// offline), then `releases rollout` advancing a good release and rolling a bad one back
// with `wrangler versions deploy`. With no network here, wrangler and the driver's SQL talk
// to a loopback stand-in of the Cloudflare API (scripts/cloudflare-api.mjs) through
// CLOUDFLARE_API_BASE_URL, the variable wrangler itself reads; the figures the stand-in's
// SQL endpoint answers are set by each test.

import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile, readdir, writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";

import { spawn } from "node:child_process";
import { ROOT, EDGE_DIR, UNDERSTUDY, requireEdge, tempDir, preparePolicy } from "./harness.mjs";
import { startCloudflareApi } from "../scripts/cloudflare-api.mjs";

requireEdge();
const WORKER = "recommendation-service";
const SHORT = ["--steps", "10,50,100", "--dwell", "1s", "--min-answers", "100", "--degraded-margin", "0.05", "--unavailable-margin", "0.05"];

describe("the rollout's Cloudflare driver, with the real wrangler", () => {
  let tmp, reg, api, env;
  const ids = {};
  // Asynchronous: the stand-in API answers from this process while the command runs.
  const run = (args, timeoutMs = 180_000) =>
    new Promise((resolve, reject) => {
      const child = spawn(UNDERSTUDY, args, { cwd: ROOT, env });
      let stdout = "", stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      child.on("error", reject);
      child.on("close", (status) => {
        clearTimeout(timer);
        resolve({ status, stdout, stderr });
      });
    });
  const ok = async (args) => {
    const r = await run(args);
    assert.equal(r.status, 0, `understudy ${args.join(" ")} exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
    return r;
  };

  before(async () => {
    tmp = await tempDir("understudy-cloudflare-");
    reg = join(tmp.dir, "reg");
    api = await startCloudflareApi();
    env = {
      ...process.env,
      WRANGLER: join(ROOT, "node_modules", ".bin", "wrangler"),
      CLOUDFLARE_API_BASE_URL: api.url,
      CLOUDFLARE_API_TOKEN: api.token,
      CLOUDFLARE_ACCOUNT_ID: "0123456789abcdef0123456789abcdef",
      WRANGLER_SEND_METRICS: "false",
      CI: "1",
      NO_COLOR: "1",
    };
    const variants = {
      old: (t) => t,
      good: (t) => t.replace(/^version = ".*"$/m, 'version = "2026-12-03.good"'),
      bad: (t) => t.replace(/^version = ".*"$/m, 'version = "2026-12-03.bad"').replace(/^deadline = "45ms"$/m, 'deadline = "8ms"').replace(/^attempt_timeout = "45ms"$/m, 'attempt_timeout = "8ms"'),
    };
    // One snapshot time for all three: the same catalog and inventory bytes, so a policy
    // re-paired with the current catalog is the earlier release itself (the rollback test).
    const now = Date.now();
    for (const [name, edit] of Object.entries(variants)) {
      const dir = join(tmp.dir, name);
      await mkdir(dir);
      const policy = await preparePolicy("recommendations", dir, { edit, now });
      const before = new Set(await readdir(join(reg, "releases")).catch(() => []));
      await ok(["releases", "add", policy, "--registry", reg, "--edge", EDGE_DIR, ...(name === "old" ? ["--promote"] : [])]);
      ids[name] = (await readdir(join(reg, "releases"))).find((id) => !before.has(id));
    }
  });
  after(async () => {
    await api?.close();
    await tmp?.cleanup();
  });

  test("a release uploads once as a version tagged with its ID; a lost result is found by the tag", async () => {
    const dry = await ok(["releases", "upload", ids.old, "--registry", reg, "--dry-run"]);
    assert.match(dry.stdout, /nothing was uploaded/);
    assert.equal(api.state.versions.get(WORKER)?.length ?? 0, 0, "a dry run uploads nothing");
    // The release declares the breaker's coordinator (a Durable Object class and its
    // migration), which the Worker has not got yet: Cloudflare refuses such a version
    // (error 10211), and the refusal says the way through.
    const refused = await run(["releases", "upload", ids.old, "--registry", reg]);
    assert.notEqual(refused.status, 0, refused.stdout);
    assert.match(refused.stderr, /API error 10211/);
    assert.match(refused.stderr, new RegExp(`${ids.old}/deploy\\.sh`));
    assert.equal(api.state.versions.get(WORKER)?.length ?? 0, 0, "no version carries a migration");
    // The way through: the release deployed at 100% by its deploy.sh (`wrangler deploy`).
    const deployed = await new Promise((resolve, reject) => {
      const child = spawn(join(reg, "releases", ids.old, "deploy.sh"), [], { env });
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      child.stderr.on("data", (d) => (out += d));
      child.on("error", reject);
      child.on("close", (status) => resolve({ status, out }));
    });
    assert.equal(deployed.status, 0, deployed.out);
    assert.deepEqual(api.deployed(WORKER), [{ [ids.old]: 100 }]);
    // Its upload, recorded as intended, finds the deployed version by its tag.
    await ok(["releases", "upload", ids.old, "--registry", reg]);
    const rec = JSON.parse(await readFile(join(reg, "versions", `${ids.old}.json`), "utf8"));
    const uploaded = api.state.versions.get(WORKER);
    assert.equal(uploaded.length, 1);
    assert.equal(rec.version_id, uploaded[0].id);
    assert.equal(uploaded[0].annotations["workers/tag"], ids.old);
    await ok(["releases", "upload", ids.old, "--registry", reg]);
    assert.equal(api.state.versions.get(WORKER).length, 1, "uploaded once");
    // The upload of `good` (a version: the migration is applied) went through but its result
    // was lost (only the intent recorded).
    await ok(["releases", "upload", ids.good, "--registry", reg]);
    assert.match(api.state.versions.get(WORKER)[1].annotations["workers/message"], /^understudy release r-[0-9a-f]{12}: policy 2026-12-03\.good, catalog [0-9a-f]{12}$/);
    const good = join(reg, "versions", `${ids.good}.json`);
    const done = JSON.parse(await readFile(good, "utf8"));
    await writeFile(good, JSON.stringify({ ...done, version_id: null, uploaded_at_ms: null }));
    await ok(["releases", "upload", ids.good, "--registry", reg]);
    assert.equal(JSON.parse(await readFile(good, "utf8")).version_id, done.version_id, "found by its tag");
    assert.equal(api.state.versions.get(WORKER).length, 2, "not uploaded a second time");
    const list = JSON.parse((await ok(["releases", "list", "--registry", reg, "--format", "json"])).stdout);
    assert.equal(list.releases.find((r) => r.id === ids.good).version_id, done.version_id, "releases list shows the version");
  });

  test("a good release advances step by step through `wrangler versions deploy`", async () => {
    api.state.figures[ids.old] = { rps: 400, degraded: 0, unavailable: 0, latencyMs: 30 };
    api.state.figures[ids.good] = { rps: 400, degraded: 0, unavailable: 0, latencyMs: 31 };
    const r = await ok(["releases", "rollout", ids.good, "--registry", reg, ...SHORT]);
    assert.match(r.stdout, /advanced to 100%/);
    assert.deepEqual(api.deployed(WORKER).slice(1), [
      { [ids.old]: 90, [ids.good]: 10 },
      { [ids.old]: 50, [ids.good]: 50 },
      { [ids.good]: 100 },
    ]);
    assert.equal((await readFile(join(reg, "ACTIVE"), "utf8")).trim(), ids.good);
    const list = JSON.parse((await ok(["releases", "list", "--registry", reg, "--format", "json"])).stdout);
    assert.equal(list.releases.find((x) => x.id === ids.good).rollout, "advanced to 100%");
    // Every query carried the token and named both releases.
    assert.ok(api.state.sql.length >= 4);
    for (const q of api.state.sql) assert.match(q, new RegExp(`blob1 IN \\('${ids.old}', '${ids.good}'\\)`));
    assert.deepEqual(api.state.unknown, []);
  });

  test("a bad release is rolled back with the old version at 100%, and exits 1", async () => {
    await ok(["releases", "upload", ids.bad, "--registry", reg]);
    api.state.figures[ids.bad] = { rps: 400, degraded: 1, unavailable: 0, latencyMs: 9 };
    const before = api.deployed(WORKER).length;
    const r = await run(["releases", "rollout", ids.bad, "--registry", reg, ...SHORT]);
    assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /rolled back/);
    assert.deepEqual(api.deployed(WORKER).slice(before), [
      { [ids.good]: 90, [ids.bad]: 10 },
      { [ids.good]: 100 },
    ]);
    assert.equal((await readFile(join(reg, "ACTIVE"), "utf8")).trim(), ids.good);
    // A rehearsal runs every deploy line (and the rollback's) through wrangler's --dry-run,
    // sends the queries once, and deploys and records nothing.
    const n = api.deployed(WORKER).length;
    const recordPath = join(reg, "rollouts", `${ids.bad}.json`);
    const recordBefore = await readFile(recordPath, "utf8");
    const d = await run(["releases", "rollout", ids.bad, "--registry", reg, "--dry-run", ...SHORT]);
    assert.equal(d.status, 0, `${d.stdout}\n${d.stderr}`);
    assert.equal((d.stdout.match(/^ok: wrangler versions deploy /gm) ?? []).length, 4, d.stdout);
    assert.match(d.stdout, /nothing was deployed or recorded/);
    assert.equal(api.deployed(WORKER).length, n, "nothing deployed in a dry run");
    assert.equal(await readFile(recordPath, "utf8"), recordBefore, "nothing recorded");
  });

  test("`releases rollback --deploy` puts the earlier policy's version back at 100% at once", async () => {
    // ACTIVE is the good release; roll back to the old policy. The catalog is the same, so the
    // re-paired release is the old release itself, whose version exists: no upload.
    const uploads = api.state.versions.get(WORKER).length;
    const r = await ok(["releases", "rollback", "--registry", reg, "--to", ids.old, "--deploy"]);
    assert.match(r.stdout, /deployed: Workers version [0-9a-f-]{36} \(r-[0-9a-f]{12}\) at 100%/);
    assert.deepEqual(api.deployed(WORKER).at(-1), { [ids.old]: 100 });
    assert.equal(api.state.versions.get(WORKER).length, uploads, "nothing re-uploaded");
    assert.deepEqual(api.state.unknown, []);
  });
});
