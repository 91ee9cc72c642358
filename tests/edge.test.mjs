// [E-*] The edge runtime end to end: the built Worker in workerd (Miniflare) racing the
// simulated model origin, cascading through local KV and the baked stubs, disclosing.
// Regression guards for the issue "Edge runtime" (#3), "Evidence": every case asserts
// status, headers, body and elapsed time.
//
// Elapsed time is asserted twice (`assertWithin`):
// - by the edge's own clock: its log line's `latency_ms` (request start to the answer, as
//   the engine saw it) must be within the budget plus EDGE_SLACK_MS — the runtime's timer
//   fires at or after its time, never before, and a KV read may finish after the Worker's
//   clock said it fit;
// - by the test client, around a loopback request into workerd through Miniflare's
//   routing worker: within the budget plus SLACK_MS, which also covers Node's fetch and
//   scheduling on a shared 2-core machine. Clean-clone CI runs have shown single answers
//   241 and 265 ms after the request on this path (against ~10 ms usually) with nothing
//   in the Worker to explain them, so the client's slack is wide.
// Both slacks keep the assertion meaningful: every fault below would hold a Worker that
// waited on it for 800 ms or more (a hang forever, a slow body 1 s). How fast the answer
// comes is the bench's to measure (`understudy bench`), not a test's to flake on. The
// Worker itself only schedules work that fits the budget (the decision core's tests prove
// the arithmetic in virtual time).

import { test, describe, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { connect } from "node:net";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

import {
  EDGE_DIR,
  requireEdge,
  startStack,
  startOrigin,
  tempDir,
  preparePolicy,
  buildPolicy,
  timedFetch,
  mintToken,
  devSecret,
} from "./harness.mjs";
import { startEdge } from "../scripts/edge-server.mjs";

requireEdge();

/** policies/recommendations.toml: total budget, origin deadline. */
const BUDGET_MS = 60;
const DEADLINE_MS = 45;
/** What the edge's own clock may show beyond the budget, and the client's (see the top of this file). */
const EDGE_SLACK_MS = Number(process.env.UNDERSTUDY_E2E_EDGE_SLACK_MS ?? 100);
const SLACK_MS = Number(process.env.UNDERSTUDY_E2E_SLACK_MS ?? 250);
const HOUR = 3_600_000;
const ISS = "https://auth.mercado.example";

/** The KV form of an identity: the first 32 hex digits of its SHA-256 (core template.rs). */
const identityHash = (v) => createHash("sha256").update(v).digest("hex").slice(0, 32);
const userKey = (sub) => `user_rec:${identityHash(sub)}`;
const kvItems = (tag) => ({ items: [{ sku: `${tag}-1` }, { sku: `${tag}-2` }] });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` (async, truthy when done) every 25 ms for at most `ms`. */
async function eventually(check, ms = 3_000) {
  const until = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > until) return v;
    await sleep(25);
  }
}

/** The edge's log line for answer `r` (by its correlation ID); the runtime's stdout may lag the answer. */
async function edgeLine(edge, r) {
  const id = r.headers["x-correlation-id"];
  assert.ok(id, "the answer carries X-Correlation-ID");
  const line = await eventually(async () => edge.logs(true).find((l) => l.correlation_id === id), 2_000);
  assert.ok(line, `the edge logged the answer with correlation ID ${id}`);
  return line;
}

/** The answer came within the budget, by the edge's own clock and by the client's. */
async function assertWithin(edge, r, budgetMs = BUDGET_MS) {
  const line = await edgeLine(edge, r);
  assert.ok(
    line.latency_ms <= budgetMs + EDGE_SLACK_MS,
    `the edge answered in ${line.latency_ms} ms by its own clock; budget ${budgetMs} + slack ${EDGE_SLACK_MS}`,
  );
  assert.ok(
    r.elapsedMs < budgetMs + SLACK_MS,
    `the client saw the answer after ${r.elapsedMs.toFixed(1)} ms (the edge's clock: ${line.latency_ms} ms); budget ${budgetMs} + slack ${SLACK_MS}`,
  );
}

/** The full [E-DISCLOSE] set, and the [E-NOFALLBACK]-free invariant: not live, not personal. */
async function assertDegraded(edge, r, { reason, tier, release, privateCc }) {
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers["x-degraded"], "true");
  assert.equal(r.headers["x-degraded-reason"], reason);
  assert.equal(r.headers["x-result-source"], "fallback");
  assert.equal(r.headers["x-fallback-tier"], tier);
  assert.match(r.headers["x-result-age"] ?? "", /^\d+$/);
  assert.equal(r.headers["retry-after"], "5");
  assert.ok(r.headers["cache-control"], "Cache-Control on a degraded answer");
  if (privateCc !== undefined) assert.equal(r.headers["cache-control"].includes("private"), privateCc, r.headers["cache-control"]);
  assert.equal(r.headers["x-policy-version"], release);
  assert.ok(r.headers["x-correlation-id"]);
  assert.equal(r.json?.degraded, true, r.text);
  assert.equal(r.json?.is_personalized, false);
  assert.equal(r.json?.source, "fallback");
  assert.equal(r.json?.tier, tier);
  assert.ok(Array.isArray(r.json?.items) && r.json.items.length > 0, r.text);
  await assertWithin(edge, r);
}

function assertEnvelope(r, { status, code, retryable }) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.json?.code, code, r.text);
  assert.equal(typeof r.json?.message, "string");
  assert.equal(r.json?.retryable, retryable);
  assert.equal(r.json?.correlationId, r.headers["x-correlation-id"]);
  assert.equal(r.headers["cache-control"], "no-store");
}

describe("edge: recommendations (seed 000) against the simulated origin", () => {
  let stack;
  let release;
  const token = (sub) => mintToken(devSecret("TOKEN_HMAC_KEY"), { sub, iss: ISS, aud: "recommendations" });
  const get = (sub, { category, headers = {} } = {}) => {
    const q = category === undefined ? "" : `?category=${category}`;
    const auth = sub === null ? {} : { authorization: `Bearer ${token(sub)}` };
    return stack.fetch(`/v1/recommendations${q}`, { headers: { ...auth, ...headers } });
  };
  const putKv = async (binding, key, value, writtenAt) =>
    (await stack.edge.kv(binding)).put(key, JSON.stringify(value), { metadata: { written_at: writtenAt } });

  before(async () => {
    stack = await startStack("recommendations", {
      // These cases repeat one user's request on purpose (refresh intervals, latency
      // samples) and fail the origin on purpose, one fault per case: the retry-storm limit
      // and the breaker would answer instead. Both are exercised in resilience.test.mjs.
      build: {
        edit: (t) => t.replace("max_retries = 2", "max_retries = 1000").replace(/^min_calls = 20$/m, "min_calls = 50000"),
      },
      // The category tier as `understudy publish` writes it (policies/recommendations.top-
      // sellers.csv, validated against the snapshot taken an hour ago): `audio` has a list;
      // `toys` has none (the curated stubs answer).
      publish: [{ tier: "category", lists: "recommendations.top-sellers.csv" }],
    });
    release = stack.build.manifest.release_id;
    // A cold isolate instantiates the module and decodes the bake once; warm it up.
    for (let i = 0; i < 3; i++) await get("warm-up");
  });
  after(() => stack?.dispose());
  beforeEach(async () => {
    await stack.origin.clearFault();
  });

  test("healthy: a live, personalised answer with its correlation ID forwarded", async () => {
    const r = await get("alice", { category: "audio", headers: { "x-correlation-id": "e2e-healthy-1" } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers["x-degraded"], "false");
    assert.equal(r.headers["x-result-source"], "origin");
    assert.equal(r.headers["x-correlation-id"], "e2e-healthy-1");
    assert.equal(r.headers["x-policy-version"], release);
    assert.equal(r.headers["cache-control"], "private, no-store");
    assert.equal(r.json.degraded, false);
    assert.equal(r.json.is_personalized, true);
    assert.deepEqual(r.json.items.map((i) => i.sku), ["SIM-1", "SIM-2", "SIM-3"]);
    await assertWithin(stack.edge, r);
    const seen = (await stack.origin.stats()).recent.at(-1);
    assert.equal(seen.correlation_id, "e2e-healthy-1", "the correlation ID reaches the origin");
    assert.equal(seen.auth, true, "the credential from the secret binding reaches the origin");
  });

  test("origin hang: ML_TIMEOUT, the loser aborted, answered within the budget", async () => {
    await stack.origin.setFault({ kind: "hang" });
    const before = await stack.origin.stats();
    const r = await get("hang-user", { category: "toys" });
    // A shared tier, but the request carried a bearer token: a shared cache must not replay
    // the answer to someone else, so it is `private` (docs/outcomes.md, "Caching").
    await assertDegraded(stack.edge, r, { reason: "ML_TIMEOUT", tier: "curated", release, privateCc: true });
    assert.ok(r.elapsedMs >= DEADLINE_MS, `the race ran to its deadline (${r.elapsedMs} ms)`);
    // The abandoned call was cancelled (AbortController), not left hanging.
    const after = await eventually(async () => {
      const s = await stack.origin.stats();
      return s.disconnected > before.disconnected ? s : null;
    });
    assert.ok(after, "the origin saw the edge disconnect");
  });

  test("origin 5xx: ML_5XX, the category tier answers", async () => {
    await stack.origin.setFault({ kind: "status", code: 503 });
    const r = await get("five-user", { category: "audio" });
    await assertDegraded(stack.edge, r, { reason: "ML_5XX", tier: "category", release, privateCc: true });
    assert.deepEqual(r.json.items.map((i) => i.sku), ["SKU-2001", "SKU-1003", "SKU-1001"]);
    // Its age counts from the inventory snapshot it was validated against (an hour ago).
    assert.ok(Number(r.headers["x-result-age"]) >= 3600 - 5, r.headers["x-result-age"]);
  });

  test("origin 429 with Retry-After: ML_429, Retry-After on the answer", async () => {
    await stack.origin.setFault({ kind: "rate_limited", retry_after_s: 2 });
    const r = await get("limited-user", { category: "toys" });
    await assertDegraded(stack.edge, r, { reason: "ML_429", tier: "curated", release });
  });

  test("connection reset: ML_CONNECT", async () => {
    await stack.origin.setFault({ kind: "reset" });
    const r = await get("reset-user", { category: "toys" });
    await assertDegraded(stack.edge, r, { reason: "ML_CONNECT", tier: "curated", release });
  });

  test("headers in time but the body too slow: ML_TIMEOUT", async () => {
    await stack.origin.setFault({ kind: "slow_body", ms: 1_000, chunks: 10 });
    const r = await get("slow-body-user", { category: "toys" });
    await assertDegraded(stack.edge, r, { reason: "ML_TIMEOUT", tier: "curated", release });
  });

  test("malformed JSON: ML_BAD_RESPONSE", async () => {
    await stack.origin.setFault({ kind: "malformed" });
    const r = await get("malformed-user", { category: "toys" });
    await assertDegraded(stack.edge, r, { reason: "ML_BAD_RESPONSE", tier: "curated", release });
  });

  test("empty list and wrong shape: ML_BAD_RESPONSE", async () => {
    await stack.origin.setFault({ kind: "empty" });
    await assertDegraded(stack.edge, await get("empty-user", { category: "toys" }), { reason: "ML_BAD_RESPONSE", tier: "curated", release });
    await stack.origin.setFault({ kind: "wrong_shape" });
    await assertDegraded(stack.edge, await get("empty-user", { category: "toys" }), { reason: "ML_BAD_RESPONSE", tier: "curated", release });
  });

  test("user tier fresh: answered from it, privately", async () => {
    await putKv("USER_RECS", userKey("fresh-user"), kvItems("fresh"), Date.now() - HOUR);
    await stack.origin.setFault({ kind: "status", code: 500 });
    const r = await get("fresh-user", { category: "audio" });
    await assertDegraded(stack.edge, r, { reason: "ML_5XX", tier: "user", release, privateCc: true });
    assert.deepEqual(r.json.items.map((i) => i.sku), ["fresh-1", "fresh-2"]);
    const age = Number(r.headers["x-result-age"]);
    assert.ok(age >= 3600 - 5 && age <= 3600 + 5, `X-Result-Age ${age}`);
  });

  test("user tier older than 4 h: the category tier answers", async () => {
    await putKv("USER_RECS", userKey("stale-user"), kvItems("stale"), Date.now() - 4 * HOUR - 60_000);
    await stack.origin.setFault({ kind: "status", code: 500 });
    const r = await get("stale-user", { category: "audio" });
    await assertDegraded(stack.edge, r, { reason: "ML_5XX", tier: "category", release, privateCc: true });
  });

  test("KV timestamp in the future: a miss", async () => {
    await putKv("USER_RECS", userKey("future-user"), kvItems("future"), Date.now() + HOUR);
    await stack.origin.setFault({ kind: "status", code: 500 });
    const r = await get("future-user", { category: "audio" });
    await assertDegraded(stack.edge, r, { reason: "ML_5XX", tier: "category", release });
    const line = stack.edge.logs(true).find((l) => l.correlation_id === r.headers["x-correlation-id"]);
    assert.ok(line?.notes?.some((n) => n.tier === "user" && n.code === "KV_FUTURE_TIMESTAMP"), JSON.stringify(line));
  });

  test("a KV value that is not what the tier expects: a logged miss, not a 500", async () => {
    await (await stack.edge.kv("USER_RECS")).put(userKey("garbage-user"), "<html>", { metadata: { written_at: Date.now() } });
    await stack.origin.setFault({ kind: "status", code: 500 });
    const r = await get("garbage-user", { category: "audio" });
    await assertDegraded(stack.edge, r, { reason: "ML_5XX", tier: "category", release });
    const line = stack.edge.logs(true).find((l) => l.correlation_id === r.headers["x-correlation-id"]);
    assert.ok(line?.notes?.some((n) => n.code === "KV_NOT_JSON"), JSON.stringify(line));
  });

  test("the origin recovers: the user tier is repopulated, once per refresh interval", async () => {
    const sub = "recovering-user";
    await stack.origin.setFault({ kind: "hang" });
    await assertDegraded(stack.edge, await get(sub, { category: "toys" }), { reason: "ML_TIMEOUT", tier: "curated", release });
    await stack.origin.clearFault();
    const t0 = Date.now();
    const live = await get(sub, { category: "toys" });
    assert.equal(live.headers["x-degraded"], "false");
    const kv = await stack.edge.kv("USER_RECS");
    const stored = await eventually(async () => (await kv.getWithMetadata(userKey(sub), "json")).value && (await kv.getWithMetadata(userKey(sub), "json")));
    assert.ok(stored?.value, "write-through stored the live answer");
    assert.deepEqual(stored.value.items.map((i) => i.sku), ["SIM-1", "SIM-2", "SIM-3"]);
    const writtenAt = stored.metadata?.written_at;
    assert.ok(writtenAt >= t0 - 1_000 && writtenAt <= Date.now() + 1_000, `written_at ${writtenAt}`);
    // Another live answer within `refresh = 5m` does not rewrite the key.
    await get(sub, { category: "toys" });
    await sleep(200);
    const again = await kv.getWithMetadata(userKey(sub), "json");
    assert.equal(again.metadata?.written_at, writtenAt, "no rewrite inside the refresh interval");
    // And the repopulated tier now answers when the origin fails again.
    await stack.origin.setFault({ kind: "status", code: 502 });
    await assertDegraded(stack.edge, await get(sub, { category: "toys" }), { reason: "ML_5XX", tier: "user", release, privateCc: true });
  });

  test("bad parameters: 400 with the envelope, before any I/O", async () => {
    const before = (await stack.origin.stats()).requests;
    const cases = [
      [await get("bad-user", { category: "Not_Valid!" }), "PARAM_PATTERN_MISMATCH"],
      [await get("bad-user", { category: "a".repeat(10_240) }), "PARAM_TOO_LONG"],
      [await get("bad-user", { category: "a%0D%0Ab" }), "PARAM_CONTROL_CHARACTER"],
      [await get("bad-user", { category: "%FF%FE" }), "PARAM_INVALID_ENCODING"],
      [await get("bad-user", { category: "a&category=b" }), "PARAM_DUPLICATE"],
      [await get(null, { category: "audio" }), "PARAM_MISSING"],
    ];
    for (const [r, code] of cases) {
      assertEnvelope(r, { status: 400, code, retryable: false });
      assert.ok(!r.text.includes("aaaaaaaaaa"), "the value is not echoed");
      await assertWithin(stack.edge, r);
    }
    assert.match(cases[0][0].json.message, /category/, "the message names the parameter");
    const forged = await stack.fetch("/v1/recommendations", { headers: { authorization: "Bearer a.b.c" } });
    assertEnvelope(forged, { status: 401, code: "INVALID_TOKEN", retryable: false });
    assert.equal((await stack.origin.stats()).requests, before, "no bad request reached the origin");
  });

  test("a correlation ID with CR/LF or other unsafe characters is replaced, not echoed", async () => {
    for (const bad of ["tab\there", "x".repeat(129), "sp ace", "caf\u00e9"]) {
      const headers = { "x-correlation-id": bad };
      const r = await get("corr-user", { category: "audio", headers }).catch((e) => ({ error: e }));
      if (r.error) continue; // the client library refused to send it: nothing to echo
      assert.equal(r.status, 200, r.text);
      assert.notEqual(r.headers["x-correlation-id"], bad);
      assert.match(r.headers["x-correlation-id"], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    // Raw bytes on the wire: a bare CR inside the value, and an obsolete line fold that a
    // lenient parser joins into one value. The runtime either refuses the request, or splits
    // or joins the lines; whatever reaches the edge, no header is injected into the answer
    // and the echoed ID is a clean one.
    const { hostname: host, port } = new URL(stack.edge.url);
    for (const trick of ["X-Correlation-ID: evil\rInjected: 1", "X-Correlation-ID: evil\r\n Injected: 1"]) {
      const raw = await rawRequest(host, Number(port), [
        "GET /v1/recommendations?category=audio HTTP/1.1",
        `Host: ${host}:${port}`,
        `Authorization: Bearer ${token("corr-user")}`,
        trick,
        "Connection: close",
      ]);
      const head = raw.split("\r\n\r\n")[0];
      assert.ok(!/^Injected:/im.test(head), head);
      const echoed = /^x-correlation-id: (.*)$/im.exec(head)?.[1];
      if (echoed !== undefined) {
        assert.match(echoed, /^[\x21-\x7e]{1,128}$/, head);
        assert.ok(!echoed.includes("Injected"), head);
      }
    }
    // No token, secret or raw user ID in any log line.
    const logs = stack.edge.logs().join("\n");
    for (const secret of [devSecret("ML_API_KEY"), devSecret("TOKEN_HMAC_KEY"), "corr-user", "fresh-user", token("alice")]) {
      assert.ok(!logs.includes(secret), `a log line contains ${secret.slice(0, 12)}…`);
    }
  });

  test("degraded-path latency, p50 / p99 over 100 requests per fault (reported)", async (t) => {
    const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];
    for (const fault of [{ kind: "status", code: 503 }, { kind: "hang" }]) {
      await stack.origin.setFault(fault);
      const ms = [];
      const tiers = {};
      for (let i = 0; i < 100; i++) {
        const r = await get(`latency-user-${i % 7}`, { category: "audio" });
        assert.equal(r.headers["x-degraded"], "true", r.text);
        // Which tier answers depends on how much budget is left after the race: a KV read
        // that cannot fit is skipped, so under load the curated stubs may answer instead.
        tiers[r.headers["x-fallback-tier"]] = (tiers[r.headers["x-fallback-tier"]] ?? 0) + 1;
        ms.push(r.elapsedMs);
      }
      ms.sort((a, b) => a - b);
      const [p50, p99] = [pct(ms, 50), pct(ms, 99)];
      // Reported, not asserted: a timing goal is the bench's to measure (`understudy bench`),
      // not a test's to flake on a busy machine. Every answer above was degraded and
      // disclosed; each one's own budget is asserted by the single-request tests.
      t.diagnostic(
        `${fault.kind}: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${ms.at(-1).toFixed(1)} ms; tiers ${JSON.stringify(tiers)}`,
      );
    }
  });

  // "A KV read slower than its timeout → the next tier within the budget" runs in
  // resilience.test.mjs, with the user tier behind a slowed-down KV binding.

  test("one JSON log line per request with outcome, tier, reason and latency", async () => {
    await stack.origin.setFault({ kind: "status", code: 503 });
    const r = await get("log-user", { category: "toys", headers: { "x-correlation-id": "e2e-log-1" } });
    const lines = stack.edge.logs(true).filter((l) => l.correlation_id === "e2e-log-1");
    assert.equal(lines.length, 1, JSON.stringify(lines));
    const [l] = lines;
    assert.equal(l.outcome, "fallback");
    assert.equal(l.tier, "curated");
    assert.match(l.reason, /^ML_5XX/);
    assert.equal(typeof l.latency_ms, "number");
    assert.equal(l.origin_override, true);
    assert.equal(r.status, 200);
  });

  // Issue 23: every response leaves with our headers, whatever kind of answer it is.
  test("every kind of answer carries X-Correlation-ID, X-Policy-Version and X-Breaker-Mode", async () => {
    const answers = {
      live: await get("hdr-live", { category: "audio" }),
      "bad parameter (400)": await stack.fetch("/v1/recommendations?category=%0A"),
      "unknown route (404)": await stack.fetch("/nowhere"),
      "wrong method (405)": await stack.fetch("/v1/recommendations?category=audio", { method: "DELETE", headers: { authorization: `Bearer ${token("hdr")}` } }),
      "forged token (401)": await stack.fetch("/v1/recommendations?category=audio", { headers: { authorization: "Bearer a.b.c" } }),
      "status endpoint without its token (401)": await stack.fetch("/__understudy/status"),
    };
    await stack.origin.setFault({ kind: "hang" });
    answers["degraded (ML_TIMEOUT)"] = await get("hdr-hang", { category: "toys" });
    await stack.origin.setFault({ kind: "reset" });
    answers["degraded (ML_CONNECT)"] = await get("hdr-reset", { category: "audio" });
    for (const [what, r] of Object.entries(answers)) {
      assert.ok(r.headers["x-correlation-id"], `${what}: X-Correlation-ID (status ${r.status})`);
      assert.equal(r.headers["x-policy-version"], release, `${what}: X-Policy-Version`);
      assert.match(r.headers["x-breaker-mode"] ?? "", /^[A-Z_]+$/, `${what}: X-Breaker-Mode`);
      assert.notEqual(r.status, 500, `${what}: never a bare 500`);
    }
  });
});

describe("edge: a policy with no tier left answers 504 / 503 (orders API, seed 004)", () => {
  let tmp;
  let origin;
  let edge;
  const sub = "tenant-user";
  const tok = () =>
    mintToken(devSecret("API_TOKEN_KEY"), { sub, tenant: "acme", iss: ISS, aud: "orders-api" });
  const get = (id) =>
    timedFetch(`${edge.url}/v1/orders/${id}`, { headers: { authorization: `Bearer ${tok()}` } });

  before(async () => {
    tmp = await tempDir();
    const path = await preparePolicy("api", tmp.dir);
    // The seed's 10 s budget, scaled down so the timeout case runs in a test's time.
    const text = (await readFile(path, "utf8"))
      .replace(/^total = .*$/m, 'total = "400ms"')
      .replace(/^deadline = .*$/m, 'deadline = "300ms"')
      .replace(/^connect_timeout = .*$/m, 'connect_timeout = "100ms"')
      .replace(/^attempt_timeout = .*$/m, 'attempt_timeout = "300ms"')
      .replace(/^attempts = .*$/m, "attempts = 1")
      .replace(/^read_timeout = .*$/m, 'read_timeout = "50ms"');
    await writeFile(path, text);
    const build = await buildPolicy(path, join(tmp.dir, "dist"));
    origin = await startOrigin();
    edge = await startEdge({ dist: build.dir, originUrl: origin.url });
    await get("WARMUP-000000"); // live: its write-through must not serve the cases below
  });
  after(async () => {
    await edge?.dispose();
    await origin?.stop();
    await tmp?.cleanup();
  });

  test("the deadline ran out and the tier missed: 504 DEPENDENCY_TIMEOUT", async () => {
    await origin.setFault({ kind: "hang" });
    const r = await get("ORDER-123456");
    assertEnvelope(r, { status: 504, code: "DEPENDENCY_TIMEOUT", retryable: true });
    assert.equal(r.headers["retry-after"], "5");
    assert.equal(r.headers["x-degraded-reason"], "ML_TIMEOUT");
    await assertWithin(edge, r, 400);
    await origin.clearFault();
  });

  test("classified unavailability: 503 DEPENDENCY_UNAVAILABLE, never a made-up success", async () => {
    await origin.setFault({ kind: "status", code: 503 });
    const r = await get("ORDER-654321");
    assertEnvelope(r, { status: 503, code: "DEPENDENCY_UNAVAILABLE", retryable: true });
    assert.equal(r.headers["x-degraded-reason"], "ML_5XX");
    assert.ok(r.headers["retry-after"]);
    await origin.clearFault();
  });
});

/** Sends a hand-written HTTP/1.1 request; resolves with the raw answer (bounded: 5 s). */
function rawRequest(host, port, lines) {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let data = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(data);
    }, 5_000);
    socket.on("connect", () => socket.write(lines.join("\r\n") + "\r\n\r\n"));
    socket.on("data", (d) => {
      data += d.toString("latin1");
      // Done once the head and a Content-Length body (or a refusal without one) are in.
      const end = data.indexOf("\r\n\r\n");
      const len = /^content-length: (\d+)$/im.exec(data.slice(0, end))?.[1];
      if (end >= 0 && (len === undefined || data.length - end - 4 >= Number(len))) {
        clearTimeout(timer);
        socket.destroy();
        resolve(data);
      }
    });
    socket.on("end", () => {
      clearTimeout(timer);
      resolve(data);
    });
    socket.on("error", (e) => {
      clearTimeout(timer);
      data ? resolve(data) : reject(e);
    });
  });
}
