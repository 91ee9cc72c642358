import { request, createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { startEdge } from "./edge-server.mjs";
const [dist, origin, path, toksFile, n = "10", reps = "3"] = process.argv.slice(2);
const arrivals = [];
let T0 = 0;
const proxy = createServer(async (req, res) => {
  arrivals.push(performance.now() - T0);
  const chunks = []; for await (const c of req) chunks.push(c);
  const r = await fetch(origin, { method: req.method, headers: { "content-type": "application/json", authorization: req.headers.authorization ?? "" }, body: Buffer.concat(chunks) });
  const body = Buffer.from(await r.arrayBuffer());
  res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" });
  res.end(body);
});
await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
await fetch(origin, { method: "POST", body: "{}" }).then((r) => r.arrayBuffer());
const proxyUrl = `http://127.0.0.1:${proxy.address().port}`;
const toks = (await readFile(toksFile, "utf8")).split("\n").filter(Boolean);
const firsts = [];
for (let rep = 0; rep < Number(reps); rep++) {
  const edge = await startEdge({ dist, originUrl: proxyUrl, verbose: !!process.env.V });
  const url = `${edge.url}${path}`;
  const get = (i) => new Promise((res, rej) => {
    const q = request(url, { headers: { authorization: `Bearer ${toks[(rep * 10 + i) % toks.length]}` }, agent: false }, (r) => {
      r.on("data", () => {}); r.on("end", () => res(r)); r.on("error", rej);
    });
    q.on("error", rej); q.end();
  });
  arrivals.length = 0;
  const t0 = performance.now(); T0 = t0;
  const out = await Promise.all(Array.from({ length: Number(n) }, async (_, i) => {
    const r = await get(i);
    return `${(performance.now() - t0).toFixed(1)}${r.headers["x-degraded-reason"] ? ":" + r.headers["x-degraded-reason"] : ""}${r.statusCode !== 200 ? "!" + r.statusCode : ""}`;
  }));
  firsts.push(arrivals[0]);
  if (process.env.ALL) console.log(`answers ${out.join(" ")} | origin calls at ${arrivals.map((a) => a.toFixed(1)).join(" ")}`);
  await edge.dispose();
}
console.log(`${dist.split("/").pop().padEnd(16)} first origin call at ${firsts.map((a) => a?.toFixed(1)).join(" ")} ms`);
proxy.close();
