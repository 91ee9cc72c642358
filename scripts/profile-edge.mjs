// Where a Worker spends its CPU per request: runs a built dist in workerd (Miniflare) with
// the V8 inspector on, drives a bounded closed loop of requests at it on loopback, samples
// with the inspector's CPU profiler, and prints the functions with the most self time.
//
//   node scripts/profile-edge.mjs --dist DIR --origin URL --path /v1/... [--header "k: v" …]
//        [--seconds 5] [--connections 8] [--top 40] [--seed FILE] [--tokens FILE]
//
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

// Warm up (JIT, isolate start), then profile a closed loop.
const url = `${edge.url}${values.path}`;
for (let i = 0; i < 200; i++) await (await fetch(url, { headers: headersOf() })).arrayBuffer();
await send("Profiler.enable");
await send("Profiler.setSamplingInterval", { interval: 50 });
await send("Profiler.start");
let done = 0;
const answers = new Map(); // "status reason" → count: what the profiled requests measured
const until = Date.now() + seconds * 1000;
await Promise.all(
  Array.from({ length: Number(values.connections) }, async () => {
    while (Date.now() < until) {
      const r = await fetch(url, { headers: headersOf() });
      await r.arrayBuffer();
      const kind = `${r.status} ${r.headers.get("x-degraded-reason") ?? (r.headers.get("x-degraded") === "false" ? "live" : "")}`.trim();
      answers.set(kind, (answers.get(kind) ?? 0) + 1);
      done++;
    }
  }),
);
const { profile } = await send("Profiler.stop");
ws.close();
await edge.dispose();

// Self time per function: samples × interval, attributed through node ids.
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
const deltas = profile.timeDeltas;
profile.samples.forEach((nodeId, i) => {
  const n = byId.get(nodeId);
  const f = n.callFrame;
  const name = `${f.functionName || "(anonymous)"}  ${f.url ? f.url.split("/").pop() + ":" + f.lineNumber + ":" + f.columnNumber : ""}`;
  self.set(name, (self.get(name) ?? 0) + (deltas[i] ?? 0));
});
const total = [...self.values()].reduce((a, b) => a + b, 0);
const idle = [...self.entries()].filter(([k]) => /^\((idle|program|garbage collector)\)/.test(k)).reduce((a, [, v]) => a + v, 0);
console.log(`${done} requests in ${seconds} s; profiled ${(total / 1000).toFixed(0)} ms, of which idle/program/GC ${(idle / 1000).toFixed(0)} ms`);
console.log(`busy µs per request: ${((total - idle) / done).toFixed(1)}`);
console.log(`answers: ${[...answers].map(([k, n]) => `${k} ×${n}`).join(", ")}`);
for (const [name, us] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
  console.log(`${(us / done).toFixed(2).padStart(9)} µs/req  ${((us * 100) / total).toFixed(1).padStart(5)}%  ${name}`);
}
