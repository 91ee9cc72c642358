// A bounded closed-loop load generator for the edge, run as a process of its own (never in
// the process that hosts workerd), the way an outside client loads it. Every request is
// GET ROUTE?category=C with a FRESH user (`sub`) and a bearer token minted for that user
// (HS256, the policy's issuer/audience, the development secret scripts/edge-server.mjs
// gives TOKEN_HMAC_KEY). Used by tests/load-open.test.mjs (issue 23: the header-less 500s of
// the breaker-open path) and tests/load.test.mjs (the breaker opening on a healthy origin).
//
// It records every response that is not enveloped: status 500, or no X-Correlation-ID, or no
// X-Policy-Version, or no X-Breaker-Mode (or a transport error), with its status, all
// headers and its body, and a per-second timeline of statuses / X-Degraded /
// X-Degraded-Reason / X-Breaker-Mode. Every transport error (a reset, a refused connection)
// comes with its socket's story (`transport_errors`: when it opened, the answers it carried),
// and `sockets_opened` counts the connections: a keep-alive server that never closes one
// leaves the client exactly --conns.
//
//   node scripts/load.mjs --url http://127.0.0.1:8787 [--conns 16] [--duration-s 30]
//        [--max 50000] [--out FILE.json] [--header 'name: value' ...]
//        [--odd] [--same-user] [--timeout-ms 10000] [--cat-mode fixed|rotate]
//
// --odd   mixes in odd but legal request headers on 1 request in 10: a very long
//         X-Correlation-ID, a malformed traceparent, a huge tracestate, a cookie
//         (values the client sends; the edge must still answer with its envelope).
// Exit code: 0, or 3 when any bare/unenveloped answer was seen.

import http from "node:http";
import { createHmac } from "node:crypto";
import { writeFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";

const { values: a } = parseArgs({
  options: {
    url: { type: "string", default: "http://127.0.0.1:8787" },
    route: { type: "string", default: "/v1/recommendations" },
    conns: { type: "string", default: "16" },
    "duration-s": { type: "string", default: "30" },
    max: { type: "string", default: "50000" },
    out: { type: "string" },
    header: { type: "string", multiple: true, default: [] },
    secret: { type: "string", default: "dev-token-hmac-key" },
    issuer: { type: "string", default: "https://auth.mercado.example" },
    audience: { type: "string", default: "recommendations" },
    odd: { type: "boolean", default: false },
    "same-user": { type: "boolean", default: false },
    "timeout-ms": { type: "string", default: "10000" },
    tag: { type: "string", default: `${process.pid}` },
    // "fixed": the four catalog categories; "rotate": N categories whose names change every
    // --rotate-ms (so the category tier's key is cold, and read by several requests at once,
    // every period instead of once per 30 s kvcache lifetime).
    "cat-mode": { type: "string", default: "fixed" },
    "rotate-n": { type: "string", default: "4" },
    "rotate-ms": { type: "string", default: "1000" },
  },
});
const conns = Number(a.conns);
const durationMs = Math.min(Number(a["duration-s"]), 300) * 1000; // hard cap 5 min
const max = Math.min(Number(a.max), 200_000); // hard cap
const timeoutMs = Number(a["timeout-ms"]);
const base = new URL(a.url);
const extra = Object.fromEntries(
  a.header.map((h) => {
    const i = h.indexOf(":");
    return [h.slice(0, i).trim().toLowerCase(), h.slice(i + 1).trim()];
  }),
);
const CATEGORIES = ["audio", "bags", "computing", "kitchen"];

const b64url = (s) => Buffer.from(s).toString("base64url");
const HEAD = b64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
function token(sub) {
  const iat = Math.floor(Date.now() / 1000);
  const payload = b64url(JSON.stringify({ iat, exp: iat + 3600, iss: a.issuer, aud: a.audience, sub }));
  const sig = createHmac("sha256", a.secret).update(`${HEAD}.${payload}`).digest("base64url");
  return `${HEAD}.${payload}.${sig}`;
}

function oddHeaders(n) {
  switch (n % 6) {
    case 0: return { "x-correlation-id": "c-" + "x".repeat(4000) + n };
    case 1: return { traceparent: "00-zzzz-not-a-trace-01" };
    case 2: return { tracestate: Array.from({ length: 64 }, (_, i) => `k${i}=${"v".repeat(200)}`).join(",") };
    case 3: return { "x-correlation-id": "weird id;with=chars\t" + n };
    case 4: return { cookie: "session=" + "a".repeat(3000) };
    default: return { traceparent: "00-" + "a".repeat(32) + "-" + "b".repeat(16) + "-01", "x-correlation-id": "ok-" + n };
  }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: conns, maxFreeSockets: conns });
const t0 = Date.now();
let sent = 0;
const status = {};
const timeline = {}; // second → { status: count, degraded-reason: count }
const anomalies = [];
const errors = {};
const modes = {}; // X-Breaker-Mode → answers
const latencies = [];
const sockets = new Set();
// Each socket's story: when it opened and how many answers it carried. A transport error is
// recorded with its socket's: resets that arrive together on many sockets are one event on
// the server's side (a process restarting); a reset on an old socket while the client opened
// more sockets than --conns is the keep-alive race (a request written into a connection the
// server was closing: a keep-alive server that never closes one opens exactly --conns).
const socketInfo = new Map(); // socket → { id, opened_ms, answers }
const transportErrors = [];
function track(socket) {
  if (!socketInfo.has(socket)) socketInfo.set(socket, { id: socketInfo.size, opened_ms: Date.now() - t0, answers: 0 });
  return socketInfo.get(socket);
}

function one(n) {
  const sub = a["same-user"] ? `u-${a.tag}` : `u-${a.tag}-${n}`;
  const cat = a["cat-mode"] === "rotate"
    ? `r${Math.floor(Date.now() / Number(a["rotate-ms"])) % 100000}-${n % Number(a["rotate-n"])}`
    : CATEGORIES[n % CATEGORIES.length];
  const headers = { authorization: `Bearer ${token(sub)}`, ...extra, ...(a.odd && n % 10 === 0 ? oddHeaders(n / 10) : {}) };
  const started = Date.now();
  return new Promise((resolve) => {
    const req = http.request(
      { host: base.hostname, port: base.port, path: `${a.route}?category=${cat}`, method: "GET", headers, agent, timeout: timeoutMs },
      (res) => {
        sockets.add(res.socket);
        if (info) info.answers++;
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          const ms = Date.now() - started;
          latencies.push(ms);
          const body = Buffer.concat(chunks).toString("utf8");
          const h = res.headers;
          status[res.statusCode] = (status[res.statusCode] ?? 0) + 1;
          const sec = Math.floor((started - t0) / 1000);
          const slot = (timeline[sec] ??= {});
          const key = `${res.statusCode} ${h["x-degraded"] ?? "-"} ${h["x-degraded-reason"] ?? ""} ${h["x-breaker-mode"] ?? "?"}`.trim();
          slot[key] = (slot[key] ?? 0) + 1;
          modes[h["x-breaker-mode"] ?? "?"] = (modes[h["x-breaker-mode"] ?? "?"] ?? 0) + 1;
          if (res.statusCode === 500 || !h["x-correlation-id"] || !h["x-policy-version"] || !h["x-breaker-mode"]) {
            anomalies.push({
              n, at_ms: started - t0, wall: new Date(started).toISOString(), ms, status: res.statusCode,
              statusMessage: res.statusMessage, rawHeaders: res.rawHeaders, body: body.slice(0, 4000),
              sent_headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v.length > 120 ? `${v.slice(0, 60)}…(${v.length})` : v])),
              sub,
            });
            console.error(`ANOMALY n=${n} t=${started - t0}ms status=${res.statusCode} headers=${JSON.stringify(res.rawHeaders)} body=${JSON.stringify(body.slice(0, 300))}`);
          }
          resolve();
        });
        res.on("error", (e) => { errors[e.code ?? e.message] = (errors[e.code ?? e.message] ?? 0) + 1; resolve(); });
      },
    );
    let info = null;
    req.on("socket", (socket) => (info = track(socket)));
    req.on("timeout", () => req.destroy(new Error("client timeout")));
    req.on("error", (e) => {
      const k = e.code ?? e.message;
      errors[k] = (errors[k] ?? 0) + 1;
      anomalies.push({ n, at_ms: started - t0, wall: new Date(started).toISOString(), error: k, sub });
      transportErrors.push({
        code: k, at_ms: Date.now() - t0, sent_at_ms: started - t0, socket: info?.id ?? null,
        answers_before_on_socket: info?.answers ?? null, socket_opened_ms: info?.opened_ms ?? null,
      });
      resolve();
    });
    req.end();
  });
}

async function worker() {
  while (Date.now() - t0 < durationMs && sent < max) {
    await one(sent++);
  }
}

await Promise.all(Array.from({ length: conns }, worker));
const elapsed = (Date.now() - t0) / 1000;
latencies.sort((x, y) => x - y);
const q = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))];
const summary = {
  url: a.url, conns, started_wall_ms: t0, sent, elapsed_s: elapsed, rps: +(sent / elapsed).toFixed(1), status, errors,
  latency_ms: { p50: q(0.5), p95: q(0.95), p99: q(0.99), max: latencies.at(-1) },
  sockets_used: sockets.size, sockets_opened: socketInfo.size, transport_errors: transportErrors.slice(0, 500),
  modes, unenveloped: anomalies.length, anomalies, timeline,
};
if (a.out) {
  mkdirSync(dirname(a.out), { recursive: true });
  writeFileSync(a.out, JSON.stringify(summary, null, 1));
}
console.log(JSON.stringify({ ...summary, anomalies: anomalies.length, timeline: undefined, transport_errors: undefined }));
agent.destroy();
process.exit(anomalies.length > 0 ? 3 : 0);
