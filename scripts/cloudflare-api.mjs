// A stand-in for the parts of the Cloudflare API a rollout uses, on loopback, so the real
// wrangler (pointed here by CLOUDFLARE_API_BASE_URL, as wrangler allows) runs every command
// line the rollout's Cloudflare driver builds — uploads and deployments, not only their
// `--dry-run` — and the driver's SQL reaches an Analytics Engine SQL endpoint. Nothing here
// is Cloudflare's behaviour beyond the request and answer shapes wrangler and the driver
// read (docs/adr/012-rollout-on-workers-versions.md says what it does not reproduce).
//
// Workers versions and deployments (per Worker, in memory):
//   GET  /accounts/:a/workers/services/:name                 the Worker
//   GET  /accounts/:a/workers/scripts/:name/settings         its settings (also PATCH script-settings)
//   GET  /user/tokens/verify                                 the token is active
//   POST /accounts/:a/workers/scripts/:name/versions         an upload (multipart): a new version,
//                                                            its annotations from the metadata part
//   GET  /accounts/:a/workers/scripts/:name/versions[/:id]   the versions / one
//   GET  /accounts/:a/workers/scripts/:name/deployments      the deployments, newest first
//   POST /accounts/:a/workers/scripts/:name/deployments      a deployment (percentage split)
//   GET  /accounts/:a/workers/scripts                        the Workers, each with the tag of
//                                                            the last Durable Object migration applied
//   PUT  /accounts/:a/workers/scripts/:name                  `wrangler deploy`: a new version at 100%,
//                                                            applying the upload's migrations
// As Cloudflare does, a version upload that carries a Durable Object migration is refused
// (API error 10211): a migration is applied only by a deployment at 100% (`wrangler deploy`).
// Analytics Engine:
//   POST /accounts/:a/analytics_engine/sql                   answers the rollout's two queries
//        from `figures[release]` = { rps, degraded, unavailable, latencyMs } over the query's window
//
// Every request must carry `Authorization: Bearer <token>`. Requests to anything else are
// answered 404 and listed in `unknown`.

import http from "node:http";
import { randomUUID } from "node:crypto";

const ok = (res, result, status = 200, code = 10000) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ success: status < 400, errors: status < 400 ? [] : [{ code, message: String(result) }], messages: [], result: status < 400 ? result : null }));
};

export async function startCloudflareApi({ token = "test-token", figures = {} } = {}) {
  const state = { versions: new Map(), deployments: new Map(), migrationTags: new Map(), sql: [], unknown: [], figures };
  // The upload's metadata part: the JSON object that names the main module.
  const metadataOf = (body) => {
    for (const part of body.split(/\r?\n--/)) {
      const at = part.indexOf("{");
      if (!/name="metadata"/.test(part) || at < 0) continue;
      try {
        return JSON.parse(part.slice(at, part.lastIndexOf("}") + 1));
      } catch {
        return null;
      }
    }
    return null;
  };
  const workerOf = (name) => {
    if (!state.versions.has(name)) state.versions.set(name, []);
    if (!state.deployments.has(name)) state.deployments.set(name, []);
    return { versions: state.versions.get(name), deployments: state.deployments.get(name) };
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      if (req.headers.authorization !== `Bearer ${token}`) return ok(res, "bad token", 403);
      const url = new URL(req.url, "http://x");
      const p = url.pathname.replace(/^\/client\/v4/, "");
      let m;
      if ((m = /^\/accounts\/[^/]+\/analytics_engine\/sql$/.exec(p)) && req.method === "POST") {
        state.sql.push(body);
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify(answerSql(body, state.figures)));
      }
      if ((m = /^\/accounts\/[^/]+\/workers\/services\/([^/]+)$/.exec(p))) {
        return ok(res, { id: m[1], default_environment: { environment: "production", script: { id: m[1], tag: "t", etag: "e", handlers: ["fetch"], last_deployed_from: "wrangler" } } });
      }
      if ((m = /^\/accounts\/[^/]+\/workers\/scripts\/([^/]+)\/(script-)?settings$/.exec(p))) return ok(res, { logpush: false, tail_consumers: [] });
      if (p === "/user/tokens/verify") return ok(res, { id: "t", status: "active" });
      // What `wrangler deploy` asks after the upload: the account's workers.dev subdomain and
      // whether this Worker is served on it (not here: routes are not part of a rollout).
      if (/^\/accounts\/[^/]+\/workers\/subdomain$/.test(p)) return ok(res, { subdomain: "stand-in" });
      if (/^\/accounts\/[^/]+\/workers\/scripts\/[^/]+\/subdomain$/.test(p)) return ok(res, { enabled: false, previews_enabled: false });
      if (/^\/accounts\/[^/]+\/workers\/scripts$/.test(p) && req.method === "GET") {
        return ok(res, [...state.versions.keys()].map((id) => ({ id, migration_tag: state.migrationTags.get(id) ?? "", handlers: ["fetch"] })));
      }
      if ((m = /^\/accounts\/[^/]+\/workers\/scripts\/([^/]+)$/.exec(p)) && req.method === "PUT") {
        const meta = metadataOf(body);
        if (!meta) return ok(res, "no metadata part", 400);
        const w = workerOf(m[1]);
        if (meta.migrations?.new_tag) state.migrationTags.set(m[1], meta.migrations.new_tag);
        const v = version(randomUUID(), w.versions.length + 1, meta.annotations ?? {});
        w.versions.push(v);
        w.deployments.unshift({ id: randomUUID(), source: "wrangler", strategy: "percentage", author_email: "ops@example.com", created_on: new Date().toISOString(), annotations: {}, versions: [{ version_id: v.id, percentage: 100 }] });
        return ok(res, { id: m[1], etag: "e", handlers: ["fetch"], migration_tag: state.migrationTags.get(m[1]) ?? "", deployment_id: v.id, startup_time_ms: 5 });
      }
      if ((m = /^\/accounts\/[^/]+\/workers\/scripts\/([^/]+)\/versions$/.exec(p))) {
        const w = workerOf(m[1]);
        if (req.method === "POST" && metadataOf(body)?.migrations) {
          return ok(res, "Version upload failed. You attempted to upload a version of a Worker that includes a Durable Object migration, but migrations must be fully applied via a non-versioned deployment.", 400, 10211);
        }
        if (req.method === "POST") {
          const tag = /"workers\/tag"\s*:\s*"([^"]*)"/.exec(body)?.[1];
          const message = /"workers\/message"\s*:\s*"([^"]*)"/.exec(body)?.[1];
          const v = version(randomUUID(), w.versions.length + 1, { "workers/tag": tag, "workers/message": message });
          w.versions.push(v);
          return ok(res, { ...v, startup_time_ms: 5 });
        }
        return ok(res, { items: [...w.versions].reverse() });
      }
      if ((m = /^\/accounts\/[^/]+\/workers\/scripts\/([^/]+)\/versions\/([^/]+)$/.exec(p))) {
        const v = workerOf(m[1]).versions.find((x) => x.id === m[2]);
        return v ? ok(res, v) : ok(res, `no version ${m[2]}`, 404);
      }
      if ((m = /^\/accounts\/[^/]+\/workers\/scripts\/([^/]+)\/deployments$/.exec(p))) {
        const w = workerOf(m[1]);
        if (req.method === "POST") {
          let d;
          try {
            d = JSON.parse(body);
          } catch {
            return ok(res, "not JSON", 400);
          }
          const known = d.versions?.every((x) => w.versions.some((v) => v.id === x.version_id));
          const sum = (d.versions ?? []).reduce((a, x) => a + x.percentage, 0);
          if (!known || sum !== 100) return ok(res, "unknown version or percentages not summing to 100", 400);
          const dep = { id: randomUUID(), source: "wrangler", strategy: d.strategy ?? "percentage", author_email: "ops@example.com", created_on: new Date().toISOString(), annotations: d.annotations ?? {}, versions: d.versions };
          w.deployments.unshift(dep);
          return ok(res, dep);
        }
        return ok(res, { deployments: w.deployments });
      }
      state.unknown.push(`${req.method} ${p}`);
      return ok(res, `the stand-in does not serve ${req.method} ${p}`, 404);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}/client/v4`;
  return {
    url,
    token,
    state,
    /** The percentages of each deployment, oldest first, by release tag: [{tag: pct}, …]. */
    deployed(worker) {
      const w = workerOf(worker);
      const tagOf = (id) => w.versions.find((v) => v.id === id)?.annotations["workers/tag"] ?? id;
      return [...w.deployments].reverse().map((d) => Object.fromEntries(d.versions.map((x) => [tagOf(x.version_id), x.percentage])));
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

function version(id, number, annotations) {
  const at = new Date().toISOString();
  return { id, number, metadata: { created_on: at, modified_on: at, source: "wrangler", author_email: "ops@example.com" }, annotations, resources: { script: { etag: "e", handlers: ["fetch"] }, script_runtime: { compatibility_date: "2026-04-01", usage_model: "standard" }, bindings: [] } };
}

/** The rollout's counts or latency query, answered from `figures` over its window. */
function answerSql(sql, figures) {
  const releases = /blob1 IN \(([^)]*)\)/.exec(sql)?.[1].match(/'([^']*)'/g)?.map((s) => s.slice(1, -1)) ?? [];
  const [from, to] = [...sql.matchAll(/toDateTime\((\d+)\)/g)].map((x) => Number(x[1]));
  const secs = Math.max(0, (to ?? 0) - (from ?? 0));
  const data = [];
  for (const r of releases) {
    const f = figures[r];
    if (!f) continue;
    const answers = Math.round(f.rps * secs);
    if (answers === 0) continue;
    if (/ AS bucket/.test(sql)) {
      const bucket = f.latencyMs < 1 ? 0 : Math.floor(Math.log(f.latencyMs) / Math.log(1.1)) + 1;
      data.push({ release: r, bucket, n: String(answers) });
    } else {
      data.push({ release: r, sampled: answers, answers: String(answers), degraded: Math.round(answers * f.degraded), unavailable: Math.round(answers * f.unavailable) });
    }
  }
  return { meta: [], data, rows: data.length };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const api = await startCloudflareApi({ token: process.env.CLOUDFLARE_API_TOKEN ?? "test-token" });
  console.log(`cloudflare api listening on ${api.url}`);
}
