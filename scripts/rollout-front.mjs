// The local front of `understudy drill --rollout` (ADR 012): two releases of one Worker — the
// old and the new version — as real Workers in one workerd, behind a front Worker that splits
// requests between them the way a Cloudflare gradual deployment does:
//   - `Cloudflare-Workers-Version-Overrides: <worker>="<version>"` naming one of the two
//     versions sends the request there (an override that cannot apply is ignored);
//   - `Cloudflare-Workers-Version-Key: K` assigns by a hash of K against the percentage, so a
//     key stays on one version, and keys already on the new version stay as it grows;
//   - otherwise each request independently, by the percentage.
// Locally a version's ID is its release ID (what its answers' `X-Policy-Version` says).
//
// The front also counts each version's answers as the Analytics Engine query of
// docs/rollout.md ("The queries it sends") does — answers (every status but 4xx), degraded
// (`X-Degraded: true`, or a 5xx), unavailable (a 5xx), latency in the histogram buckets of
// `release::rollout::latency` — and answers the controller's two calls:
//   POST /__rollout/deploy   {"new_percent": P}     → the split, like `versions deploy`
//   GET  /__rollout/figures?from=MS&to=MS          → {"old": Figures, "new": Figures}
//   GET  /__rollout/state                          → {worker, old, new, new_percent, deployments}
//
// As a program: node scripts/rollout-front.mjs --old DIR --new DIR [--origin URL]
//   [--seed FILE] [--port N]; prints "edge listening on URL" (the front's address).

import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { holdUntilStopped, runAsProgram, startEdges } from "./edge-server.mjs";

/** The front Worker. Its state lives in the isolate (one, locally) for the drill's length. */
export const FRONT = `
const RATIO = 1.1, TOP = 116, KEEP_MS = 3600000;
let split = { new_percent: 0, deployments: [] };
let answers = [];  // [t, version (0 old, 1 new), degraded, unavailable, bucket]
function bucket(ms) {
  if (!(ms >= 1)) return 0;
  return Math.min(TOP, Math.floor(Math.log(ms) / Math.log(RATIO)) + 1);
}
function fnv1a(s) {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(s)) { h ^= b; h = Math.imul(h, 0x01000193) >>> 0; }
  return h;
}
// An RFC 8941 dictionary of string members (what an override header carries):
// name="value" members, comma-separated, each with optional ;parameters (ignored). A header
// that does not parse is ignored whole, as the RFC asks.
function overrides(text) {
  const out = {};
  if (!text) return out;
  let i = 0;
  const ws = () => { while (text[i] === " " || text[i] === "\\t") i++; };
  const key = () => {
    const m = /^[a-z*][a-z0-9_.*-]*/.exec(text.slice(i));
    if (!m) throw new Error("key");
    i += m[0].length;
    return m[0];
  };
  const str = () => {
    if (text[i] !== '"') throw new Error("string");
    let v = "";
    for (i++; i < text.length; i++) {
      const c = text[i];
      if (c === "\\\\") { const n = text[++i]; if (n !== '"' && n !== "\\\\") throw new Error("escape"); v += n; continue; }
      if (c === '"') { i++; return v; }
      v += c;
    }
    throw new Error("unterminated");
  };
  const bare = () => { const m = /^[^;,\\s]*/.exec(text.slice(i)); i += m[0].length; };
  try {
    for (;;) {
      ws();
      const k = key();
      if (text[i] !== "=") throw new Error("=");
      i++;
      out[k] = str();
      while (text[i] === ";") { i++; key(); if (text[i] === "=") { i++; text[i] === '"' ? str() : bare(); } }
      ws();
      if (i >= text.length) return out;
      if (text[i] !== ",") throw new Error(",");
      i++;
    }
  } catch {
    return {};
  }
}
function choose(req, env) {
  const o = overrides(req.headers.get("cloudflare-workers-version-overrides"))[env.WORKER];
  if (o === env.OLD_ID) return 0;
  if (o === env.NEW_ID) return 1;
  const key = req.headers.get("cloudflare-workers-version-key");
  const roll = key ? fnv1a(key) % 100 : Math.random() * 100;
  return roll < split.new_percent ? 1 : 0;
}
function figures(from, to) {
  const out = [0, 1].map(() => ({ answers: 0, degraded: 0, unavailable: 0, latency: {} }));
  for (const [t, v, d, u, b] of answers) {
    if (t < from || t >= to) continue;
    const f = out[v];
    f.answers++; f.degraded += d; f.unavailable += u;
    f.latency[b] = (f.latency[b] ?? 0) + 1;
  }
  return { old: out[0], new: out[1] };
}
const json = (v, status = 200) => new Response(JSON.stringify(v), { status, headers: { "content-type": "application/json" } });
export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    if (url.pathname === "/__rollout/deploy" && req.method === "POST") {
      let p;
      try { p = (await req.json()).new_percent; } catch { p = undefined; }
      if (!Number.isInteger(p) || p < 0 || p > 100) return json({ error: "new_percent: a whole number from 0 to 100" }, 400);
      split.new_percent = p;
      split.deployments.push({ at: Date.now(), new_percent: p });
      return json({ old: env.OLD_ID + "@" + (100 - p) + "%", new: env.NEW_ID + "@" + p + "%" });
    }
    if (url.pathname === "/__rollout/figures") {
      const from = Number(url.searchParams.get("from")), to = Number(url.searchParams.get("to"));
      if (!Number.isFinite(from) || !Number.isFinite(to) || from > to) return json({ error: "from and to: ms since the epoch, from <= to" }, 400);
      return json(figures(from, to));
    }
    if (url.pathname === "/__rollout/state") {
      return json({ worker: env.WORKER, old: env.OLD_ID, new: env.NEW_ID, ...split });
    }
    const v = choose(req, env);
    const started = Date.now();
    const res = await (v === 1 ? env.NEW : env.OLD).fetch(req);
    const body = await res.arrayBuffer();
    const now = Date.now();
    if (res.status < 400 || res.status >= 500) {
      const unavailable = res.status >= 500 ? 1 : 0;
      const degraded = unavailable || res.headers.get("x-degraded") === "true" ? 1 : 0;
      answers.push([now, v, degraded, unavailable, bucket(now - started)]);
      if (answers.length % 4096 === 0) answers = answers.filter((a) => a[0] >= now - KEEP_MS);
    }
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  },
};
`;

/** A release directory's Worker name (its wrangler.toml `name`) and release ID (manifest.json). */
async function identity(dir) {
  const toml = await readFile(join(dir, "wrangler.toml"), "utf8");
  const name = /^name\s*=\s*"([^"]+)"/m.exec(toml)?.[1];
  if (!name) throw new Error(`${dir}/wrangler.toml: no name = "…" line`);
  const manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8"));
  const id = manifest.release_id;
  if (typeof id !== "string" || !id) throw new Error(`${dir}/manifest.json: no release_id`);
  return { name, id };
}

/**
 * Starts the old and the new release (built directories) as versions of one Worker — sharing
 * KV and the Durable Objects, as versions do — behind the front. Returns
 * { url (the front), old, new, worker, dispose() }.
 */
export async function startRollout({ oldDir, newDir, originUrl, seed, port = 0, verbose = false }) {
  const [o, n] = [await identity(resolve(oldDir)), await identity(resolve(newDir))];
  if (o.name !== n.name) throw new Error(`the two releases are different Workers: ${o.name} and ${n.name}`);
  if (o.id === n.id) throw new Error(`the old and the new release are the same release ${o.id}`);
  const fleet = await startEdges(
    [
      { dist: oldDir, name: "version-old", originUrl, seed },
      { dist: newDir, name: "version-new", originUrl },
    ],
    {
      port,
      verbose,
      shared: true,
      front: {
        name: "rollout-front",
        script: FRONT,
        serviceBindings: { OLD: "version-old", NEW: "version-new" },
        bindings: { WORKER: o.name, OLD_ID: o.id, NEW_ID: n.id },
      },
    },
  );
  return { url: fleet.front, old: o.id, new: n.id, worker: o.name, dispose: fleet.dispose };
}

async function main() {
  const { values } = parseArgs({
    options: {
      old: { type: "string" },
      new: { type: "string" },
      origin: { type: "string" },
      seed: { type: "string" },
      port: { type: "string", default: "0" },
      verbose: { type: "boolean", default: false },
    },
  });
  if (!values.old || !values.new) {
    console.error("usage: node scripts/rollout-front.mjs --old DIR --new DIR [--origin URL] [--seed FILE] [--port N]");
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
  const front = await startRollout({
    oldDir: values.old,
    newDir: values.new,
    originUrl: values.origin,
    seed,
    port: Number(values.port),
    verbose: values.verbose,
  });
  console.log(`edge listening on ${front.url}`);
  holdUntilStopped(front);
}

runAsProgram(import.meta, "rollout-front", main);
