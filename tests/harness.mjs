// End-to-end harness: builds a policy with the real compiler, runs the built Worker in
// workerd (Miniflare, see scripts/edge-server.mjs) and the simulated model origin
// (`understudy origin`), all on 127.0.0.1, and tears everything down.
//
// Every wait is bounded: requests carry a timeout, process start-ups have a deadline, and
// `dispose()` kills what it started. Nothing listens beyond loopback.
//
// Environment:
//   UNDERSTUDY_BIN   the compiler to use (default target/debug/understudy)
//   UNDERSTUDY_EDGE  the prebuilt edge directory (default edge/worker/build)

import { spawn, spawnSync } from "node:child_process";
import { mkdtemp, readFile, writeFile, copyFile, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve, basename } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

import { startEdge, devSecret, mintToken, readManifest } from "../scripts/edge-server.mjs";

export { devSecret, mintToken, readManifest };

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const UNDERSTUDY = process.env.UNDERSTUDY_BIN ?? join(ROOT, "target", "debug", "understudy");
export const EDGE_DIR = process.env.UNDERSTUDY_EDGE ?? join(ROOT, "edge", "worker", "build");
export const POLICIES = join(ROOT, "policies");

/** Whether the prebuilt edge exists. */
export const edgeBuilt = () => existsSync(join(EDGE_DIR, "index_bg.wasm"));

/**
 * Fails the suite (never skips it) when the prebuilt edge is missing, naming what to run:
 * a suite whose prerequisite is missing must not pass by testing nothing.
 */
export function requireEdge() {
  if (!edgeBuilt()) {
    throw new Error(`no prebuilt edge in ${EDGE_DIR}; run scripts/build-edge.sh (scripts/test.sh does)`);
  }
}

/** Runs the compiler synchronously (bounded). Returns { status, stdout, stderr }. */
export function understudy(args, { timeoutMs = 60_000, cwd = ROOT, env } = {}) {
  if (!existsSync(UNDERSTUDY)) {
    throw new Error(`${UNDERSTUDY} does not exist; run \`cargo build -p understudy\` (scripts/test.sh does)`);
  }
  // A report printed whole (bench --format json carries the witness's trace, every thread's
  // samples) passes spawnSync's default 1 MiB of output: ENOBUFS.
  const r = spawnSync(UNDERSTUDY, args, { cwd, encoding: "utf8", timeout: timeoutMs, maxBuffer: 512 * 1024 * 1024, env: { ...process.env, ...env } });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A fresh temporary directory, removed by `cleanup()`. */
export async function tempDir(prefix = "understudy-e2e-") {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * Copies policies/NAME.toml and the files it names (catalog, inventory) into `dir`,
 * moving the inventory snapshot's time to `snapshotAgeMs` before now, so the catalog
 * validates today — and the edge, which checks the bake's age against the real clock,
 * serves the stubs — whenever the tests run. Returns the copied policy's path.
 */
export async function preparePolicy(name, dir, { snapshotAgeMs = 60 * 60 * 1000, now = Date.now(), edit = (t) => t } = {}) {
  const src = join(POLICIES, name.endsWith(".toml") ? name : `${name}.toml`);
  const text = edit(await readFile(src, "utf8"));
  const dst = join(dir, basename(src));
  await writeFile(dst, text);
  for (const m of text.matchAll(/^\s*(stubs|inventory)\s*=\s*"([^"]+)"/gm)) {
    const [, kind, file] = m;
    const from = join(dirname(src), file);
    const to = join(dir, file);
    if (kind === "inventory") {
      const inv = JSON.parse(await readFile(from, "utf8"));
      if ("taken_at" in inv) inv.taken_at = new Date(now - snapshotAgeMs).toISOString().replace(/\.\d{3}Z$/, "Z");
      await writeFile(to, JSON.stringify(inv, null, 2) + "\n");
    } else {
      await copyFile(from, to);
    }
  }
  return dst;
}

/**
 * A copy of scenario file `src` in `dir`, each of its lines `from` replaced by `to` (pairs of
 * whole lines); throws naming the line when one is not in the file exactly once, so a test
 * that shortens a seed's incident fails when the seed's file changes. Returns the copy's path.
 */
export async function editedScenario(src, dir, lines) {
  let text = await readFile(src, "utf8");
  for (const [from, to] of lines) {
    const at = text.split("\n").filter((l) => l === from).length;
    if (at !== 1) throw new Error(`${src}: the line \`${from}\` is there ${at} times, not once (a test edits it)`);
    text = text.split("\n").map((l) => (l === from ? to : l)).join("\n");
  }
  const dst = join(dir, basename(src));
  await writeFile(dst, text);
  return dst;
}

/** `understudy build POLICY --out OUT [--now NOW] --edge EDGE`; throws with stderr on failure. */
export async function buildPolicy(policyPath, out, { now, edge = EDGE_DIR } = {}) {
  const args = ["build", policyPath, "--out", out, "--edge", edge];
  if (now) args.push("--now", now);
  const r = understudy(args);
  if (r.status !== 0) {
    throw new Error(`understudy ${args.join(" ")} exited ${r.status}:\n${r.stderr}${r.stdout}`);
  }
  return { dir: out, manifest: await readManifest(out), stdout: r.stdout };
}

/** Waits (at most `timeoutMs`) for a line of `stream` matching `re`; returns the match. */
function waitForLine(child, stream, re, timeoutMs, what) {
  return new Promise((resolveLine, reject) => {
    const rl = createInterface({ input: stream });
    const lines = [];
    const timer = setTimeout(() => {
      rl.close();
      reject(new Error(`${what} did not start within ${timeoutMs} ms; output:\n${lines.join("\n")}`));
    }, timeoutMs);
    rl.on("line", (line) => {
      lines.push(line);
      const m = re.exec(line);
      if (m) {
        clearTimeout(timer);
        rl.removeAllListeners("line");
        rl.on("line", () => {}); // keep draining so the child never blocks on a full pipe
        resolveLine(m);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}) before it was ready; output:\n${lines.join("\n")}`));
    });
  });
}

/**
 * Starts `understudy origin --listen 127.0.0.1:0` (with `--script FILE` when given).
 * Returns { url, setFault(fault), clearFault(), stats(), reset(), stop() }.
 */
/**
 * Every origin a test file started and has not stopped. Killed when the file's process
 * exits, whatever a failed hook left behind: a live child (its stdout is a pipe) would keep
 * the file's process, and with it the whole `node --test` run, waiting forever. The suite
 * runs with `--test-force-exit`, so a file whose tests are done does exit.
 */
const children = new Set();
process.once("exit", () => {
  for (const c of children) c.kill("SIGKILL");
});

export async function startOrigin({ script } = {}) {
  const args = ["origin", "--listen", "127.0.0.1:0"];
  if (script) args.push("--script", script);
  const child = spawn(UNDERSTUDY, args, { stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  child.once("exit", () => children.delete(child));
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  let m;
  try {
    m = await waitForLine(child, child.stdout, /origin listening on (http:\/\/127\.0\.0\.1:\d+)/, 10_000, "understudy origin");
  } catch (e) {
    child.kill("SIGKILL");
    throw new Error(`${e.message}\n${stderr}`);
  }
  const url = m[1];
  const control = async (method, path, body) => {
    const r = await fetch(`${url}/__origin/${path}`, {
      method,
      headers: body ? { "content-type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(5_000),
    });
    const json = await r.json().catch(() => null);
    if (!r.ok) throw new Error(`origin control ${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  };
  return {
    url,
    setFault: (fault) => control("PUT", "fault", fault),
    clearFault: () => control("DELETE", "fault"),
    stats: () => control("GET", "stats"),
    reset: () => control("POST", "reset"),
    /** The event consumer's rules (docs/origin.md) and its side-effect ledger. */
    consumer: (config) => control("PUT", "consumer", config),
    clearConsumer: () => control("DELETE", "consumer"),
    ledger: () => control("GET", "ledger"),
    eventsUrl: `${url}/__events/deliver`,
    stop: () => stopChild(child),
  };
}

function stopChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((res) => {
    const t = setTimeout(() => child.kill("SIGKILL"), 3_000);
    child.once("exit", () => {
      clearTimeout(t);
      res();
    });
    child.kill("SIGTERM");
  });
}

/**
 * One request with a deadline. Returns { status, headers (a plain object, lower-case
 * names), text, json (or null), elapsedMs }.
 */
export async function timedFetch(url, { method = "GET", headers = {}, body, timeoutMs = 5_000 } = {}) {
  const start = performance.now();
  const r = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs), redirect: "manual" });
  const text = await r.text();
  const elapsedMs = performance.now() - start;
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, headers: Object.fromEntries(r.headers), text, json, elapsedMs };
}

/**
 * `understudy publish POLICY --tier TIER --lists LISTS --out OUT` (B-PUBLISH); throws with
 * stderr on failure. Returns { binding, entries (the wrangler kv bulk put file, parsed),
 * summary (its --format json output) } — what the tests seed local KV with, so the tested
 * path is the published one.
 */
export async function publishTier(policyPath, { tier, lists, out, now, extra = [] }) {
  const args = ["publish", policyPath, "--tier", tier, "--lists", lists, "--out", out, "--format", "json", ...extra];
  if (now) args.push("--now", now);
  const r = understudy(args);
  if (r.status !== 0) throw new Error(`understudy ${args.join(" ")} exited ${r.status}:\n${r.stderr}${r.stdout}`);
  const summary = JSON.parse(r.stdout);
  return { binding: summary.binding, entries: JSON.parse(await readFile(out, "utf8")), summary };
}

/**
 * The whole stack for one policy: prepare + build it, start the origin and the edge
 * (pointed at the origin, KV seeded from `seed`, and from the files `publish` writes for
 * each { tier, lists } of `publish`). Returns { edge, origin, build, policy, published,
 * fetch(path, init), token(claims), dispose() }.
 */
export async function startStack(policyName, { seed, publish = [], originScript, vars, build: buildOpts = {} } = {}) {
  const tmp = await tempDir();
  const disposers = [tmp.cleanup];
  const dispose = async () => {
    for (const d of disposers.reverse()) await d().catch(() => {});
  };
  try {
    const policy = await preparePolicy(policyName, tmp.dir, buildOpts);
    const build = await buildPolicy(policy, join(tmp.dir, "dist"), buildOpts);
    const allSeed = { ...(seed ?? {}) };
    const published = [];
    for (const [i, p] of publish.entries()) {
      const lists = p.lists.startsWith("/") ? p.lists : join(POLICIES, p.lists);
      const pub = await publishTier(policy, { ...p, lists, out: join(tmp.dir, `published-${i}.json`) });
      allSeed[pub.binding] = [...(allSeed[pub.binding] ?? []), ...pub.entries];
      published.push(pub);
    }
    const origin = await startOrigin({ script: originScript });
    disposers.push(origin.stop);
    const edge = await startEdge({ dist: build.dir, originUrl: origin.url, seed: allSeed, vars });
    disposers.push(edge.dispose);
    return {
      build,
      policy,
      published,
      origin,
      edge,
      fetch: (path, init) => timedFetch(`${edge.url}${path}`, init),
      token: (claims, secretBinding = "TOKEN_HMAC_KEY") => mintToken(devSecret(secretBinding), claims),
      dispose,
    };
  } catch (e) {
    await dispose();
    throw e;
  }
}

// ---- wasm custom sections (to make modules with a missing or corrupt bake) -------------

function readLeb(bytes, pos) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const b = bytes[pos++];
    if (b === undefined) throw new Error("truncated LEB128");
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if ((b & 0x80) === 0) return [value, pos];
  }
}

function leb(n) {
  const out = [];
  do {
    let b = n & 0x7f;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return out;
}

/** Walks the top-level sections of wasm `bytes`: [{ id, start, end, name?, payload? }]. */
export function wasmSections(bytes) {
  const magic = Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]);
  if (!Buffer.from(bytes.subarray(0, 8)).equals(magic)) throw new Error("not a wasm module");
  const out = [];
  let pos = 8;
  while (pos < bytes.length) {
    const start = pos;
    const id = bytes[pos++];
    let size;
    [size, pos] = readLeb(bytes, pos);
    const end = pos + size;
    if (end > bytes.length) throw new Error(`section at ${start} runs past the end`);
    const s = { id, start, end };
    if (id === 0) {
      const [nameLen, p] = readLeb(bytes, pos);
      s.name = Buffer.from(bytes.subarray(p, p + nameLen)).toString("utf8");
      s.payload = bytes.subarray(p + nameLen, end);
    }
    out.push(s);
    pos = end;
  }
  return out;
}

/**
 * The payload of custom section `name` in wasm `bytes`, or undefined. (Node 20 cannot
 * compile the Worker's module — it uses wasm GC reference types — so this reads the
 * bytes instead of `WebAssembly.Module.customSections`.)
 */
export function customSection(bytes, name) {
  return wasmSections(bytes).find((s) => s.name === name)?.payload;
}

/**
 * A copy of wasm `bytes` without the custom section `name`, and with one holding `payload`
 * appended when `payload` is given (a Uint8Array).
 */
export function withCustomSection(bytes, name, payload) {
  const parts = [bytes.subarray(0, 8)];
  for (const s of wasmSections(bytes)) {
    if (s.name !== name) parts.push(bytes.subarray(s.start, s.end));
  }
  if (payload) {
    const nameBytes = Buffer.from(name, "utf8");
    const body = [...leb(nameBytes.length), ...nameBytes];
    parts.push(Uint8Array.from([0, ...leb(body.length + payload.length), ...body]), payload);
  }
  return Buffer.concat(parts);
}
