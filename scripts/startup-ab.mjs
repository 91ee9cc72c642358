// A/B of two built edges' start-up: each `understudy build` output directory started in a
// fresh workerd (through scripts/edge-server.mjs, as `understudy dev` and the tests start it),
// alternately, `--runs` times each; what it prints per side: the median time from spawn to
// ready (Miniflare's `ready`: workerd listening, the module instantiated) and of the first
// request's answer (the engine built, a request without a token refused before any I/O: no
// origin is reached). A developer's tool; not run by the test suite.
//
//   node scripts/startup-ab.mjs --a DIST_A --b DIST_B [--runs 8]
import { parseArgs } from "node:util";
import { startEdge } from "./edge-server.mjs";

const { values: a } = parseArgs({ options: { a: { type: "string" }, b: { type: "string" }, runs: { type: "string", default: "8" } } });
if (!a.a || !a.b) {
  console.error("usage: node scripts/startup-ab.mjs --a DIST_A --b DIST_B [--runs 8]");
  process.exit(2);
}
const runs = Math.max(1, Math.min(Number(a.runs), 50));
const seen = { a: [], b: [] };
for (let i = 0; i < runs; i++) {
  for (const side of i % 2 ? ["b", "a"] : ["a", "b"]) {
    const t0 = performance.now();
    const edge = await startEdge({ dist: a[side], originUrl: "http://127.0.0.1:9" });
    const ready = performance.now() - t0;
    const t1 = performance.now();
    const r = await fetch(`${edge.url}/v1/recommendations?category=audio`);
    await r.text();
    seen[side].push({ ready, first: performance.now() - t1, status: r.status });
    await edge.dispose();
  }
}
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const out = {};
for (const side of ["a", "b"]) {
  out[side] = {
    dist: a[side],
    ready_ms: +median(seen[side].map((x) => x.ready)).toFixed(1),
    first_answer_ms: +median(seen[side].map((x) => x.first)).toFixed(1),
    statuses: [...new Set(seen[side].map((x) => x.status))],
  };
}
console.log(JSON.stringify({ runs, ...out }));
