// [B-BAKE] [B-DIST] `understudy build`: deterministic output, a directory wrangler accepts
// as it is, a bake the JS entry publishes in workerd, and the edge's 503 when the bake is
// missing or corrupt. Regression guards for the issue "Edge runtime" (#3), "Bake and build".

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readdir, readFile, writeFile, mkdir, cp } from "node:fs/promises";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { Miniflare } from "miniflare";

import {
  ROOT,
  EDGE_DIR,
  requireEdge,
  understudy,
  tempDir,
  preparePolicy,
  buildPolicy,
  withCustomSection,
  customSection,
  startStack,
  timedFetch,
} from "./harness.mjs";
import { startEdge } from "../scripts/edge-server.mjs";

const SECTION = "understudy.bake";
const MAGIC = Buffer.from("USTUDY\x00\x03", "latin1");
const sha256 = (b) => createHash("sha256").update(b).digest("hex");
requireEdge();

let tmp;
let policy;
const NOW = new Date(Date.now() - 60_000).toISOString().replace(/\.\d{3}Z$/, "Z");

before(async () => {
  tmp = await tempDir();
  policy = await preparePolicy("recommendations", tmp.dir);
});
after(() => tmp?.cleanup());

async function filesOf(dir) {
  const out = {};
  for (const name of (await readdir(dir)).sort()) out[name] = await readFile(join(dir, name));
  return out;
}

describe("understudy build", () => {
  test("the same inputs give byte-identical directories", async () => {
    const a = await buildPolicy(policy, join(tmp.dir, "a"), { now: NOW });
    const b = await buildPolicy(policy, join(tmp.dir, "b"), { now: NOW });
    const fa = await filesOf(a.dir);
    const fb = await filesOf(b.dir);
    assert.deepEqual(Object.keys(fa), [
      "bake.mjs",
      "entry.mjs",
      "index.js",
      "index_bg.wasm",
      "manifest.json",
      "wrangler.toml",
    ]);
    for (const name of Object.keys(fa)) assert.ok(fa[name].equals(fb[name]), `${name} differs between two builds`);
    // Building again into the same directory replaces it with the same bytes.
    await buildPolicy(policy, a.dir, { now: NOW });
    const again = await filesOf(a.dir);
    for (const name of Object.keys(fa)) assert.ok(fa[name].equals(again[name]), `${name} changed on rebuild`);
  });

  test("SOURCE_DATE_EPOCH stands in for --now", async () => {
    const epoch = Math.floor(Date.parse(NOW) / 1000);
    for (const out of ["sde-1", "sde-2"]) {
      const r = understudy(["build", policy, "--out", join(tmp.dir, out), "--edge", EDGE_DIR], {
        env: { SOURCE_DATE_EPOCH: String(epoch) },
      });
      assert.equal(r.status, 0, r.stderr);
    }
    const a = await filesOf(join(tmp.dir, "sde-1"));
    const b = await filesOf(join(tmp.dir, "sde-2"));
    for (const name of Object.keys(a)) assert.ok(a[name].equals(b[name]), `${name} differs`);
    assert.equal(JSON.parse(a["manifest.json"]).validated_at, NOW);
  });

  test("manifest.json records hashes, sizes, validation time and release", async () => {
    const { dir, manifest: m } = await buildPolicy(policy, join(tmp.dir, "m"), { now: NOW });
    const files = await filesOf(dir);
    assert.equal(m.validated_at, NOW);
    assert.match(m.release_id, /^r-[0-9a-f]{12}$/);
    assert.equal(m.policy.sha256, sha256(await readFile(policy)));
    assert.match(m.catalog.sha256, /^[0-9a-f]{64}$/);
    assert.equal(m.module.sha256, sha256(files["index_bg.wasm"]));
    assert.equal(m.module.bytes, files["index_bg.wasm"].length);
    assert.equal(m.module.gzip_bytes, undefined, "gzip is measured only for a --gzip-limit");
    assert.match(m.compiler_version, /^\d+\.\d+\.\d+/);
    for (const [name, hash] of Object.entries(m.files)) assert.equal(hash, sha256(files[name]), name);
    assert.deepEqual(m.bindings.kv, ["CATEGORY_TOP", "USER_RECS"]);
    // The bake is in the module, behind its magic, and the module still compiles.
    const section = customSection(files["index_bg.wasm"], SECTION);
    assert.ok(section, "the module has the bake section");
    assert.ok(Buffer.from(section).subarray(0, 8).equals(MAGIC));
    assert.equal(section.byteLength, m.module.bake_bytes);
  });

  test("re-baking changes only the bake: the code sections are the prebuilt edge's", async () => {
    const { dir } = await buildPolicy(policy, join(tmp.dir, "r"), { now: NOW });
    const built = await readFile(join(dir, "index_bg.wasm"));
    const prebuilt = await readFile(join(EDGE_DIR, "index_bg.wasm"));
    assert.ok(withCustomSection(built, SECTION).equals(withCustomSection(prebuilt, SECTION)));
  });

  test("wrangler deploy --dry-run accepts the directory as it is", async () => {
    const { dir } = await buildPolicy(policy, join(tmp.dir, "w"), { now: NOW });
    const out = join(tmp.dir, "w-out");
    const r = spawnSync(join(ROOT, "node_modules", ".bin", "wrangler"), ["deploy", "--dry-run", "--outdir", out], {
      cwd: dir,
      encoding: "utf8",
      timeout: 120_000,
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" },
    });
    assert.equal(r.status, 0, `wrangler deploy --dry-run failed:\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /--dry-run: exiting now/);
    for (const b of ["USER_RECS", "CATEGORY_TOP", "STORM_LIMITER"]) {
      assert.match(r.stdout, new RegExp(b), `wrangler lists the ${b} binding`);
    }
    const uploaded = await readdir(out);
    const wasm = uploaded.find((f) => f.endsWith(".wasm"));
    assert.ok(wasm, `a .wasm is uploaded (got ${uploaded.join(", ")})`);
    const section = customSection(await readFile(join(out, wasm)), SECTION);
    assert.ok(section && Buffer.from(section).subarray(0, 8).equals(MAGIC), "the uploaded module keeps the bake");
  });

  test("an invalid policy exits 1 with diagnostics and writes nothing", async () => {
    const bad = join(tmp.dir, "bad.toml");
    const text = await readFile(policy, "utf8");
    await writeFile(bad, text.replace(/^total = "60ms"$/m, 'total = "10ms"'));
    const out = join(tmp.dir, "bad-out");
    const r = understudy(["build", bad, "--out", out, "--edge", EDGE_DIR]);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /error/);
    assert.deepEqual(await readdir(tmp.dir).then((l) => l.includes("bad-out")), false);
  });

  test("bad input exits 2 naming what and where", async () => {
    let r = understudy(["build", join(tmp.dir, "missing.toml"), "--edge", EDGE_DIR]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /missing\.toml/);

    r = understudy(["build", policy, "--out", join(tmp.dir, "x"), "--edge", join(tmp.dir, "no-edge")]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /no-edge/);

    const precious = join(tmp.dir, "precious");
    await mkdir(precious, { recursive: true });
    await writeFile(join(precious, "notes.txt"), "keep");
    r = understudy(["build", policy, "--out", precious, "--edge", EDGE_DIR]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /precious.*not an `understudy build` output/);
    assert.equal(await readFile(join(precious, "notes.txt"), "utf8"), "keep");

    r = understudy(["build", policy, "--now", "yesterday", "--edge", EDGE_DIR]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--now/);
  });
});

/** Runs `probe.mjs` (the built bake.mjs plus a fetch handler reporting the global) in workerd. */
async function probeBake(dist) {
  await writeFile(
    join(dist, "probe.mjs"),
    `import "./bake.mjs";
export default { fetch() {
  const b = globalThis.__UNDERSTUDY_BAKE;
  return Response.json({ type: Object.prototype.toString.call(b), length: b.length, head: Array.from(b.subarray(0, 8)) });
} };
`,
  );
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(dist, "probe.mjs"),
    modulesRoot: dist,
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"] }],
    compatibilityDate: "2026-04-01",
    cf: false,
  });
  try {
    const r = await mf.dispatchFetch("http://localhost/", { signal: AbortSignal.timeout(10_000) });
    return await r.json();
  } finally {
    await mf.dispose();
  }
}

describe("the JS entry in workerd", () => {
  test("publishes the bake section as globalThis.__UNDERSTUDY_BAKE before the first request", async () => {
    const { dir, manifest } = await buildPolicy(policy, join(tmp.dir, "probe"), { now: NOW });
    const seen = await probeBake(dir);
    assert.deepEqual(seen, { type: "[object Uint8Array]", length: manifest.module.bake_bytes, head: [...MAGIC] });
  });

  test("publishes an empty array when the section is missing", async () => {
    const { dir } = await buildPolicy(policy, join(tmp.dir, "probe-missing"), { now: NOW });
    const wasm = join(dir, "index_bg.wasm");
    await writeFile(wasm, withCustomSection(await readFile(wasm), SECTION));
    assert.deepEqual(await probeBake(dir), { type: "[object Uint8Array]", length: 0, head: [] });
  });
});

/** A copy of a built directory whose module's bake is replaced by `payload` (or removed). */
async function withBake(dist, to, payload) {
  await cp(dist, to, { recursive: true });
  const wasm = join(to, "index_bg.wasm");
  await writeFile(wasm, withCustomSection(await readFile(wasm), SECTION, payload));
  return to;
}

describe("a missing or corrupt bake", () => {
  const cases = [
    ["missing", null],
    ["wrong magic", Buffer.from("NOTABAKE and some bytes")],
    ["truncated", "truncate"],
  ];
  for (const [name, payload] of cases) {
    test(`${name}: the edge answers 503 with the error envelope, not a crash`, async () => {
      const { dir } = await buildPolicy(policy, join(tmp.dir, `bake-${name.replace(/ /g, "-")}`), { now: NOW });
      let bytes = payload;
      if (payload === "truncate") {
        bytes = customSection(await readFile(join(dir, "index_bg.wasm")), SECTION).subarray(0, 40);
      }
      const broken = await withBake(dir, `${dir}-broken`, bytes);
      const edge = await startEdge({ dist: broken });
      try {
        for (let i = 0; i < 2; i++) {
          // Twice: the isolate keeps answering after the first failure.
          const r = await timedFetch(`${edge.url}/v1/recommendations?category=audio`);
          assert.equal(r.status, 503, r.text);
          assert.match(r.headers["content-type"] ?? "", /application\/json/);
          assert.equal(typeof r.json?.code, "string", r.text);
          assert.equal(typeof r.json?.message, "string");
          assert.equal(typeof r.json?.correlationId, "string");
          assert.equal(typeof r.json?.retryable, "boolean");
          assert.ok(r.headers["x-correlation-id"], "the correlation id is echoed");
          // Every response carries our headers; without a bake there is no breaker to ask.
          assert.equal(r.headers["x-breaker-mode"], "UNKNOWN");
          assert.equal(r.headers["x-policy-version"], "none");
        }
      } finally {
        await edge.dispose();
      }
    });
  }
});

// Issue 23: two answers left the Worker with none of our headers. A module that traps (or
// any exception reaching the runtime) would answer the runtime's bare 500: the entry
// catches it and answers the engine's last-resort 503, rendered for the release at build.
describe("no response leaves the Worker without our headers", () => {
  const variants = [
    ["throws", "fetch() { throw new Error(\"RuntimeError: unreachable\"); }"],
    ["rejects", "async fetch() { throw new Error(\"RuntimeError: unreachable\"); }"],
  ];
  for (const [how, method] of variants) {
    test(`a module whose fetch ${how} answers the last-resort 503 with every header`, async () => {
      const { dir, manifest } = await buildPolicy(policy, join(tmp.dir, `trap-${how}`), { now: NOW });
      // The glue's handler replaced by one that fails as a trapped module does.
      await writeFile(join(dir, "index-orig.js"), await readFile(join(dir, "index.js")));
      await writeFile(
        join(dir, "index.js"),
        `import Orig from "./index-orig.js";\nexport * from "./index-orig.js";\nexport default class Broken extends Orig { ${method} }\n`,
      );
      const edge = await startEdge({ dist: dir });
      try {
        const seen = new Set();
        for (let i = 0; i < 2; i++) {
          const r = await timedFetch(`${edge.url}/v1/recommendations?category=audio`);
          assert.equal(r.status, 503, r.text);
          assert.equal(r.json?.code, "DEPENDENCY_UNAVAILABLE", r.text);
          assert.equal(r.json?.retryable, true);
          assert.equal(r.headers["x-policy-version"], manifest.release_id);
          assert.equal(r.headers["x-breaker-mode"], "UNKNOWN");
          assert.equal(r.headers["cache-control"], "no-store");
          assert.equal(r.headers["retry-after"], "1");
          const cid = r.headers["x-correlation-id"];
          assert.ok(cid && cid === r.json.correlationId, `the correlation ID in header and body: ${cid}`);
          seen.add(cid);
        }
        assert.equal(seen.size, 2, "a fresh correlation ID per answer");
        await new Promise((r) => setTimeout(r, 100)); // the runtime's output is read in blocks
        const lines = edge.logs().filter((l) => l.includes('"edge_failed"'));
        assert.equal(lines.length, 2, "one log line per failed request");
        assert.match(lines[0], /RuntimeError: unreachable/);
      } finally {
        await edge.dispose();
      }
    });
  }
});

describe("end to end", () => {
  test("semantic search: live answer from the origin, then a disclosed fallback when it hangs", async () => {
    const stack = await startStack("semantic-search");
    try {
      const live = await stack.fetch("/v1/search?q=headphones");
      assert.equal(live.status, 200, live.text);
      assert.equal(live.headers["x-degraded"], "false");
      assert.equal(live.headers["x-result-source"], "origin");
      assert.equal(live.headers["x-policy-version"], stack.build.manifest.release_id);
      assert.ok(Array.isArray(live.json?.items) && live.json.items.length > 0, live.text);
      assert.equal((await stack.origin.stats()).requests, 1, "the origin saw exactly the one request");

      await stack.origin.setFault({ kind: "hang" });
      const degraded = await stack.fetch("/v1/search?q=headphones");
      assert.equal(degraded.status, 200, degraded.text);
      assert.equal(degraded.headers["x-degraded"], "true");
      assert.equal(degraded.headers["x-result-source"], "fallback");
      assert.equal(degraded.json?.degraded, true, degraded.text);
      assert.equal(degraded.json?.is_personalized, false);
      assert.ok(degraded.json.items.length > 0, "the baked keyword index answers");
      // Budget 1 s (policies/semantic-search.toml) plus loopback and runtime slack.
      assert.ok(degraded.elapsedMs < 1_000 + 250, `answered in ${degraded.elapsedMs} ms`);
    } finally {
      await stack.dispose();
    }
  });

  test("recommendations: a healthy request is answered live through the built Worker", async () => {
    const stack = await startStack("recommendations");
    try {
      const token = stack.token({ sub: "user-42", iss: "https://auth.mercado.example", aud: "recommendations" });
      const r = await stack.fetch("/v1/recommendations?category=audio", { headers: { authorization: `Bearer ${token}` } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers["x-degraded"], "false");
      assert.equal(r.headers["x-result-source"], "origin");
      assert.equal(r.headers["x-policy-version"], stack.build.manifest.release_id);
      assert.ok(Array.isArray(r.json?.items) && r.json.items.length > 0, r.text);
    } finally {
      await stack.dispose();
    }
  });
});
