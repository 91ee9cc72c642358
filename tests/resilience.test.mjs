// Issue #4 end to end: the circuit breaker (both modes) in the real Worker, the retry-storm
// limit through the Rate Limiting binding, verified identity, and the admin status
// endpoint. Each test runs the built Worker in workerd (Miniflare) against the simulated
// origin on loopback; every loop below is bounded in count and time.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";

import {
  EDGE_DIR,
  requireEdge,
  startOrigin,
  tempDir,
  preparePolicy,
  buildPolicy,
  timedFetch,
  mintToken,
  devSecret,
  publishTier,
  POLICIES,
} from "./harness.mjs";
import { startEdge } from "../scripts/edge-server.mjs";

requireEdge();
const ISS = "https://auth.mercado.example";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const identityHash = (v) => createHash("sha256").update(v).digest("hex").slice(0, 32);

/**
 * One healthy request, then the origin's counters reset: the isolate is no longer cold. The
 * breaker does not learn from origin attempts started before the isolate's first one ended
 * (a fresh isolate's first wave pays for start-up, not the model: docs/outcomes.md), so a
 * test counting failures from the first request warms the isolate first.
 */
async function warm(s, path, headers = {}) {
  const r = await s.get(path, headers);
  assert.equal(r.headers["x-result-source"], "origin", `warm-up: ${r.text}`);
  await s.origin.reset();
}

/** Builds `policyName` after `edit(text)`, starts origin + edge. Returns the stack. */
async function stack(policyName, { edit = (t) => t, seed = {}, publish = [], slowKv, originScript } = {}) {
  const tmp = await tempDir();
  const policy = await preparePolicy(policyName, tmp.dir);
  await writeFile(policy, edit(await readFile(policy, "utf8")));
  const build = await buildPolicy(policy, join(tmp.dir, "dist"));
  // Published tiers are seeded from the file `understudy publish` writes.
  seed = { ...seed };
  for (const [i, p] of publish.entries()) {
    const pub = await publishTier(policy, { ...p, lists: join(POLICIES, p.lists), out: join(tmp.dir, `published-${i}.json`) });
    seed[pub.binding] = pub.entries;
  }
  let script;
  if (originScript) {
    script = join(tmp.dir, "origin-script.json");
    await writeFile(script, JSON.stringify(originScript));
  }
  const origin = await startOrigin({ script });
  let edge;
  try {
    edge = await startEdge({ dist: build.dir, originUrl: origin.url, seed, slowKv });
  } catch (e) {
    // A stack that did not start leaves nothing running behind it.
    await origin.stop().catch(() => {});
    await tmp.cleanup().catch(() => {});
    throw e;
  }
  return {
    origin,
    edge,
    release: build.manifest.release_id,
    get: (path, headers = {}) => timedFetch(`${edge.url}${path}`, { headers }),
    dispose: async () => {
      await edge.dispose().catch(() => {});
      await origin.stop().catch(() => {});
      await tmp.cleanup().catch(() => {});
    },
  };
}

const bearer = (sub, extra = {}) => ({
  authorization: `Bearer ${mintToken(devSecret("TOKEN_HMAC_KEY"), { sub, iss: ISS, aud: "recommendations", ...extra })}`,
});

describe("consecutive breaker (seed 002) in the Worker", () => {
  let s;
  before(async () => {
    s = await stack("semantic-search");
  });
  after(() => s?.dispose());

  test("opens after 3 failures, keeps the model uncalled while open, recovers through one trial", async () => {
    await warm(s, "/v1/search?q=warm");
    await s.origin.setFault({ kind: "status", code: 503 });
    const modes = [];
    for (let i = 0; i < 3; i++) {
      const r = await s.get(`/v1/search?q=headphones`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers["x-degraded-reason"], "ML_5XX");
      modes.push(r.headers["x-breaker-mode"]);
    }
    assert.deepEqual(modes, ["CLOSED", "CLOSED", "OPEN"], "opens exactly at the third consecutive failure");

    await s.origin.reset();
    for (let i = 0; i < 5; i++) {
      const r = await s.get(`/v1/search?q=keyboard`);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers["x-degraded"], "true");
      assert.equal(r.headers["x-degraded-reason"], "BREAKER_OPEN");
      assert.equal(r.headers["x-fallback-tier"], "keyword");
      assert.equal(r.json.is_personalized, false);
      assert.ok(r.elapsedMs < 500, `an open breaker answers without waiting for the model (${r.elapsedMs} ms)`);
    }
    assert.equal((await s.origin.stats()).requests, 0, "no model call while the breaker is open");

    // Cool-down 4 s, then one half-open trial against a healed model closes it.
    await s.origin.clearFault();
    await sleep(4_100);
    const trial = await s.get(`/v1/search?q=keyboard`);
    assert.equal(trial.headers["x-result-source"], "origin", trial.text);
    assert.equal(trial.headers["x-breaker-mode"], "CLOSED");
    assert.equal((await s.origin.stats()).requests, 1, "exactly one trial call");
  });
});

// Issue 9: an origin 4xx about the caller's request is never a breaker record and never
// retried; 401/403 (the edge's own credential refused) are dependency failures with their
// own reason and counter. Read back through the admin status endpoint.
describe("origin 4xx are the caller's, 401/403 the edge's (issue 9)", () => {
  const withAdmin = (extra = "") => (t) =>
    `${t.replace(/client_errors = "fallback"\n/, extra)}\n[admin]\npath = "/__status"\nsecret = "ADMIN_TOKEN"\n`;
  const status = async (s) => {
    const r = await s.get("/__status", { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` });
    assert.equal(r.status, 200, r.text);
    return r.json;
  };

  test("50 origin 404s leave the breaker closed; a fallback policy discloses ML_4XX", async () => {
    const s = await stack("semantic-search", { edit: withAdmin('client_errors = "fallback"\n') });
    try {
      await s.origin.setFault({ kind: "status", code: 404 });
      // Every query names something the keyword net knows, so each answer is a fallback.
      const words = ["headphones", "keyboard", "backpack", "coffee"];
      for (let i = 0; i < 50; i++) {
        const r = await s.get(`/v1/search?q=${words[i % 4]}+${i}`);
        assert.equal(r.status, 200, r.text);
        assert.equal(r.headers["x-degraded"], "true");
        assert.equal(r.headers["x-degraded-reason"], "ML_4XX");
        assert.equal(r.headers["x-breaker-mode"], "CLOSED", `request ${i}`);
      }
      const st = await status(s);
      assert.equal(st.breaker.mode, "CLOSED");
      assert.deepEqual(st.breaker.transitions, []);
      assert.equal(st.counters.by_reason.ML_4XX, 50);
      assert.equal((await s.origin.stats()).requests, 50, "never retried");
      // The model answers the next caller live.
      await s.origin.clearFault();
      assert.equal((await s.get(`/v1/search?q=headphones`)).headers["x-result-source"], "origin");
    } finally {
      await s.dispose();
    }
  });

  test("with a pass-through policy each caller gets the origin's 404 in the envelope, retryable false", async () => {
    const s = await stack("semantic-search", { edit: withAdmin('client_errors = "pass_through"\n') });
    try {
      await s.origin.setFault({ kind: "status", code: 404 });
      for (let i = 0; i < 50; i++) {
        const r = await s.get(`/v1/search?q=unknown${i}`);
        assert.equal(r.status, 404, r.text);
        assert.equal(r.json.code, "ORIGIN_REJECTED_REQUEST");
        assert.equal(r.json.retryable, false);
        assert.equal(r.json.correlationId, r.headers["x-correlation-id"]);
      }
      const st = await status(s);
      assert.equal(st.breaker.mode, "CLOSED");
      assert.equal(st.counters.origin_rejected, 50);
      const line = s.edge.logs(true).filter((l) => l.outcome === "origin_rejected").at(-1);
      assert.equal(line.class, "caller");
    } finally {
      await s.dispose();
    }
  });

  test("a run of origin 401s opens the breaker with ML_AUTH and counts the refused credential", async () => {
    const s = await stack("semantic-search", { edit: withAdmin('client_errors = "fallback"\n') });
    try {
      await warm(s, "/v1/search?q=warm");
      await s.origin.setFault({ kind: "status", code: 401 });
      const seen = [];
      for (let i = 0; i < 3; i++) {
        const r = await s.get(`/v1/search?q=headphones`);
        assert.equal(r.status, 200, r.text);
        seen.push([r.headers["x-degraded-reason"], r.headers["x-breaker-mode"]]);
      }
      assert.deepEqual(seen, [["ML_AUTH", "CLOSED"], ["ML_AUTH", "CLOSED"], ["ML_AUTH", "OPEN"]]);
      const r = await s.get(`/v1/search?q=keyboard`);
      assert.equal(r.headers["x-degraded-reason"], "BREAKER_OPEN");
      const st = await status(s);
      assert.equal(st.counters.credential_refused, 3);
      assert.deepEqual(
        st.breaker.transitions.map((t) => [t.from, t.to, t.evidence]),
        [["CLOSED", "OPEN", { calls: 3, failures: 3, timeouts: 0, p95_ms: null }]],
        "the opening names its evidence: three failures, none of them timeouts",
      );
      assert.equal((await s.origin.stats()).requests, 3, "401 is not retried");
    } finally {
      await s.dispose();
    }
  });
});

describe("the bulkhead: most origin calls in flight per isolate (issue 13)", () => {
  test("against a hung model, 12 concurrent callers make at most 3 origin calls; the rest are served BULKHEAD_FULL at once", async () => {
    const s = await stack("semantic-search", {
      edit: (t) =>
        `${t.replace(/^\[origin\]\n/m, "[origin]\nmax_in_flight = 3\n")}\n[admin]\npath = "/__status"\nsecret = "ADMIN_TOKEN"\n`,
    });
    try {
      await s.get("/v1/search?q=headphones"); // the isolate is no longer cold
      await s.origin.reset();
      await s.origin.setFault({ kind: "hang" });
      const words = ["headphones", "keyboard", "backpack", "coffee"];
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) => s.get(`/v1/search?q=${words[i % 4]}+${i}`)),
      );
      const reasons = answers.map((r) => r.headers["x-degraded-reason"]);
      for (const r of answers) {
        assert.equal(r.status, 200, r.text);
        assert.equal(r.headers["x-degraded"], "true", "every answer is a disclosed fallback");
      }
      const shed = answers.filter((r) => r.headers["x-degraded-reason"] === "BULKHEAD_FULL");
      assert.equal(shed.length, 9, `reasons: ${reasons.join(", ")}`);
      assert.equal(reasons.filter((x) => x === "ML_TIMEOUT").length, 3, `reasons: ${reasons.join(", ")}`);
      // Shed callers do not wait for the deadline (800 ms): the cascade answers at once.
      for (const r of shed) assert.ok(r.elapsedMs < 400, `a shed caller waited ${r.elapsedMs} ms`);
      const calls = (await s.origin.stats()).requests;
      assert.ok(calls <= 3, `${calls} origin calls with max_in_flight = 3`);
      const st = (await s.get("/__status", { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` })).json;
      assert.equal(st.counters.by_reason.BULKHEAD_FULL, 9, JSON.stringify(st.counters));
    } finally {
      await s.dispose();
    }
  });
});

describe("speculative tier reads once the model has gone silent (issue 13)", () => {
  test("a call after a timeout starts its tier reads with the fetch: a KV tier slower than its read timeout answers at the deadline", async () => {
    // The category tier's KV takes 100 ms to answer, its read timeout is 5 ms: read at the
    // deadline it never answers in time. The deadline is 250 ms (the seed's 45 ms, scaled
    // so that a stall of the shared machine cannot decide the test).
    const s = await stack("recommendations", {
      edit: (t) =>
        `${t
          .replace('total = "60ms"', 'total = "300ms"')
          .replace('deadline = "45ms"', 'deadline = "250ms"')
          .replace('attempt_timeout = "45ms"', 'attempt_timeout = "250ms"')}`,
      publish: [{ tier: "category", lists: "recommendations.top-sellers.csv" }],
      slowKv: { CATEGORY_TOP: 100 },
    });
    try {
      await s.origin.setFault({ kind: "hang" });
      // The first caller meets the hang: at its deadline the category read times out, and
      // the baked stubs answer.
      const first = await s.get("/v1/recommendations?category_id=audio", bearer("silent-1"));
      assert.equal(first.status, 200, first.text);
      assert.equal(first.headers["x-degraded-reason"], "ML_TIMEOUT");
      assert.equal(first.headers["x-fallback-tier"], "curated", "the 100 ms category read missed its 5 ms timeout");
      // The model has let a call time out and answered no one since: the next caller's
      // category read starts with its origin call and is done by the deadline.
      const second = await s.get("/v1/recommendations?category_id=audio", bearer("silent-2"));
      assert.equal(second.status, 200, second.text);
      assert.equal(second.headers["x-degraded-reason"], "ML_TIMEOUT");
      assert.equal(second.headers["x-fallback-tier"], "category", second.text);
      const st = (await s.get("/__understudy/status", { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` })).json;
      // The second caller's user and category keys; both were read at its deadline.
      assert.equal(st.counters.kv_prefetched, 2, JSON.stringify(st.counters));
      assert.equal(st.counters.kv_prefetch_unused, 0, JSON.stringify(st.counters));
    } finally {
      await s.dispose();
    }
  });
});

describe("rate breaker (seed 000's machine) in the Worker", () => {
  let s;
  // Seed 000's shape with short windows so the test runs in seconds: trip at ≥ 15%
  // failures or p95 > 200 ms over 2 s with 5 calls; hold 1 s; probe half the traffic;
  // promote after 2 good probes with p95 ≤ 200 ms. The latency bars are the seed's 45 and
  // 40 ms scaled up (with the deadline) so that a healthy origin's probe is never judged
  // slow for a stall of the shared test machine: a clean-clone run once saw a probe of a
  // ~1 ms origin take over 40 ms, and the promotion wait for more probes.
  const edit = (t) =>
    t
      .replace('total = "60ms"', 'total = "300ms"')
      .replace('deadline = "45ms"', 'deadline = "250ms"')
      .replace('attempt_timeout = "45ms"', 'attempt_timeout = "250ms"')
      .replace('slow_call_p95 = "45ms"', 'slow_call_p95 = "200ms"')
      .replace('probe_p95 = "40ms"', 'probe_p95 = "200ms"')
      .replace('window = "30s"', 'window = "2s"')
      .replace("min_calls = 20", "min_calls = 5")
      .replace('hold_down = "30s"', 'hold_down = "1s"')
      .replace("probe_fraction = 0.02", "probe_fraction = 0.5")
      .replace("probe_min_calls = 20", "probe_min_calls = 2")
      .replace('failed_probe_hold = "60s"', 'failed_probe_hold = "1s"');
  before(async () => {
    s = await stack("recommendations", { edit });
  });
  after(() => s?.dispose());

  test("degrades on slow calls, probes a fraction of traffic, promotes back", async () => {
    // A new user per request: one user repeating a request would meet the storm limit.
    let n = 0;
    const next = () => bearer(`rate-user-${n++}`);
    await warm(s, "/v1/recommendations?category=audio", next());
    // Slower than the attempt's timeout (250 ms): each call times out, degraded.
    await s.origin.setFault({ kind: "latency", ms: 400 });
    // The breaker's verdicts on the model, as the isolate counts them: a timeout held
    // against the model at once, or — on an isolate that finds its own timers late (a busy
    // machine) — one convicted after the model stayed silent a timeout longer, or withheld
    // (`unrecorded`) when its answer came after all. A convicted timeout is judged after its
    // own response went out (at the next call's end, or when the isolate stops listening),
    // so the mode is read from the status endpoint once the fifth verdict is in.
    const status = async () => {
      const r = await s.get("/__understudy/status", { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` });
      assert.equal(r.status, 200, r.text);
      return r.json;
    };
    const given = (c) => c.timeouts_counted + c.timeouts_convicted;
    const before = given((await status()).counters);
    // The window needs 5 calls: the warm-up's success counts while it is in the 2 s window
    // (a cold isolate's successes count, docs/outcomes.md), so the fourth slow verdict may
    // trip it; the fifth must.
    let st;
    let verdicts = 0;
    for (let calls = 1; calls <= 20 && verdicts < 5 && st?.breaker?.mode !== "DEGRADED_FALLBACK"; calls++) {
      const r = await s.get(`/v1/recommendations?category=audio`, next());
      assert.equal(r.headers["x-degraded"], "true", r.text);
      st = await status();
      verdicts = given(st.counters) - before;
      if (verdicts < 4) {
        assert.equal(r.headers["x-breaker-mode"], "PRIMARY_HEALTHY", `${verdicts} slow verdict(s) leave it healthy`);
        assert.equal(st.breaker.mode, "PRIMARY_HEALTHY", `${verdicts} slow verdict(s) leave it healthy`);
      }
    }
    // Two may come in one call (the last call's conviction and its own count).
    assert.ok(verdicts >= 4, `four verdicts or more within 20 calls: ${JSON.stringify(st.counters)}`);
    assert.equal(st.breaker.mode, "DEGRADED_FALLBACK", `the fourth or fifth slow verdict trips the breaker: ${JSON.stringify(st.counters)}`);
    let mode;

    await s.origin.clearFault();
    await s.origin.reset();
    const r = await s.get(`/v1/recommendations?category=audio`, next());
    assert.equal(r.headers["x-degraded-reason"], "BREAKER_OPEN", "held down right after the trip");
    assert.equal((await s.origin.stats()).requests, 0);

    await sleep(1_100);
    const sources = [];
    for (let i = 0; i < 4; i++) {
      const p = await s.get(`/v1/recommendations?category=audio`, next());
      sources.push(p.headers["x-result-source"]);
      mode = p.headers["x-breaker-mode"];
    }
    // Credit starts full: probe, skip, probe (2 good probes → promoted), then live.
    assert.deepEqual(sources, ["origin", "fallback", "origin", "origin"]);
    assert.equal(mode, "PRIMARY_HEALTHY");
    assert.equal((await s.origin.stats()).requests, 3, "two probes and one live call");
  });
});

describe("retry storms, identity and the status endpoint", () => {
  let s;
  before(async () => {
    s = await stack("recommendations", {
      seed: {
        USER_RECS: [{ key: `user_rec:${identityHash("alice")}`, value: { items: [{ sku: "ALICE-PRIVATE" }] }, age_ms: 60_000 }],
      },
    });
  });
  after(() => s?.dispose());

  test("a client retrying the same request more than twice in 10 s gets 429 ERR_RETRY_STORM_DETECTED", async () => {
    // Miniflare's local limiter counts in fixed 10 s windows aligned to the clock: if a
    // window boundary falls inside the burst, the burst is retried once in the new window.
    for (let round = 0; round < 2; round++) {
      const windowAtStart = Math.floor(Date.now() / 10_000);
      const h = bearer(`stormy-${round}`);
      const statuses = [];
      let last;
      for (let i = 0; i < 4; i++) {
        last = await s.get(`/v1/recommendations?category=kitchen`, h);
        statuses.push(last.status);
      }
      if (Math.floor(Date.now() / 10_000) !== windowAtStart && round === 0) continue;
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      assert.equal(last.json.code, "ERR_RETRY_STORM_DETECTED");
      assert.equal(last.json.retryable, true);
      assert.ok(last.json.correlationId);
      assert.equal(last.headers["retry-after"], "10");
      // Another client, or another request, is not limited.
      assert.equal((await s.get(`/v1/recommendations?category=kitchen`, bearer(`calm-${round}`))).status, 200);
      assert.equal((await s.get(`/v1/recommendations?category=audio`, h)).status, 200);
      return;
    }
  });

  test("forged, expired and alg=none tokens are refused alike", async () => {
    const good = mintToken(devSecret("TOKEN_HMAC_KEY"), { sub: "alice", iss: ISS, aud: "recommendations" });
    const forged = mintToken("not-the-key", { sub: "alice", iss: ISS, aud: "recommendations" });
    const expired = mintToken(devSecret("TOKEN_HMAC_KEY"), { sub: "alice", iss: ISS, aud: "recommendations" }, { ttlS: -3600 });
    const [h, p] = good.split(".");
    const none = `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${p}.`;
    const messages = new Set();
    for (const tok of [forged, expired, none, `${h}.${p}`]) {
      const r = await s.get(`/v1/recommendations`, { authorization: `Bearer ${tok}` });
      assert.equal(r.status, 401, r.text);
      assert.equal(r.json.code, "INVALID_TOKEN");
      assert.equal(r.headers["www-authenticate"], "Bearer");
      messages.add(r.json.message);
    }
    assert.equal(messages.size, 1, "the client learns nothing about which check failed");
  });

  test("one user cannot read another user's tier", async () => {
    await s.origin.setFault({ kind: "hang" });
    try {
      const alice = await s.get(`/v1/recommendations?category=audio`, bearer("alice"));
      assert.equal(alice.headers["x-fallback-tier"], "user");
      assert.match(alice.text, /ALICE-PRIVATE/);
      assert.match(alice.headers["cache-control"], /private/);

      // Bob, even naming Alice in the query string, gets no answer from her tier.
      const bob = await s.get(`/v1/recommendations?category=audio&user_id=alice&sub=alice`, bearer("bob"));
      assert.equal(bob.status, 200, bob.text);
      assert.notEqual(bob.headers["x-fallback-tier"], "user");
      assert.doesNotMatch(bob.text, /ALICE-PRIVATE/);
    } finally {
      await s.origin.clearFault();
    }
  });

  test("the status endpoint needs the admin token and reports the breaker and counters", async () => {
    const denied = await s.get(`/__understudy/status`);
    assert.equal(denied.status, 401);
    const wrong = await s.get(`/__understudy/status`, { authorization: "Bearer nope" });
    assert.equal(wrong.status, 401);
    const ok = await s.get(`/__understudy/status`, { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.release_id, s.release);
    assert.ok(["PRIMARY_HEALTHY", "DEGRADED_FALLBACK", "RECOVERING_PROBE"].includes(ok.json.breaker.mode));
    assert.ok(ok.json.counters.requests >= 1);
    assert.ok(ok.json.counters.storm_limited >= 1, "the storm test's 429 was counted");
    assert.ok(typeof ok.json.degraded_share === "number");
    // The time left on the baked stubs' validation (the snapshot is an hour old, the ceiling
    // 24 h): what the "curated data running out" alert watches.
    const stubs = ok.json.freshness.stubs;
    assert.ok(stubs.left_ms > 22 * 3600e3 && stubs.left_ms <= 23 * 3600e3, JSON.stringify(stubs));
    assert.equal(stubs.expires_at_ms - stubs.evidence_at_ms, 24 * 3600e3);
  });
});

describe("a KV read slower than its timeout (issue #3)", () => {
  let s;
  // The seed's 60 ms leaves 7 ms after the race and the user tier's 8 ms, so a timer that
  // fires late on a busy machine would skip the category tier for lack of budget —
  // correct, but not what this case is about (a clean-clone CI run once saw 40 ms go
  // missing there, and the category tier was skipped with "0 ms left"). 200 ms isolates the
  // fall-through; the user tier's reads take 1 s, so a Worker that waited for one could
  // not answer inside the budget plus the slack.
  const BUDGET_MS = 200;
  const READ_MS = 1_000;
  const SLACK_MS = Number(process.env.UNDERSTUDY_E2E_SLACK_MS ?? 250);
  before(async () => {
    s = await stack("recommendations", {
      edit: (t) => t.replace('total = "60ms"', `total = "${BUDGET_MS}ms"`),
      // The user tier's reads take READ_MS; its read timeout is 8 ms.
      slowKv: { USER_RECS: READ_MS },
      seed: {
        USER_RECS: [{ key: `user_rec:${identityHash("slow-reader")}`, value: { items: [{ sku: "USER-1" }] }, age_ms: 60_000 }],
      },
      publish: [{ tier: "category", lists: "recommendations.top-sellers.csv" }],
    });
    // Warm the isolate (module instantiation and bake decoding happen once).
    await s.get(`/v1/recommendations?category=kitchen`, bearer("warm-up"));
  });
  after(() => s?.dispose());

  test("the next tier answers within the budget", async () => {
    await s.origin.setFault({ kind: "hang" });
    const r = await s.get(`/v1/recommendations?category=audio`, bearer("slow-reader"));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers["x-degraded"], "true");
    assert.equal(r.headers["x-degraded-reason"], "ML_TIMEOUT");
    // The runtime's stdout may lag the answer a little.
    const logged = () => s.edge.logs(true).findLast((l) => l.correlation_id === r.headers["x-correlation-id"]);
    for (let i = 0; i < 40 && !logged(); i++) await sleep(25);
    const line = logged();
    const notes = JSON.stringify(line?.notes);
    assert.equal(r.headers["x-fallback-tier"], "category", `the user tier's read overran its 8 ms timeout; notes: ${notes}`);
    assert.match(r.text, /SKU-2001/);
    assert.doesNotMatch(r.text, /USER-1/);
    assert.ok(r.elapsedMs < BUDGET_MS + SLACK_MS, `answered in ${r.elapsedMs.toFixed(1)} ms, not after the ${READ_MS} ms read`);
    // The Worker's log line records why the user tier was passed over.
    assert.ok(line, `the edge logged the answer (correlation ID ${r.headers["x-correlation-id"]})`);
    assert.ok(line.notes.some((n) => n.tier === "user" && n.code === "KV_TIMEOUT"), notes);
  });
});

describe("a write-through the KV store refuses", () => {
  let s;
  before(async () => {
    // The user tier's namespace refuses every put; its reads work.
    s = await stack("recommendations", { slowKv: { USER_RECS: { delayMs: 0, failPuts: true } } });
  });
  after(() => s?.dispose());

  test("the live answer is served, the failure logged, and the next live answer writes again", async () => {
    const logged = async (cid) => {
      for (let i = 0; i < 40; i++) {
        const l = s.edge.logs(true).find((x) => x.event === "write_through_failed" && x.correlation_id === cid);
        if (l) return l;
        await sleep(25);
      }
      return undefined;
    };
    const first = await s.get(`/v1/recommendations?category=audio`, bearer("unwritable"));
    assert.equal(first.status, 200, first.text);
    assert.equal(first.headers["x-degraded"], "false", "a failed write never costs the live answer");
    const line = await logged(first.headers["x-correlation-id"]);
    assert.ok(line, `a write_through_failed line for ${first.headers["x-correlation-id"]}`);
    assert.equal(line.binding, "USER_RECS");
    assert.match(line.error, /simulated KV outage/);
    // Forgotten by the engine: inside the refresh interval, the next live answer tries again.
    const second = await s.get(`/v1/recommendations?category=audio`, bearer("unwritable"));
    assert.equal(second.headers["x-degraded"], "false");
    assert.ok(await logged(second.headers["x-correlation-id"]), "the second live answer wrote (and failed) again");
  });
});

describe("retries inside the budget (orders API, seed 004)", () => {
  let s;
  const tok = (sub) => ({
    authorization: `Bearer ${mintToken(devSecret("API_TOKEN_KEY"), { sub, tenant: "acme", iss: ISS, aud: "orders-api" })}`,
  });
  before(async () => {
    // Seed 004's shape — 3 attempts, full-jitter backoff from 100 ms up to 1 s, Retry-After
    // honoured — with the 10 s budget scaled to 3 s so the cases run in a test's time. The
    // deadline leaves the committed tier's 500 ms read room to run (ERR_BUDGET_NO_SLACK).
    s = await stack("api", {
      edit: (t) =>
        t
          .replace(/^total = .*$/m, 'total = "3s"')
          .replace(/^deadline = .*$/m, 'deadline = "2400ms"')
          .replace(/^attempt_timeout = .*$/m, 'attempt_timeout = "800ms"'),
      // After every counter reset the origin's first request gets a 503 and the rest are
      // healthy, unless a test sets an override (overrides win over the script). Healing by
      // script, not by polling the counters, so a retry drawn at 0 ms of jitter cannot race
      // the heal.
      originScript: { rules: [{ requests: { from: 1, to: 1 }, fault: { kind: "status", code: 503 } }] },
    });
  });
  after(() => s?.dispose());

  test("a 503 then a success: retried once, answered live", async () => {
    // The script answers request 1 with a 503 and heals from request 2 on.
    await s.origin.reset();
    const r = await s.get(`/v1/orders/ORDER-RETRY1`, tok("retry-user-1"));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers["x-result-source"], "origin");
    assert.equal((await s.origin.stats()).requests, 2, "one retry");
    const line = s.edge.logs(true).filter((l) => l.outcome === "live").at(-1);
    assert.equal(line.attempts, 2);
  });

  test("an origin 404 is the caller's: passed through with retryable false, not retried", async () => {
    await s.origin.reset();
    await s.origin.setFault({ kind: "status", code: 404 });
    const r = await s.get(`/v1/orders/ORDER-NOTFOUND`, tok("retry-user-2"));
    await s.origin.clearFault();
    assert.equal(r.status, 404, r.text);
    assert.equal(r.json?.code, "ORIGIN_REJECTED_REQUEST");
    assert.equal(r.json?.retryable, false);
    assert.equal(r.json?.correlationId, r.headers["x-correlation-id"]);
    assert.equal(r.headers["x-result-source"], "origin");
    assert.equal((await s.origin.stats()).requests, 1, "never retried");
  });

  test("429 with Retry-After: 1 is honoured when it fits the remaining budget", async () => {
    await s.origin.reset();
    await s.origin.setFault({ kind: "rate_limited", retry_after_s: 1 });
    const heal = (async () => {
      for (let i = 0; i < 200 && (await s.origin.stats()).requests < 1; i++) await sleep(2);
      await s.origin.clearFault();
    })();
    const r = await s.get(`/v1/orders/ORDER-RETRY2`, tok("retry-user-3"));
    await heal;
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers["x-result-source"], "origin");
    assert.ok(r.elapsedMs >= 1_000, `waited the origin's Retry-After (${r.elapsedMs.toFixed(0)} ms)`);
    assert.ok(r.elapsedMs < 3_000 + 100, "inside the total budget");
  });

  test("a Retry-After longer than the budget left skips the attempt", async () => {
    await s.origin.reset();
    await s.origin.setFault({ kind: "rate_limited", retry_after_s: 30 });
    const r = await s.get(`/v1/orders/ORDER-RETRY3`, tok("retry-user-4"));
    await s.origin.clearFault();
    assert.equal(r.status, 503, r.text);
    assert.equal(r.headers["x-degraded-reason"], "ML_429");
    assert.equal((await s.origin.stats()).requests, 1, "no attempt made early against the origin's wish");
    assert.ok(r.elapsedMs < 1_000, `answered at once (${r.elapsedMs.toFixed(0)} ms)`);
  });
});
