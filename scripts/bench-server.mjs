// `understudy bench`'s runtime: the built edge and the bare pass-through Worker in ONE
// Miniflare instance (one workerd process) on one loopback port, routed by Host header —
//   Host: edge.bench → the edge (also the default),  Host: bare.bench → the bare Worker —
// so both are measured interleaved against the same workerd (scripts/edge-server.mjs
// startEdges does the work).
//
//   node scripts/bench-server.mjs --edge DIR --bare DIR --origin URL [--port N] [--verbose]
//
// Prints "bench listening on URL" when both are up; exits when stdin closes.

import { parseArgs } from "node:util";
import { startEdges } from "./edge-server.mjs";

const { values } = parseArgs({
  options: {
    edge: { type: "string" },
    bare: { type: "string" },
    origin: { type: "string" },
    port: { type: "string", default: "0" },
    verbose: { type: "boolean", default: false },
  },
});
if (!values.edge || !values.bare || !values.origin) {
  console.error("usage: node scripts/bench-server.mjs --edge DIR --bare DIR --origin URL [--port N]");
  process.exit(2);
}
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port ${values.port}: not a port number`);
  process.exit(2);
}
let edges;
try {
  edges = await startEdges(
    [
      { name: "understudy-edge", dist: values.edge, routes: ["edge.bench/*"], originUrl: values.origin },
      { name: "understudy-bare", dist: values.bare, routes: ["bare.bench/*"], originUrl: values.origin },
    ],
    { port, verbose: values.verbose },
  );
} catch (e) {
  console.error(`bench-server: ${e.stack ?? e}`);
  process.exit(1);
}
console.log(`bench listening on ${edges.url}`);
const stop = async () => {
  await edges.dispose().catch(() => {});
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
process.stdin.on("end", stop);
process.stdin.resume();
