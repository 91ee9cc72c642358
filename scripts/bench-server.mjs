// `understudy bench`'s runtime: several Workers — the built edge in its variants, the bare
// pass-through Worker and the hand-written JS peer — in ONE Miniflare instance (one workerd
// process) on one loopback port, routed by Host header (`NAME.bench` → worker NAME), so
// they are measured interleaved against the same runtime (scripts/edge-server.mjs
// startEdges does the work).
//
//   node scripts/bench-server.mjs --origin URL --worker NAME=DIR [--worker NAME=DIR …]
//        [--seed NAME=FILE …] [--port N] [--verbose]
//
// Prints "bench listening on URL pid=WORKERD_PID… NAME=URL…" when all are up: the routed
// URL, the pids of the workerd processes (so the bench can read their CPU time) and each
// worker's direct URL (its own loopback port, without Miniflare's routing entry worker,
// which no deployed Worker pays for; the bench measures through these). Exits when stdin
// closes.

import { parseArgs } from "node:util";
import { readFile, readdir } from "node:fs/promises";
import { holdUntilStopped, startEdges } from "./edge-server.mjs";

const { values } = parseArgs({
  options: {
    worker: { type: "string", multiple: true, default: [] },
    seed: { type: "string", multiple: true, default: [] },
    origin: { type: "string" },
    port: { type: "string", default: "0" },
    verbose: { type: "boolean", default: false },
  },
});
const usage = "usage: node scripts/bench-server.mjs --origin URL --worker NAME=DIR [--worker NAME=DIR …] [--seed NAME=FILE …] [--port N]";
const pairs = (list, what) =>
  list.map((w) => {
    const i = w.indexOf("=");
    if (i <= 0) {
      console.error(`--${what} ${w}: expected NAME=PATH\n${usage}`);
      process.exit(2);
    }
    return [w.slice(0, i), w.slice(i + 1)];
  });
const workers = pairs(values.worker, "worker");
if (workers.length === 0 || !values.origin) {
  console.error(usage);
  process.exit(2);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port ${values.port}: not a port number`);
  process.exit(2);
}
const seeds = Object.fromEntries(pairs(values.seed, "seed"));

/** The pids of the workerd processes under this one (Linux /proc; empty elsewhere). */
async function workerdPids() {
  const out = [];
  let entries = [];
  try {
    entries = await readdir("/proc");
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = await readFile(`/proc/${e}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (comm.startsWith("workerd") && ppid === process.pid) out.push(Number(e));
    } catch {
      // gone, or not ours
    }
  }
  return out;
}

let edges;
try {
  const list = [];
  for (const [name, dist] of workers) {
    const seed = seeds[name] ? JSON.parse(await readFile(seeds[name], "utf8")) : undefined;
    list.push({ name, dist, routes: [`${name}.bench/*`], originUrl: values.origin, seed });
  }
  edges = await startEdges(list, { port, verbose: values.verbose, direct: true });
} catch (e) {
  console.error(`bench-server: ${e.stack ?? e}`);
  process.exit(1);
}
const pids = await workerdPids();
const direct = Object.entries(edges.direct).map(([name, url]) => `${name}=${url}`);
console.log(`bench listening on ${edges.url} ${pids.map((p) => `pid=${p}`).join(" ")} ${direct.join(" ")}`.trim());
holdUntilStopped(edges);
