// A/B of two built edges' CPU per healthy request: both run in ONE workerd (through
// scripts/bench-server.mjs, each on its own loopback port), a closed loop of N connections
// with a fresh user and bearer token per request (the load of tests/load.test.mjs) is
// pointed at A, then B, then A… in short slices, and the workerd process's CPU time
// (/proc/PID/task/*/schedstat) is read around each slice. What it prints: per side, the
// median CPU µs per answer over the slices, and the median of the paired differences
// (B − A, each pair a slice of A and the next of B) — slices cancel most of what the
// machine does meanwhile, which one long run of each side would not.
//
//   node scripts/ab-cpu.mjs --a DIST_A --b DIST_B [--pairs 12] [--slice-s 3] [--conns 16] [--users 200]
//        [--origin-latency-ms 25] [--path /v1/recommendations?category=audio]
//
// DIST_A, DIST_B: `understudy build` output directories (the same policy, different
// edges). A developer's tool for changes too small for `understudy bench`'s run-to-run
// noise; not run by the test suite.

import http from "node:http";
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { devSecret } from "./edge-server.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { values: a } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string" },
    pairs: { type: "string", default: "12" },
    "slice-s": { type: "string", default: "3" },
    conns: { type: "string", default: "16" },
    "origin-latency-ms": { type: "string", default: "25" },
    // `{n}` becomes the request's number: the retry-storm limit keys on the user and the
    // request, so a pool of users needs requests that differ.
    path: { type: "string", default: "/v1/recommendations?category=c{n}" },
    // Users drawn in turn (a pool): with a fresh user per request every live answer is also
    // a KV write-through, whose local (SQLite) cost buries the edge's own.
    users: { type: "string", default: "200" },
    issuer: { type: "string", default: "https://auth.mercado.example" },
    audience: { type: "string", default: "recommendations" },
  },
});
if (!a.a || !a.b) {
  console.error("usage: node scripts/ab-cpu.mjs --a DIST_A --b DIST_B [--pairs 12] [--slice-s 3]");
  process.exit(2);
}
const pairs = Math.min(Number(a.pairs), 100);
const sliceMs = Math.min(Number(a["slice-s"]), 60) * 1000;
const conns = Number(a.conns);
const bin = process.env.UNDERSTUDY_BIN ?? join(ROOT, "target", "release", "understudy");
const children = [];
process.on("exit", () => children.forEach((c) => c.exitCode === null && c.kill("SIGKILL")));

function start(cmd, args, ready) {
  const child = spawn(cmd, args, { cwd: ROOT, stdio: ["pipe", "pipe", "inherit"] });
  children.push(child);
  let text = "";
  return new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`${cmd} not ready:\n${text}`)), 60_000);
    child.stdout.on("data", (d) => {
      text += d;
      const m = ready.exec(text);
      if (m) {
        clearTimeout(t);
        res(m);
      }
    });
  });
}

const origin = (await start(bin, ["origin", "--listen", "127.0.0.1:0", "--latency-ms", a["origin-latency-ms"]], /origin listening on (http:\/\/[\d.:]+)/))[1];
const served = await start(
  process.execPath,
  [join(ROOT, "scripts", "bench-server.mjs"), "--origin", origin, "--worker", `a=${resolve(a.a)}`, "--worker", `b=${resolve(a.b)}`],
  /bench listening on .*\n/,
);
const line = served[0];
const pids = [...line.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]));
const url = (name) => new URL([...line.matchAll(/ (\w+)=(http:\/\/[\d.:]+)/g)].find((m) => m[1] === name)[2]);

const cpuNs = () =>
  pids.reduce((sum, pid) => {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        sum += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
      } catch {
        /* a thread that just ended */
      }
    }
    return sum;
  }, 0);

const secret = devSecret("TOKEN_HMAC_KEY");
const head = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url");
const iat = Math.floor(Date.now() / 1000);
const tokens = Array.from({ length: Math.max(1, Number(a.users)) }, (_, i) => {
  const body = Buffer.from(JSON.stringify({ iat, exp: iat + 3600, iss: a.issuer, aud: a.audience, sub: `ab-${process.pid}-${i}` })).toString("base64url");
  return `${head}.${body}.${createHmac("sha256", secret).update(`${head}.${body}`).digest("base64url")}`;
});
let n = 0;
const token = () => tokens[n++ % tokens.length];

const agent = new http.Agent({ keepAlive: true, maxSockets: conns });
function one(u) {
  return new Promise((res) => {
    const req = http.request({ host: u.hostname, port: u.port, path: a.path.replace("{n}", String(n)), agent, headers: { authorization: `Bearer ${token()}` }, timeout: 10_000 }, (r) => {
      r.resume();
      r.on("end", () => res(r.statusCode === 200 && r.headers["x-degraded"] === "false"));
    });
    req.on("error", () => res(false));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

async function slice(u) {
  const until = Date.now() + sliceMs;
  let live = 0;
  let all = 0;
  const before = cpuNs();
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (Date.now() < until) {
        all++;
        if (await one(u)) live++;
      }
    }),
  );
  return { us: (cpuNs() - before) / 1000 / all, all, live };
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const ua = url("a");
const ub = url("b");
for (let i = 0; i < 30; i++) await Promise.all([one(ua), one(ub)]); // warm both isolates
const rows = [];
for (let i = 0; i < pairs; i++) {
  const sa = await slice(ua);
  const sb = await slice(ub);
  rows.push({ a: sa, b: sb });
  console.error(`pair ${i + 1}: A ${sa.us.toFixed(1)} µs (${sa.all}, ${sa.live} live) · B ${sb.us.toFixed(1)} µs (${sb.all}, ${sb.live} live)`);
}
const out = {
  a: resolve(a.a),
  b: resolve(a.b),
  pairs,
  slice_s: sliceMs / 1000,
  conns,
  median_us: { a: +median(rows.map((r) => r.a.us)).toFixed(1), b: +median(rows.map((r) => r.b.us)).toFixed(1) },
  median_diff_b_minus_a_us: +median(rows.map((r) => r.b.us - r.a.us)).toFixed(1),
  live_share: { a: rows.reduce((s, r) => s + r.a.live, 0) / rows.reduce((s, r) => s + r.a.all, 0), b: rows.reduce((s, r) => s + r.b.live, 0) / rows.reduce((s, r) => s + r.b.all, 0) },
};
console.log(JSON.stringify(out));
agent.destroy();
process.exit(0);
