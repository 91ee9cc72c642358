// Where a Worker spends its CPU per request: runs a built dist in workerd (Miniflare) with
// the V8 inspector on, drives a bounded closed loop of requests at it on loopback, samples
// with the inspector's CPU profiler, and prints the functions with the most self time.
//
//   node scripts/profile-edge.mjs --dist DIR --origin URL --path /v1/... [--header "k: v" …]
//        [--seconds 5] [--connections 8] [--top 40] [--seed FILE] [--tokens FILE] [--first N] [--timeline]
//
// `--first N`: profile the isolate's first N requests instead (sent together, one connection
// each, on the fresh isolate, no warm-up): where a cold first wave's time goes. Each
// answer's time is printed. `--timeline` also prints every busy sample in order, with its
// time and its stack (leaf first): what ran when, for instance between a first request's
// arrival and its origin call.
// `--tokens FILE`: bearer tokens, one per line, taken in turn as each request's
// `authorization` (many users, so a per-user retry-storm limit does not answer instead).
// The answers' statuses and degraded reasons are tallied and printed: what was profiled.
//
// Wasm functions show by name when the module kept its name section (build the edge with
// CARGO_PROFILE_RELEASE_STRIP=false). A developer's tool: not run by the test suite.

import { parseArgs } from "node:util";
import { readFile } from "node:fs/promises";
import WebSocket from "ws";
import { startEdge } from "./edge-server.mjs";

const { values } = parseArgs({
  options: {
    dist: { type: "string" },
    origin: { type: "string" },
    path: { type: "string", default: "/" },
    header: { type: "string", multiple: true, default: [] },
    seconds: { type: "string", default: "5" },
    connections: { type: "string", default: "8" },
    top: { type: "string", default: "40" },
    seed: { type: "string" },
    tokens: { type: "string" },
    first: { type: "string" },
    timeline: { type: "boolean", default: false },
  },
});
if (!values.dist || !values.origin) {
  console.error("usage: node scripts/profile-edge.mjs --dist DIR --origin URL --path P [--header 'k: v'] [--seconds S]");
  process.exit(2);
}
const headers = Object.fromEntries(values.header.map((h) => h.split(/:\s*/, 2)));
const seconds = Math.min(Number(values.seconds), 120);
const inspectorPort = 9229 + Math.floor(Math.random() * 500);
const tokens = values.tokens ? (await readFile(values.tokens, "utf8")).split("\n").filter(Boolean) : [];
let turn = 0;
const headersOf = () => (tokens.length ? { ...headers, authorization: `Bearer ${tokens[turn++ % tokens.length]}` } : headers);
const seed = values.seed ? JSON.parse(await readFile(values.seed, "utf8")) : undefined;
const edge = await startEdge({ dist: values.dist, originUrl: values.origin, seed, extra: { inspectorPort } });

// The inspector lists one target per worker.
const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
const ws = new WebSocket(targets[0].webSocketDebuggerUrl);
await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
let id = 0;
const pending = new Map();
ws.on("message", (m) => {
  const msg = JSON.parse(m);
  if (msg.id && pending.has(msg.id)) {
    pending.get(msg.id)(msg.result ?? msg.error);
    pending.delete(msg.id);
  }
});
const send = (method, params = {}) =>
  new Promise((r) => {
    const n = ++id;
    pending.set(n, r);
    ws.send(JSON.stringify({ id: n, method, params }));
  });

const url = `${edge.url}${values.path}`;
const first = values.first === undefined ? 0 : Math.min(Math.max(Number(values.first) || 1, 1), 100);
// Warm up (JIT, isolate start), then profile a closed loop; or, with --first, nothing.
if (!first) for (let i = 0; i < 200; i++) await (await fetch(url, { headers: headersOf() })).arrayBuffer();
await send("Profiler.enable");
const interval = first ? 20 : 50;
await send("Profiler.setSamplingInterval", { interval });
await send("Profiler.start");
let done = 0;
const answers = new Map(); // "status reason" → count: what the profiled requests measured
const kindOf = (r) =>
  `${r.status} ${r.headers.get("x-degraded-reason") ?? (r.headers.get("x-degraded") === "false" ? "live" : "")}`.trim();
if (first) {
  // One connection each (no agent: a socket per request), all sent at once.
  const { request } = await import("node:http");
  const get = () =>
    new Promise((res, rej) => {
      const q = request(url, { headers: headersOf(), agent: false }, (r) => {
        r.on("data", () => {});
        r.on("end", () => res(r));
        r.on("error", rej);
      });
      q.on("error", rej);
      q.end();
    });
  const t0 = performance.now();
  const times = await Promise.all(
    Array.from({ length: first }, async () => {
      const r = await get();
      const ms = performance.now() - t0;
      const kind = `${r.statusCode} ${r.headers["x-degraded-reason"] ?? (r.headers["x-degraded"] === "false" ? "live" : "")}`.trim();
      answers.set(kind, (answers.get(kind) ?? 0) + 1);
      done++;
      return ms;
    }),
  );
  console.log(`first wave of ${first}: answers at ${times.map((t) => t.toFixed(1)).join(", ")} ms`);
} else {
  const until = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: Number(values.connections) }, async () => {
      while (Date.now() < until) {
        const r = await fetch(url, { headers: headersOf() });
        await r.arrayBuffer();
        answers.set(kindOf(r), (answers.get(kindOf(r)) ?? 0) + 1);
        done++;
      }
    }),
  );
}
const { profile } = await send("Profiler.stop");
ws.close();
await edge.dispose();

if (values.timeline) {
  // Each busy sample's time (ms since the profile started) and stack, leaf first.
  const byIdT = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let t = profile.startTime;
  const lines = [];
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i] ?? 0;
    const names = [];
    for (let k = id; k !== undefined && names.length < 6; k = parent.get(k)) {
      const f = byIdT.get(k).callFrame;
      names.push((f.functionName || "(anon)").replace(/::h[0-9a-f]{16}$/, "").slice(0, 60));
    }
    if (!/^\((idle|program)\)$/.test(names[0])) lines.push(`${((t - profile.startTime) / 1000).toFixed(2).padStart(8)}  ${names.join(" < ")}`);
  });
  console.log(lines.join("\n"));
}
// Self time per function: samples × interval, attributed through node ids.
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
const deltas = profile.timeDeltas;
profile.samples.forEach((nodeId, i) => {
  const n = byId.get(nodeId);
  const f = n.callFrame;
  const name = `${f.functionName || "(anonymous)"}  ${f.url ? f.url.split("/").pop() + ":" + f.lineNumber + ":" + f.columnNumber : ""}`;
  // A sample's delta is the time since the one before; after a stall of the sampler (the
  // first sample of --first mode follows the idle wait before the wave) it says nothing
  // about the function sampled, so a delta counts for at most four intervals.
  self.set(name, (self.get(name) ?? 0) + Math.min(deltas[i] ?? 0, 4 * interval));
});
const total = [...self.values()].reduce((a, b) => a + b, 0);
const idle = [...self.entries()].filter(([k]) => /^\((idle|program|garbage collector)\)/.test(k)).reduce((a, [, v]) => a + v, 0);
console.log(`${done} requests in ${seconds} s; profiled ${(total / 1000).toFixed(0)} ms, of which idle/program/GC ${(idle / 1000).toFixed(0)} ms`);
console.log(`busy µs per request: ${((total - idle) / done).toFixed(1)}`);
console.log(`answers: ${[...answers].map(([k, n]) => `${k} ×${n}`).join(", ")}`);
for (const [name, us] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
  console.log(`${(us / done).toFixed(2).padStart(9)} µs/req  ${((us * 100) / total).toFixed(1).padStart(5)}%  ${name}`);
}
