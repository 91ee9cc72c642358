// Runs a directory written by `understudy build` in workerd, through Miniflare, on
// 127.0.0.1 — the same files `wrangler deploy` would upload (entry.mjs, bake.mjs, index.js,
// index_bg.wasm), the bindings of its manifest.json, local in-memory KV and rate limiting,
// and development values for its secrets.
//
// Used three ways:
//   - by `understudy dev` (as a program, below), which also starts the simulated origin;
//   - by the end-to-end tests (tests/harness.mjs imports startEdge);
//   - by hand: node scripts/edge-server.mjs --dist DIR [--port N] [--origin URL] [--seed FILE]
//              [--events-url URL] [--persist DIR]
//
// Durable Objects (the events outbox, manifest `bindings.durable_objects`) run with SQLite
// storage. It lives in a fresh temporary directory per process unless `persist` names a
// directory: then it lives in DIR/do (alarms included) and survives a restart — even
// `kill -9` of this process group — as long as the worker's name ("understudy-edge") and
// the class name stay the same.
//
// Seed files (JSON) map a KV binding to its entries:
//   { "USER_RECS": [ { "key": "user_rec:…", "value": {"items": [...]},
//                      "age_ms": 60000 } ] }
// `value` is stored as JSON text (a string is stored as it is). The write time goes in the
// entry's metadata as {"written_at": ms} — `written_at` (ms since the epoch) when given,
// else now minus `age_ms` (default 0); an explicit `metadata` object is stored unchanged.
// So the file `understudy publish` writes for `wrangler kv bulk put` ([{key, value, metadata}])
// is a binding's seed list as it is: `--kv BINDING=FILE` seeds a binding from one
// (`understudy dev --kv`), and the tests seed published tiers the same way.

import { readFile } from "node:fs/promises";
import { accessSync, constants, createWriteStream, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createHmac } from "node:crypto";
import { parseArgs } from "node:util";
import { Miniflare, Log, LogLevel } from "miniflare";

/**
 * Where the local runtime keeps the storage it calls "in memory": Miniflare puts local KV,
 * the Cache API and unpersisted Durable Objects in SQLite files under a fresh directory of
 * `os.tmpdir()`, and workerd runs their writes on the Worker's own thread. On a disk-backed
 * /tmp those writes (write-through, the KV cache) stalled the whole isolate for 200–320 ms
 * at a time — seed 000's time-scaled drill broke LATENCY_BUDGET or RECOVER_WITHIN in 4 of 10
 * runs, and in 1 of 16 (no stall) with the storage in RAM (docs/history/2026-12-bench.md,
 * "The local runtime's storage"). Production KV is a remote service behind its read timeout and never blocks the
 * isolate, so the stall is the simulator's, not the edge's: the storage goes to tmpfs
 * (`/dev/shm`) where there is one, or where UNDERSTUDY_RUNTIME_TMP says. Explicit
 * persistence (`persist`, `kvPersist`) is untouched.
 */
function runtimeTmp() {
  const explicit = process.env.UNDERSTUDY_RUNTIME_TMP;
  if (explicit) return explicit;
  try {
    if (statSync("/dev/shm").isDirectory()) {
      accessSync("/dev/shm", constants.W_OK);
      return "/dev/shm";
    }
  } catch {
    // no tmpfs here: the system's temporary directory
  }
  return tmpdir();
}

/** The storage directories of this process's runtimes, removed when they stop or it exits. */
const scratch = new Set();
const removeScratch = (dir) => {
  rmSync(dir, { recursive: true, force: true });
  scratch.delete(dir);
};
process.on("exit", () => [...scratch].forEach(removeScratch));

const RUNTIME_PREFIX = "understudy-runtime-";
/** The file in a runtime's storage directory that names the process owning it. */
export const OWNER_FILE = ".understudy-owner";

/**
 * Process `pid`'s state and start time (clock ticks since boot) from /proc/PID/stat, or
 * null where there is no /proc. The start time tells a process from a later one that
 * reuses its PID.
 */
function procStat(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0], start: fields[19] ?? null };
  } catch {
    return null;
  }
}

/** Whether the process recorded as `owner` ({pid, start}) still runs. */
function ownerAlive({ pid, start }) {
  try {
    process.kill(pid, 0);
  } catch (e) {
    // EPERM: it runs, as another user.
    if (e.code !== "EPERM") return false;
  }
  const now = procStat(pid);
  if (now == null) return true;
  // A zombie (killed, not yet reaped by its parent) runs no more.
  if (now.state === "Z") return false;
  return start == null || now.start === String(start);
}

/**
 * Removes the storage directories under `base` whose owner is gone. A runtime killed with
 * SIGKILL (the events drill's kill, a test's timeout, a CI job cancelled) never runs the exit
 * handler above, and on tmpfs what it leaves is RAM. Only a directory whose recorded owner no
 * longer runs is removed: a live one is never touched, nor one without an owner file (an older
 * runtime's, or one whose owner is still writing the file) — nothing says it is unused.
 * Returns the directories removed.
 */
export function removeStaleRuntimeDirs(base) {
  const removed = [];
  let names;
  try {
    names = readdirSync(base);
  } catch {
    return removed;
  }
  for (const name of names.filter((n) => n.startsWith(RUNTIME_PREFIX))) {
    const dir = join(base, name);
    let owner;
    try {
      owner = JSON.parse(readFileSync(join(dir, OWNER_FILE), "utf8"));
    } catch {
      continue;
    }
    if (!Number.isInteger(owner?.pid) || owner.pid <= 0 || ownerAlive(owner)) continue;
    try {
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // Another runtime's cleanup got there first, or it is not ours to remove.
    }
  }
  return removed;
}

/**
 * A fresh storage directory for a runtime under `base` (default {@link runtimeTmp}), owned by
 * this process (its PID and start time in {@link OWNER_FILE}), after removing the ones
 * killed runtimes left behind. Removed when this process exits; by then the caller may
 * have removed it already.
 */
export function runtimeDir(base = runtimeTmp()) {
  removeStaleRuntimeDirs(base);
  const dir = mkdtempSync(join(base, RUNTIME_PREFIX));
  scratch.add(dir);
  writeFileSync(join(dir, OWNER_FILE), JSON.stringify({ pid: process.pid, start: procStat(process.pid)?.start ?? null }));
  return dir;
}

/**
 * `new Miniflare(options)` with its temporary storage in a directory of its own under
 * {@link runtimeTmp}, removed once it is disposed (Miniflare's own removal is
 * fire-and-forget and does not outlive `process.exit`, which left 2.8 MB per run behind).
 */
export function miniflare(options) {
  const dir = runtimeDir();
  const before = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  let mf;
  try {
    mf = new Miniflare(options);
  } catch (e) {
    removeScratch(dir);
    throw e;
  } finally {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
  }
  const dispose = mf.dispose.bind(mf);
  mf.dispose = async () => {
    try {
      await dispose();
    } finally {
      removeScratch(dir);
    }
  };
  return mf;
}

/** The development value of secret binding `name` (never a real credential). */
export function devSecret(name) {
  return `dev-${name.toLowerCase().replace(/_/g, "-")}`;
}

const b64url = (data) => Buffer.from(data).toString("base64url");

/** An HS256 bearer token, signed with `secret`, carrying `claims` (plus iat/exp). */
export function mintToken(secret, claims, { ttlS = 3600, now = Date.now() } = {}) {
  const iat = Math.floor(now / 1000);
  const header = b64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const payload = b64url(JSON.stringify({ iat, exp: iat + ttlS, ...claims }));
  const sig = createHmac("sha256", secret).update(`${header}.${payload}`).digest("base64url");
  return `${header}.${payload}.${sig}`;
}

export async function readManifest(dist) {
  const text = await readFile(join(dist, "manifest.json"), "utf8");
  return JSON.parse(text);
}

/** Stores the entries of a seed object (see the top of this file) into Miniflare's KV. */
export async function seedKv(mf, seed, { now = Date.now() } = {}) {
  let count = 0;
  for (const [binding, entries] of Object.entries(seed ?? {})) {
    if (!Array.isArray(entries)) {
      throw new Error(`seed: "${binding}" must map to a list of {key, value} entries`);
    }
    const kv = await mf.getKVNamespace(binding);
    for (const [i, e] of entries.entries()) {
      if (typeof e?.key !== "string" || e.key.length === 0 || !("value" in e)) {
        throw new Error(`seed: ${binding}[${i}] needs a non-empty "key" and a "value"`);
      }
      if (e.metadata !== undefined && (typeof e.metadata !== "object" || e.metadata === null || Array.isArray(e.metadata))) {
        throw new Error(`seed: ${binding}[${i}] ("${e.key}"): "metadata" must be an object`);
      }
      let value = typeof e.value === "string" ? e.value : JSON.stringify(e.value);
      // wrangler kv bulk put's base64 values.
      if (e.base64 === true) value = Buffer.from(value, "base64").toString("utf8");
      const metadata = e.metadata ?? { written_at: e.written_at ?? now - (e.age_ms ?? 0) };
      await kv.put(e.key, value, { metadata });
      count++;
    }
  }
  return count;
}

/**
 * Starts the built Worker in `dist`. Returns { url, mf, manifest, kv(binding), dispose() }.
 * `originUrl` overrides the baked origin (var UNDERSTUDY_ORIGIN_URL); `vars` and `secrets`
 * override further bindings; `port` 0 picks a free one.
 */
/**
 * A KV namespace whose reads take `delayMs` longer (tests of tiers whose read overruns its
 * timeout), and whose writes fail when `failPuts` (tests of a failed write-through). Miniflare's wrapped bindings: the Worker sees an object with the KV methods,
 * implemented by a second worker that waits, then reads the real local namespace.
 */
const SLOW_KV_WORKER = `
export default function (env) {
  const wait = () => new Promise((r) => setTimeout(r, env.delayMs));
  return {
    async get(key, opts) { await wait(); return env.INNER.get(key, opts); },
    async getWithMetadata(key, opts) { await wait(); return env.INNER.getWithMetadata(key, opts); },
    async put(key, value, opts) {
      if (env.failPuts) throw new Error("simulated KV outage: put refused");
      return env.INNER.put(key, value, opts);
    },
    async delete(key) { return env.INNER.delete(key); },
    async list(opts) { return env.INNER.list(opts); },
  };
}`;

// [F-SCOPE] The breaker's coordinators as the isolates (and the regions' merges) reach them
// in a fault drill: the real namespace behind a switch read from the control namespace on
// every call — "" passes through; "error" answers 500; "throw" throws; "hang" never answers
// (the caller's own timeout ends the wait); "reset:N" reaches a fresh object (a coordinator
// that restarted empty). "MODE@NAME" strikes only the objects whose name ends in "/NAME" (a
// region, such as "error@weur", or "error@global"); the others pass through. Several, comma
// separated ("error@weur,error@global"): the first that names the object. Only
// `startEdges(…, { coordinatorFaults: true })` binds it.
const COORDINATOR_PROXY = `
export default function (env) {
  return {
    idFromName: (name) => name,
    get: (name) => ({
      async fetch(url, init) {
        let mode = "";
        for (const part of ((await env.CONTROL.get("mode")) ?? "").split(",")) {
          const at = part.indexOf("@");
          if (at < 0 || name.endsWith("/" + part.slice(at + 1))) {
            mode = at < 0 ? part : part.slice(0, at);
            break;
          }
        }
        if (mode === "error") return new Response("coordinator fault (drill)", { status: 500 });
        if (mode === "throw") throw new Error("coordinator fault (drill): the object threw");
        if (mode === "hang") return new Promise(() => {});
        const epoch = mode.startsWith("reset:") ? "#" + mode.slice(6) : "";
        return env.INNER.get(env.INNER.idFromName(name + epoch)).fetch(url, init);
      },
    }),
  };
}`;
const COORDINATOR_PROXY_NAME = "coordinator-proxy";
const COORDINATOR_CONTROL = "coordinator-control";

/**
 * How Node reads and writes the local KV namespaces (seeds, and the tests' checks of what the
 * Worker stored): through a small Worker of our own, bound to the same namespaces, reached
 * with `dispatchFetch` — never through Miniflare's binding proxy (`mf.getKVNamespace`). That
 * proxy makes the first call of each method synchronously (`Atomics.wait` on a helper
 * thread), and that path failed a clean-clone CI run on its own internal assertion
 * (`SynchronousFetcher.fetch`: `message?.id === id`) while seeding KV. `dispatchFetch` is
 * an ordinary asynchronous HTTP request to workerd.
 */
const KV_TOOL = "us-kv-tool";
const KV_TOOL_HOST = "us-kv-tool.internal";
const KV_TOOL_WORKER = `
export default {
  async fetch(request, env) {
    let op, binding, args;
    try {
      ({ op, binding, args } = await request.json());
    } catch (e) {
      return Response.json({ error: "kv tool: the request is not JSON: " + e }, { status: 400 });
    }
    const ns = env[binding];
    if (!ns || typeof ns.get !== "function") {
      return Response.json({ error: "kv tool: no KV binding " + JSON.stringify(binding) }, { status: 404 });
    }
    if (!["get", "getWithMetadata", "put", "delete", "list"].includes(op)) {
      return Response.json({ error: "kv tool: unknown operation " + JSON.stringify(op) }, { status: 400 });
    }
    try {
      const result = await ns[op](...(args ?? []));
      return Response.json({ result: result ?? null });
    } catch (e) {
      return Response.json({ error: String(e && e.stack ? e.stack : e) }, { status: 500 });
    }
  },
};`;

/** The kv tool Worker's Miniflare options, bound to `namespaces` ({binding: namespace id}). */
function kvToolWorker(namespaces) {
  return { name: KV_TOOL, modules: true, script: KV_TOOL_WORKER, routes: [`${KV_TOOL_HOST}/*`], kvNamespaces: namespaces };
}

/**
 * A KV namespace as the tests use it — `get`, `getWithMetadata`, `put`, `delete`, `list`,
 * each returning a promise — for the tool's binding `binding`. Values cross as JSON: string
 * values and the "text" and "json" read types only.
 */
function kvToolNamespace(mf, binding) {
  const call = async (op, ...args) => {
    const type = op === "get" || op === "getWithMetadata" ? args[1] : undefined;
    const t = typeof type === "object" && type !== null ? type.type : type;
    if (t !== undefined && t !== "text" && t !== "json") {
      throw new Error(`kv(${binding}).${op}: read type ${JSON.stringify(t)} is not supported here (text or json)`);
    }
    if (op === "put" && typeof args[1] !== "string") {
      throw new Error(`kv(${binding}).put(${JSON.stringify(args[0])}): the value must be a string here`);
    }
    const res = await mf.dispatchFetch(`http://${KV_TOOL_HOST}/`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ op, binding, args }),
    });
    const text = await res.text();
    let doc;
    try {
      doc = JSON.parse(text);
    } catch {
      throw new Error(`kv(${binding}).${op}: the kv tool answered ${res.status} with no JSON: ${text.slice(0, 200)}`);
    }
    if (!res.ok || "error" in doc) throw new Error(`kv(${binding}).${op}: ${doc.error ?? `status ${res.status}`}`);
    return doc.result;
  };
  return {
    get: (key, type) => call("get", key, type),
    getWithMetadata: (key, type) => call("getWithMetadata", key, type),
    put: (key, value, opts) => call("put", key, value, opts),
    delete: (key) => call("delete", key),
    list: (opts) => call("list", opts),
  };
}

/** How many of the runtime's last output lines `logs()` gives. */
const KEPT_LINES = 2_000;
/** Most bytes of output kept to find them in. */
const KEPT_BYTES = 8 << 20;

/**
 * The runtime's output — the Worker's structured log lines (one JSON object per request) and
 * workerd's own messages: kept for tests to inspect (`logs()`, the last 2,000 lines; `logs(true)`
 * the JSON ones, parsed) and echoed when `verbose`.
 *
 * Kept as raw blocks of whole lines, split only when asked. workerd writes its output into a
 * pipe, and while the pipe is full workerd blocks — every Worker of the process waits for the
 * reader. Splitting and copying every line as it came (readline) was such a reader under load:
 * in `understudy bench`'s model-hung loop (the edge at ~2,700 req/s, a log line each) answers
 * waited in batches, and the edge's p99 was 305–311 ms with it against 157 ms with the output
 * discarded (docs/history/2026-12-bench.md). A deployed Worker's logs never block it.
 *
 * With `logFile`, every whole line of the runtime's stdout — the Worker's log lines — is
 * also appended to that file (`understudy drill --logs`: what `understudy replay` reads),
 * through a write stream that buffers rather than blocks; `close()` flushes it.
 */
export function runtimeOutput(verbose, logFile) {
  const blocks = [];
  let bytes = 0;
  const file = logFile ? createWriteStream(logFile, { flags: "a" }) : null;
  const collect = (stream, echo, toFile) => {
    let partial = null;
    stream.on("data", (chunk) => {
      if (verbose) echo.write(chunk);
      const end = chunk.lastIndexOf(10);
      if (end < 0) {
        partial = partial ? Buffer.concat([partial, chunk]) : chunk;
        return;
      }
      const whole = partial ? Buffer.concat([partial, chunk.subarray(0, end + 1)]) : chunk.subarray(0, end + 1);
      partial = end + 1 < chunk.length ? chunk.subarray(end + 1) : null;
      blocks.push(whole);
      if (toFile) toFile.write(whole);
      bytes += whole.length;
      while (bytes > KEPT_BYTES && blocks.length > 1) bytes -= blocks.shift().length;
    });
  };
  const lines = () => {
    const all = Buffer.concat(blocks).toString("utf8").split("\n");
    all.pop(); // what follows the last newline: nothing
    return all.slice(-KEPT_LINES);
  };
  return {
    handleRuntimeStdio(stdout, stderr) {
      collect(stdout, process.stdout, file);
      collect(stderr, process.stderr, null);
    },
    close: () => new Promise((done) => (file ? file.end(done) : done())),
    logs: (json = false) =>
      json
        ? lines().flatMap((l) => {
            try {
              return [JSON.parse(l)];
            } catch {
              return [];
            }
          })
        : lines(),
  };
}

/** The KV namespace id of each binding in `dist`'s wrangler.toml (what `wrangler --local` keys its storage by). */
export async function kvNamespaceIds(dist) {
  const toml = await readFile(join(dist, "wrangler.toml"), "utf8");
  const ids = {};
  for (const m of toml.matchAll(/\[\[kv_namespaces\]\]\s*\nbinding = "([^"]+)"[^\[]*?\nid = "([^"]+)"/g)) ids[m[1]] = m[2];
  return ids;
}

/** Miniflare's `durableObjects` option for a manifest's Durable Object bindings (SQLite). */
export function durableObjectsOf(manifest) {
  const out = {};
  for (const d of manifest.bindings.durable_objects ?? []) out[d.name] = { className: d.class_name, useSQLite: d.sqlite !== false };
  return out;
}

/**
 * `kvPersist`: a directory of local KV storage as `wrangler kv … --local --persist-to DIR`
 * writes it (DIR/v3/kv): the edge then reads what wrangler stored, under the namespace ids of
 * the build's wrangler.toml.
 */
export async function startEdge({ dist, port = 0, originUrl, eventsUrl, persist, seed, vars = {}, secrets = {}, verbose = false, slowKv = {}, extra = {}, kvPersist, logFile }) {
  dist = resolve(dist);
  const manifest = await readManifest(dist);
  const b = manifest.bindings;
  const bindings = { ...b.vars };
  for (const s of b.secrets) bindings[s] = devSecret(s);
  Object.assign(bindings, secrets, vars);
  if (originUrl) bindings.UNDERSTUDY_ORIGIN_URL = originUrl;
  if (eventsUrl) bindings.UNDERSTUDY_EVENTS_URL = eventsUrl;
  const ratelimits = {};
  for (const rl of b.rate_limits) ratelimits[rl.name] = { simple: { limit: rl.limit, period: rl.period } };

  const output = runtimeOutput(verbose, logFile);
  // Slow namespaces are bound through a wrapper worker each; the rest directly.
  const direct = b.kv.filter((name) => !(name in slowKv));
  let kvNamespaces = direct;
  if (kvPersist) {
    const ids = await kvNamespaceIds(dist);
    kvNamespaces = Object.fromEntries(direct.map((name) => [name, ids[name] ?? name]));
  }
  const wrappedBindings = {};
  const wrappers = [];
  // `slowKv`: binding → read delay in ms, or { delayMs, failPuts }.
  for (const [name, how] of Object.entries(slowKv)) {
    if (!b.kv.includes(name)) throw new Error(`slowKv: ${name} is not a KV binding of this build (${b.kv.join(", ")})`);
    const scriptName = `slow-kv-${name.toLowerCase()}`;
    const { delayMs = 0, failPuts = false } = typeof how === "number" ? { delayMs: how } : how;
    wrappedBindings[name] = { scriptName, bindings: { delayMs, failPuts } };
    wrappers.push({ name: scriptName, modules: true, script: SLOW_KV_WORKER, kvNamespaces: { INNER: name } });
  }
  // The kv tool sees every namespace the edge does, a slow binding's inner one included.
  const toolNamespaces = Object.fromEntries(
    b.kv.map((name) => [name, Array.isArray(kvNamespaces) || !(name in kvNamespaces) ? name : kvNamespaces[name]]),
  );
  const mf = miniflare({
    host: "127.0.0.1",
    port,
    log: new Log(verbose ? LogLevel.INFO : LogLevel.WARN),
    workers: [{
    name: "understudy-edge",
    modules: true,
    scriptPath: join(dist, "entry.mjs"),
    modulesRoot: dist,
    modulesRules: [
      { type: "ESModule", include: ["**/*.mjs", "**/*.js"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: await compatibilityDate(dist),
    kvNamespaces,
    wrappedBindings,
    ratelimits,
    bindings,
    durableObjects: durableObjectsOf(manifest),
    }, ...wrappers, kvToolWorker(toolNamespaces)],
    // Local KV as `wrangler … --local --persist-to DIR` keeps it (a shared option).
    ...(kvPersist ? { kvPersist: join(resolve(kvPersist), "v3", "kv") } : {}),
    // The outbox's storage: on disk (and alarms with it) when `persist` is given.
    ...(persist ? { durableObjectsPersist: join(resolve(persist), "do") } : {}),
    // A placeholder `request.cf` instead of fetching the real one from Cloudflare.
    cf: false,
    handleRuntimeStdio: output.handleRuntimeStdio,
    // Further Miniflare options (e.g. `inspectorPort` for scripts/profile-edge.mjs).
    ...extra,
  });
  // The namespace behind binding `name` (the wrapper's inner one for slow bindings).
  const kvOf = (name) => {
    if (!b.kv.includes(name)) throw new Error(`kv: ${name} is not a KV binding of this build (${b.kv.join(", ")})`);
    return kvToolNamespace(mf, name);
  };
  let url;
  try {
    url = await mf.ready;
  } catch (e) {
    await mf.dispose().catch(() => {});
    throw e;
  }
  if (seed) {
    try {
      await seedKv({ getKVNamespace: kvOf }, seed);
    } catch (e) {
      await mf.dispose().catch(() => {});
      throw e;
    }
  }
  return {
    url: new URL(url).origin,
    mf,
    manifest,
    kv: kvOf,
    /** The runtime's output lines so far; `logs(true)` parses the JSON ones. */
    logs: output.logs,
    dispose: async () => {
      await mf.dispose();
      await output.close();
    },
  };
}

async function compatibilityDate(dist) {
  const toml = await readFile(join(dist, "wrangler.toml"), "utf8");
  const m = /^compatibility_date = "([0-9-]+)"$/m.exec(toml);
  if (!m) throw new Error(`${join(dist, "wrangler.toml")} has no compatibility_date`);
  return m[1];
}

/**
 * Several built Workers in ONE Miniflare instance (one workerd process) on one loopback
 * port — what `understudy bench` measures side by side (scripts/bench-server.mjs). Each of
 * `workers` is { dist, name, routes, originUrl?, seed?, vars?, secrets? }: its bindings come
 * from its manifest.json as in startEdge (development secrets, local KV, rate limits). A
 * request goes to the worker whose `routes` (Miniflare patterns such as "edge.bench/*")
 * match its URL, whose host is the request's Host header; the first worker takes the rest.
 * KV namespaces are per worker (each namespace id is prefixed with the worker's name).
 * With `direct`, each worker also listens on a loopback port of its own that reaches it
 * without Miniflare's routing entry worker (a JS hop no deployed Worker pays: it costs
 * about as much CPU per request as a small Worker does), listed in `direct` by name.
 * `front` ({ name, script, serviceBindings, bindings }): one more Worker (a module script) on a
 * loopback port of its own, reaching the others through service bindings — the local front
 * of `drill --rollout` (scripts/rollout-front.mjs); its address is `front`.
 * `persist`: a directory keeping the Durable Objects' storage across a restart (as startEdge's).
 * Returns { url, direct, front, mf, workers: {name: {manifest, kv(binding)}}, logs(json), dispose() }.
 */
export async function startEdges(workers, { port = 0, verbose = false, direct = false, shared = false, coordinatorFaults = false, front, logFile, persist } = {}) {
  if (coordinatorFaults && !shared) throw new Error("startEdges: coordinatorFaults needs shared: true");
  if (!Array.isArray(workers) || workers.length === 0) throw new Error("startEdges: no workers");
  const names = new Set();
  const output = runtimeOutput(verbose, logFile);
  const options = [];
  const loaded = {};
  // The kv tool's bindings: worker i's namespace `k` as `W{i}_{k}`.
  const toolNamespaces = {};
  for (const w of workers) {
    if (typeof w?.name !== "string" || !/^[a-z0-9-]+$/.test(w.name) || names.has(w.name)) {
      throw new Error(`startEdges: worker name ${JSON.stringify(w?.name)} must be unique, lower-case letters, digits and -`);
    }
    names.add(w.name);
    const dist = resolve(w.dist);
    const manifest = await readManifest(dist);
    const b = manifest.bindings;
    const bindings = { ...b.vars };
    for (const s of b.secrets) bindings[s] = devSecret(s);
    Object.assign(bindings, w.secrets ?? {}, w.vars ?? {});
    if (w.originUrl) bindings.UNDERSTUDY_ORIGIN_URL = w.originUrl;
    const ratelimits = {};
    for (const rl of b.rate_limits) ratelimits[rl.name] = { simple: { limit: rl.limit, period: rl.period } };
    // `shared`: copies of one Worker, each its own isolate, as a fleet is: one KV namespace
    // per binding for all, and every Durable Object binding reaching the first copy's
    // classes (one coordinator, one outbox), as production's one namespace per class.
    const nsOf = (k) => (shared ? k : `${w.name}-${k}`);
    const kvNamespaces = Object.fromEntries(b.kv.map((k) => [k, nsOf(k)]));
    for (const k of b.kv) toolNamespaces[`W${options.length}_${k}`] = nsOf(k);
    const durableObjects = durableObjectsOf(manifest);
    if (shared && options.length > 0) {
      for (const d of Object.values(durableObjects)) d.scriptName = options[0].name;
    }
    const wrappedBindings = {};
    if (coordinatorFaults) {
      for (const [binding, d] of Object.entries(durableObjects)) {
        if (d.className !== "BreakerCoordinator") continue;
        delete durableObjects[binding];
        wrappedBindings[binding] = { scriptName: COORDINATOR_PROXY_NAME, bindings: {} };
        // The first copy still defines the class, under a binding nothing reads.
        if (options.length === 0) durableObjects.UNDERSTUDY_COORDINATOR_CLASS = { className: d.className, useSQLite: d.useSQLite };
      }
    }
    options.push({
      name: w.name,
      routes: w.routes ?? [],
      modules: true,
      scriptPath: join(dist, "entry.mjs"),
      modulesRoot: dist,
      modulesRules: [
        { type: "ESModule", include: ["**/*.mjs", "**/*.js"] },
        { type: "CompiledWasm", include: ["**/*.wasm"] },
      ],
      compatibilityDate: await compatibilityDate(dist),
      kvNamespaces,
      ratelimits,
      bindings,
      durableObjects,
      wrappedBindings,
      ...(direct ? { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] } : {}),
    });
    loaded[w.name] = { manifest, seed: w.seed, index: options.length - 1 };
  }
  const extraWorkers = [];
  if (coordinatorFaults) {
    toolNamespaces.COORDINATOR_CONTROL = COORDINATOR_CONTROL;
    extraWorkers.push({
      name: COORDINATOR_PROXY_NAME,
      modules: true,
      script: COORDINATOR_PROXY,
      kvNamespaces: { CONTROL: COORDINATOR_CONTROL },
      durableObjects: { INNER: { className: "BreakerCoordinator", scriptName: options[0].name, useSQLite: true } },
    });
  }
  if (front) {
    extraWorkers.push({
      name: front.name,
      modules: true,
      script: front.script,
      serviceBindings: front.serviceBindings,
      bindings: front.bindings ?? {},
      compatibilityDate: options[0].compatibilityDate,
      unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
    });
  }
  const mf = miniflare({
    host: "127.0.0.1",
    port,
    log: new Log(verbose ? LogLevel.INFO : LogLevel.WARN),
    workers: [...options, ...extraWorkers, kvToolWorker(toolNamespaces)],
    cf: false,
    handleRuntimeStdio: output.handleRuntimeStdio,
    // `persist`: the Durable Objects' storage (the coordinators', the outbox's) on disk,
    // kept across a restart of workerd: a crash test starts again on the same directory.
    ...(persist ? { durableObjectsPersist: join(resolve(persist), "do") } : {}),
  });
  let url;
  let frontUrl;
  const directUrls = {};
  try {
    url = await mf.ready;
    if (front) frontUrl = new URL(await mf.unsafeGetDirectURL(front.name)).origin;
    for (const [name, w] of Object.entries(loaded)) {
      if (direct) directUrls[name] = new URL(await mf.unsafeGetDirectURL(name)).origin;
      const { index, manifest } = w;
      w.kv = (binding) => {
        if (!manifest.bindings.kv.includes(binding)) throw new Error(`kv: ${binding} is not a KV binding of ${name}`);
        return kvToolNamespace(mf, `W${index}_${binding}`);
      };
      delete w.index;
      if (w.seed) await seedKv({ getKVNamespace: w.kv }, w.seed);
      delete w.seed;
    }
  } catch (e) {
    await mf.dispose().catch(() => {});
    throw e;
  }
  return {
    url: new URL(url).origin,
    direct: directUrls,
    front: frontUrl,
    mf,
    workers: loaded,
    logs: output.logs,
    /** `coordinatorFaults`: "" (none), "error", "throw", "hang" or "reset:N", each alone or "@REGION" / "@global", several comma separated. */
    setCoordinatorFault: async (mode) => {
      if (!coordinatorFaults) throw new Error("startEdges: started without coordinatorFaults");
      await kvToolNamespace(mf, "COORDINATOR_CONTROL").put("mode", mode);
    },
    dispose: async () => {
      await mf.dispose();
      await output.close();
    },
  };
}

// ---- the demo of `understudy dev --demo` -------------------------------------------------

function show(title, r) {
  console.log(`\n=== ${title}`);
  console.log(`${r.method} ${r.url}`);
  console.log(`-> HTTP ${r.status} in ${r.elapsedMs.toFixed(1)} ms`);
  for (const [k, v] of [...r.headers].sort(([a], [b]) => a.localeCompare(b))) console.log(`${k}: ${v}`);
  console.log();
  let body = r.text;
  try {
    body = JSON.stringify(JSON.parse(r.text), null, 2);
  } catch {}
  console.log(body.length > 4_000 ? `${body.slice(0, 4_000)}\n… (${body.length} characters)` : body);
}

async function demoRequest(edgeUrl, recipe) {
  const headers = { ...(recipe.headers ?? {}) };
  if (recipe.token) {
    headers.authorization = `Bearer ${mintToken(devSecret(recipe.token.secret), recipe.token.claims)}`;
  }
  const url = `${edgeUrl}${recipe.path}`;
  const start = performance.now();
  const res = await fetch(url, { method: recipe.method ?? "GET", headers, signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  return { method: recipe.method ?? "GET", url, status: res.status, headers: res.headers, text, elapsedMs: performance.now() - start };
}

/**
 * One healthy request, then the origin is told to hang and the same request is made again:
 * both answers are printed with their headers. Returns the problems seen (empty when the
 * first answer is live and the second is a disclosed fallback).
 */
export async function demo(edgeUrl, originUrl, recipe) {
  const problems = [];
  const control = (method, body) =>
    fetch(`${originUrl}/__origin/fault`, {
      method,
      headers: { "content-type": "application/json" },
      body: body && JSON.stringify(body),
      signal: AbortSignal.timeout(5_000),
    });
  await control("DELETE");
  const healthy = await demoRequest(edgeUrl, recipe);
  show("1. Healthy: the simulated model answers in time", healthy);
  if (healthy.status !== 200 || healthy.headers.get("x-degraded") !== "false") {
    problems.push(`the healthy request got HTTP ${healthy.status}, X-Degraded: ${healthy.headers.get("x-degraded")}`);
  }
  const fault = recipe.fault ?? { kind: "hang" };
  await control("PUT", fault);
  let degraded;
  try {
    degraded = await demoRequest(edgeUrl, recipe);
  } finally {
    await control("DELETE");
  }
  show(`2. Degraded: the origin now ${fault.kind === "hang" ? "hangs (never answers)" : JSON.stringify(fault)}`, degraded);
  if (degraded.headers.get("x-degraded") !== "true" || degraded.headers.get("x-result-source") !== "fallback") {
    problems.push(
      `the degraded request got HTTP ${degraded.status}, X-Degraded: ${degraded.headers.get("x-degraded")}, ` +
        `X-Result-Source: ${degraded.headers.get("x-result-source")} (expected a fallback answer)`,
    );
  }
  return problems;
}

// ---- as a program ----------------------------------------------------------------------

async function main() {
  const { values } = parseArgs({
    options: {
      dist: { type: "string" },
      port: { type: "string", default: "8787" },
      origin: { type: "string" },
      isolates: { type: "string", default: "1" },
      "events-url": { type: "string" },
      persist: { type: "string" },
      seed: { type: "string" },
      kv: { type: "string", multiple: true, default: [] },
      verbose: { type: "boolean", default: false },
      "log-file": { type: "string" },
      recipe: { type: "string" },
      demo: { type: "boolean", default: false },
    },
  });
  if (!values.dist || (values.demo && !(values.origin && values.recipe))) {
    console.error("usage: node scripts/edge-server.mjs --dist DIR [--port N] [--origin URL] [--events-url URL] [--persist DIR] [--seed FILE] [--kv BINDING=FILE]... [--log-file FILE] [--recipe JSON [--demo]]");
    process.exit(2);
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`--port ${values.port}: not a port number`);
    process.exit(2);
  }
  let seed;
  if (values.seed) {
    try {
      seed = JSON.parse(await readFile(values.seed, "utf8"));
    } catch (e) {
      console.error(`--seed ${values.seed}: ${e.message}`);
      process.exit(2);
    }
  }
  // --kv BINDING=FILE: a `wrangler kv bulk put` file (what `understudy publish` writes).
  for (const spec of values.kv) {
    const at = spec.indexOf("=");
    if (at < 1) {
      console.error(`--kv ${spec}: write BINDING=FILE`);
      process.exit(2);
    }
    const [binding, file] = [spec.slice(0, at), spec.slice(at + 1)];
    try {
      const entries = JSON.parse(await readFile(file, "utf8"));
      if (!Array.isArray(entries)) throw new Error("not a JSON array of {key, value, metadata} (wrangler kv bulk put's format)");
      seed = { ...(seed ?? {}) };
      seed[binding] = [...(seed[binding] ?? []), ...entries];
    } catch (e) {
      console.error(`--kv ${spec}: ${e.message}`);
      process.exit(2);
    }
  }
  const isolates = Number(values.isolates);
  if (!Number.isInteger(isolates) || isolates < 1 || isolates > 64) {
    console.error(`--isolates ${values.isolates}: a whole number from 1 to 64`);
    process.exit(2);
  }
  if (isolates > 1) {
    // A fleet in one workerd: K copies of the Worker, each its own isolate on a loopback
    // port of its own, sharing KV and the Durable Objects (`understudy drill --isolates`).
    // The line lists every copy's address, the first first.
    const copies = Array.from({ length: isolates }, (_, i) => ({
      dist: values.dist,
      name: `isolate-${i}`,
      originUrl: values.origin,
      seed: i === 0 ? seed : undefined,
    }));
    const fleet = await startEdges(copies, { port, verbose: values.verbose, direct: true, shared: true, logFile: values["log-file"] });
    console.log(`edge listening on ${copies.map((c) => fleet.direct[c.name]).join(" ")}`);
    const stop = async () => {
      await fleet.dispose().catch(() => {});
      process.exit(0);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
    process.stdin.on("end", stop);
    process.stdin.resume();
    return;
  }
  const edge = await startEdge({
    dist: values.dist,
    port,
    originUrl: values.origin,
    eventsUrl: values["events-url"],
    persist: values.persist,
    seed,
    verbose: values.verbose,
    logFile: values["log-file"],
  });
  const recipe = values.recipe ? JSON.parse(values.recipe) : null;
  if (recipe && !values.demo) {
    const headers = Object.entries(recipe.headers ?? {}).map(([k, v]) => ` -H '${k}: ${v}'`);
    if (recipe.token) {
      const token = mintToken(devSecret(recipe.token.secret), recipe.token.claims, { ttlS: 24 * 3600 });
      headers.push(` -H 'Authorization: Bearer ${token}'`);
    }
    const method = (recipe.method ?? "GET") === "GET" ? "" : ` -X ${recipe.method}`;
    console.log(`Try it:\n  curl -i${method} '${edge.url}${recipe.path}'${headers.join("")}`);
  }
  // `understudy dev` waits for this exact line (and shows what came before it after its banner).
  console.log(`edge listening on ${edge.url}`);
  if (values.demo) {
    let problems;
    try {
      problems = await demo(edge.url, values.origin, recipe);
    } catch (e) {
      problems = [e.message];
    }
    await edge.dispose().catch(() => {});
    if (problems.length > 0) {
      console.error(`\ndemo: not what a working edge shows:\n  ${problems.join("\n  ")}`);
      process.exit(1);
    }
    console.log("\ndemo: the live answer and the disclosed fallback above are what a client sees.");
    process.exit(0);
  }
  holdUntilStopped(edge);
}

/**
 * Keeps a server a script started (anything with `dispose()`) until SIGINT, SIGTERM or the
 * end of stdin — the parent (`understudy dev`, `understudy drill`, the bench) holds our stdin
 * open while it runs, so the server exits with it — then disposes of it and exits 0.
 */
export function holdUntilStopped(server) {
  const stop = async () => {
    await server.dispose().catch(() => {});
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  process.stdin.on("end", stop);
  process.stdin.resume();
}

/** Runs `main` when the script of `meta` is the program: a failure is printed as `name: …`, exit 1. */
export function runAsProgram(meta, name, main) {
  if (meta.url !== `file://${process.argv[1]}`) return;
  main().catch((e) => {
    console.error(`${name}: ${e.stack ?? e}`);
    process.exit(1);
  });
}

runAsProgram(import.meta, "edge-server", main);
