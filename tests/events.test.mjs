// Issue 11 end to end: durable events in the real Worker (workerd through Miniflare) with the
// outbox Durable Object on SQLite, delivering to the simulated consumer. Seed 004's policy
// (policies/api.toml) with its retry schedule shrunk (50 ms doubling to 400 ms, 300 ms per
// attempt) so that eight attempts take seconds. Each test uses its own aggregates and event
// IDs; every wait is bounded.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile, readdir } from "node:fs/promises";
import { join } from "node:path";

import {
  requireEdge,
  startOrigin,
  tempDir,
  preparePolicy,
  buildPolicy,
  timedFetch,
  mintToken,
  devSecret,
  understudy,
} from "./harness.mjs";
import { startEdge, miniflare } from "../scripts/edge-server.mjs";

requireEdge();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ISS = "https://auth.mercado.example";
const ADMIN = devSecret("ADMIN_TOKEN");

const fast = (replay) => (t) =>
  t
    .replace('backoff = { base = "7s", max = "5m" }', 'backoff = { base = "50ms", max = "400ms" }')
    .replace('window = "15m"', 'window = "20s"')
    .replace('attempt_timeout = "10s"', 'attempt_timeout = "300ms"')
    .replace("replay = false", `replay = ${replay}`);

/** `prepare(persist)` runs before the edge starts on that storage. */
async function stack({ replay = true, prepare } = {}) {
  const tmp = await tempDir("understudy-events-");
  const policy = await preparePolicy("api", tmp.dir, { edit: fast(replay) });
  const build = await buildPolicy(policy, join(tmp.dir, "dist"));
  const origin = await startOrigin();
  const persist = join(tmp.dir, "persist");
  await prepare?.(persist);
  const start = () => startEdge({ dist: build.dir, originUrl: origin.url, eventsUrl: origin.eventsUrl, persist, verbose: false });
  let edge = await start();
  const token = (tenant) =>
    mintToken(devSecret("API_TOKEN_KEY"), { iss: ISS, aud: "orders-api", sub: "producer", ...(tenant ? { tenant } : {}) });
  const post = (body, { tenant = "acme", headers = {} } = {}) =>
    timedFetch(`${edge.url}/v1/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${token(tenant)}`, "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  const admin = (method, path) => timedFetch(`${edge.url}/__understudy/events${path}`, { method, headers: { authorization: `Bearer ${ADMIN}` } });
  const inspect = async (id) => (await admin("GET", `/${id}`)).json;
  /** Polls until `id`'s record satisfies `ok`; returns the record. */
  const until = async (id, ok, what, timeoutMs = 25_000) => {
    const end = Date.now() + timeoutMs;
    let last;
    while (Date.now() < end) {
      last = (await inspect(id))?.event;
      if (last && ok(last)) return last;
      await sleep(100);
    }
    assert.fail(`${id}: never ${what}; last: ${JSON.stringify(last)}`);
  };
  return {
    get edge() {
      return edge;
    },
    /** Stops the edge and starts it again on the same storage. */
    restart: async () => {
      await edge.dispose();
      edge = await start();
    },
    origin,
    persist,
    post,
    admin,
    inspect,
    until,
    dispose: async () => {
      await edge.dispose().catch(() => {});
      await origin.stop().catch(() => {});
      await tmp.cleanup().catch(() => {});
    },
  };
}

let n = 0;
function event(aggregate, sequence, { id, version = 2, payload } = {}) {
  n += 1;
  return {
    eventId: id ?? `evt-${process.pid}-${n}`,
    type: "order.placed",
    schemaVersion: version,
    aggregateId: aggregate,
    sequence,
    occurredAt: "2026-11-30T12:00:00Z",
    correlationId: `corr-${n}`,
    payload: payload ?? {
      orderId: `o-${n}`,
      total: 12.5,
      currency: "EUR",
      customer: { email: `ann-${n}@example.com` },
      payment: { card_number: `4111-1111-${String(n).padStart(4, "0")}` },
    },
  };
}

const delivered = (r) => r.state === "DELIVERED";

describe("durable events [V-*]", () => {
  let s;
  before(async () => {
    s = await stack();
  });
  after(async () => {
    await s?.dispose();
  });

  test("schema N and N-1 are accepted; an unknown version, a missing field and an unknown field are refused naming the field", async () => {
    const v2 = await s.post(event("schema-a", 1));
    assert.equal(v2.status, 202, v2.text);
    assert.equal(v2.json.status, "accepted");
    const v1 = await s.post(event("schema-a", 2, { version: 1, payload: { orderId: "o", total: 1 } }));
    assert.equal(v1.status, 202, v1.text);
    const v3 = await s.post(event("schema-a", 3, { version: 3 }));
    assert.equal(v3.status, 422);
    assert.deepEqual([v3.json.code, v3.json.field, v3.json.retryable], ["UNSUPPORTED_SCHEMA_VERSION", "schemaVersion", false]);
    const missing = await s.post(event("schema-a", 3, { payload: { orderId: "o", total: 1 } }));
    assert.deepEqual([missing.status, missing.json.field], [422, "payload.currency"]);
    const typo = await s.post({ ...event("schema-a", 3), aggregateID: "x" });
    assert.deepEqual([typo.status, typo.json.code, typo.json.field], [400, "UNKNOWN_FIELD", "aggregateID"]);
    const bad = await s.post("{not json");
    assert.deepEqual([bad.status, bad.json.code], [400, "INVALID_JSON"]);
    // A key given twice, at any depth, is refused: parsers disagree on which one wins.
    const twice = JSON.stringify(event("schema-a", 3)).replace('"total":12.5', '"total":12.5,"total":9999');
    const dup = await s.post(twice);
    assert.deepEqual([dup.status, dup.json.code, dup.json.field], [400, "DUPLICATE_FIELD", "payload.total"], dup.text);
    assert.ok(!dup.text.includes("9999"), "the values are not echoed");
  });

  test("callers are authenticated, need a tenant, and bodies are size-limited", async () => {
    const none = await timedFetch(`${s.edge.url}/v1/events`, { method: "POST", body: JSON.stringify(event("auth-a", 1)) });
    assert.equal(none.status, 401);
    const noTenant = await s.post(event("auth-a", 1), { tenant: null });
    assert.deepEqual([noTenant.status, noTenant.json.code], [403, "TENANT_REQUIRED"]);
    const big = await s.post(event("auth-a", 1, { payload: { orderId: "o", total: 1, currency: "EUR", pad: "x".repeat(70_000) } }));
    assert.deepEqual([big.status, big.json.code], [413, "BODY_TOO_LARGE"]);
    const text = await s.post(event("auth-a", 1), { headers: { "content-type": "text/plain" } });
    assert.deepEqual([text.status, text.json.code], [415, "UNSUPPORTED_MEDIA_TYPE"]);
    // Every refusal has the same shape; `field` is "" when no envelope field is at fault.
    for (const r of [none, noTenant, big, text]) {
      assert.deepEqual([r.json.field, r.json.retryable, typeof r.json.correlationId], ["", false, "string"], r.text);
    }
  });

  test("a repeated eventId is acknowledged once; another tenant reusing it is refused, never merged", async () => {
    const e = event("dup-a", 1);
    assert.equal((await s.post(e)).status, 202);
    const again = await s.post(e);
    assert.deepEqual([again.status, again.json.status], [202, "duplicate"]);
    const other = await s.post(e, { tenant: "globex" });
    assert.deepEqual([other.status, other.json.code], [409, "EVENT_ID_REUSED"]);
    const r = await s.until(e.eventId, delivered, "delivered");
    assert.equal(r.tenant, "acme");
    // Another event at the same sequence is refused (409, not retryable); its ID stays free
    // for the corrected resend.
    const clash = event("dup-a", 1);
    const taken = await s.post(clash);
    assert.deepEqual([taken.status, taken.json.code, taken.json.retryable], [409, "SEQUENCE_TAKEN", false]);
    assert.equal((await s.post({ ...clash, sequence: 2 })).status, 202);
    const ledger = await s.origin.ledger();
    assert.equal(ledger.commits.filter((c) => c.event_id === e.eventId).length, 1);
    assert.equal(ledger.delivered[e.eventId], 1, "stored once, delivered once");
  });

  test("an eventId reused with another payload is refused with 409 naming eventId; a respaced resend is a duplicate", async () => {
    const e = event("reuse-a", 1);
    assert.equal((await s.post(e)).status, 202);
    // Was: 202 "duplicate", and the new payload dropped without a word.
    const other = await s.post({ ...e, payload: { ...e.payload, total: 99 } });
    assert.deepEqual([other.status, other.json.code, other.json.field, other.json.retryable], [409, "EVENT_ID_REUSED", "eventId", false], other.text);
    assert.match(other.json.message, /`payload` differs/);
    const later = await s.post({ ...e, occurredAt: "2026-11-30T12:00:01Z" });
    assert.deepEqual([later.status, later.json.code], [409, "EVENT_ID_REUSED"]);
    assert.match(later.json.message, /`occurredAt` differs/);
    // The same event sent again with other spacing and key order is a duplicate.
    const reordered = (v) =>
      v && typeof v === "object" ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reordered(x)])) : v;
    const respaced = JSON.stringify(reordered(e), null, 2);
    const again = await s.post(respaced);
    assert.deepEqual([again.status, again.json.status], [202, "duplicate"], again.text);
    await s.until(e.eventId, delivered, "delivered");
    const ledger = await s.origin.ledger();
    assert.equal(ledger.delivered[e.eventId], 1, "stored once, delivered once");
    const shown = await s.inspect(e.eventId);
    assert.equal(shown.payload.total, e.payload.total, "the event accepted first is the one kept");
  });

  test("out-of-order arrivals are held for their predecessor and delivered in sequence order", async () => {
    const [e1, e2, e3] = [event("order-a", 1), event("order-a", 2), event("order-a", 3)];
    assert.equal((await s.post(e3)).status, 202);
    await sleep(300);
    assert.equal((await s.inspect(e3.eventId)).event.state, "PENDING", "held: its predecessors are missing");
    assert.equal((await s.post(e1)).status, 202);
    assert.equal((await s.post(e2)).status, 202);
    await s.until(e3.eventId, delivered, "delivered");
    const ledger = await s.origin.ledger();
    const seqs = ledger.commits.filter((c) => c.aggregate === "order-a").map((c) => c.sequence);
    assert.deepEqual(seqs, [1, 2, 3]);
    assert.equal(ledger.order_violations, 0);
  });

  test("each retryable failure class is retried with the same Idempotency-Key until delivered", async () => {
    const classes = [
      [{ kind: "hang" }, "TIMEOUT"],
      [{ kind: "reset" }, "CONNECT"],
      [{ kind: "reset_after_commit" }, "CONNECT"],
      [{ kind: "status", code: 408 }, "HTTP_408"],
      [{ kind: "status", code: 503 }, "HTTP_5XX"],
      [{ kind: "rate_limited", retry_after_s: 1 }, "HTTP_429"],
    ];
    const events = classes.map(([fault], i) => [event(`retry-${fault.kind}-${i}`, 1), fault]);
    await s.origin.consumer({ rules: events.map(([e, fault]) => ({ event: e.eventId, times: 2, fault })) });
    const t0 = Date.now();
    for (const [e] of events) assert.equal((await s.post(e)).status, 202);
    const ledger0 = await s.origin.ledger();
    for (const [i, [e]] of events.entries()) {
      const r = await s.until(e.eventId, delivered, "delivered");
      assert.equal(r.attempts, 3, `${classes[i][1]}: two failures, then delivered`);
      assert.equal(r.last_error.split(":")[0], classes[i][1]);
      assert.equal(r.last_error_class, "dependency");
    }
    const ledger = await s.origin.ledger();
    for (const [e] of events) {
      assert.equal(ledger.commits.filter((c) => c.event_id === e.eventId).length, 1, `${e.eventId}: one side effect`);
      assert.equal(ledger.commits.find((c) => c.event_id === e.eventId).key, e.eventId, "Idempotency-Key is the eventId");
    }
    assert.ok(ledger.duplicates_acknowledged > ledger0.duplicates_acknowledged, "the commit-then-reset delivery was repeated");
    assert.equal(ledger.duplicate_side_effects, 0);
    // Retry-After: 1 was honoured twice: that event took at least 2 s.
    const limited = await s.inspect(events[5][0].eventId);
    assert.ok(limited.event.delivered_at - limited.event.stored_at >= 2_000, JSON.stringify(limited.event));
    assert.ok(Date.now() - t0 < 25_000);
    await s.origin.clearConsumer();
  });

  test("permanent 4xx dead-letter at once and hold the aggregate; exhausted events dead-letter after the 8th attempt; replay keeps the eventId", async () => {
    const bad = event("dead-a", 1);
    const next = event("dead-a", 2);
    const auth = event("dead-b", 1);
    const exhausted = event("dead-c", 1);
    await s.origin.consumer({
      rules: [
        { event: bad.eventId, times: 1, fault: { kind: "status", code: 400 } },
        { event: auth.eventId, times: 1, fault: { kind: "status", code: 401 } },
        { event: exhausted.eventId, times: 8, fault: { kind: "status", code: 502 } },
      ],
    });
    for (const e of [bad, next, auth, exhausted]) assert.equal((await s.post(e)).status, 202);
    const b = await s.until(bad.eventId, (r) => r.state === "DEAD_LETTER", "dead-lettered");
    assert.deepEqual([b.attempts, b.last_error_class, b.last_status], [1, "caller", 400]);
    const a = await s.until(auth.eventId, (r) => r.state === "DEAD_LETTER", "dead-lettered");
    assert.deepEqual([a.attempts, a.last_error_class, a.last_status], [1, "credential", 401]);
    const x = await s.until(exhausted.eventId, (r) => r.state === "DEAD_LETTER", "exhausted");
    assert.equal(x.attempts, 8);
    assert.equal(x.last_error, "HTTP_5XX: consumer answered 502", "the consumer answered, not the model's origin");
    await sleep(500);
    assert.equal((await s.inspect(next.eventId)).event.state, "PENDING", "held behind its dead letter");
    const status = await timedFetch(`${s.edge.url}/__understudy/status`, { headers: { authorization: `Bearer ${ADMIN}` } });
    const ev = status.json.events;
    assert.ok(ev.dead_letters >= 3, JSON.stringify(ev));
    assert.ok(ev.alerts.some((al) => al.name === "EVENTS_DEAD_LETTERS"), JSON.stringify(ev.alerts));
    assert.ok(ev.held.some((h) => h.why === "dead_letter" && h.event_id === bad.eventId), JSON.stringify(ev.held));

    const listed = understudy(["events", "list", "--edge", s.edge.url, "--token", ADMIN, "--state", "DEAD_LETTER", "--format", "json"]);
    assert.equal(listed.status, 0, listed.stderr);
    const ids = JSON.parse(listed.stdout).events.map((e) => e.event_id);
    for (const e of [bad, auth, exhausted]) assert.ok(ids.includes(e.eventId), `${e.eventId} listed`);

    for (const e of [bad, auth, exhausted]) {
      const r = understudy(["events", "replay", e.eventId, "--edge", s.edge.url, "--token", ADMIN]);
      assert.equal(r.status, 0, r.stderr);
    }
    for (const e of [bad, next, auth, exhausted]) await s.until(e.eventId, delivered, "delivered after replay");
    const replayed = (await s.inspect(bad.eventId)).event;
    assert.deepEqual([replayed.event_id, replayed.replays], [bad.eventId, 1]);
    const ledger = await s.origin.ledger();
    assert.deepEqual(ledger.commits.filter((c) => c.aggregate === "dead-a").map((c) => [c.sequence, c.key]), [[1, bad.eventId], [2, next.eventId]]);
    const again = understudy(["events", "replay", bad.eventId, "--edge", s.edge.url, "--token", ADMIN]);
    assert.equal(again.status, 1, "a delivered event is not a dead letter");
    assert.match(again.stderr, /NOT_A_DEAD_LETTER/);
    await s.origin.clearConsumer();
  });

  test("skip moves a held aggregate past its dead letter", async () => {
    const bad = event("skip-a", 1);
    const next = event("skip-a", 2);
    await s.origin.consumer({ rules: [{ event: bad.eventId, fault: { kind: "status", code: 422 } }] });
    for (const e of [bad, next]) assert.equal((await s.post(e)).status, 202);
    await s.until(bad.eventId, (r) => r.state === "DEAD_LETTER", "dead-lettered");
    const r = understudy(["events", "skip", "--tenant", "acme", "--aggregate", "skip-a", "--edge", s.edge.url, "--token", ADMIN, "--format", "json"]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).skip.event_id, bad.eventId);
    await s.until(next.eventId, delivered, "delivered after the skip");
    const skipped = (await s.inspect(bad.eventId)).event;
    assert.deepEqual([skipped.state, skipped.skipped], ["DEAD_LETTER", true]);
    const none = understudy(["events", "skip", "--tenant", "acme", "--aggregate", "skip-a", "--edge", s.edge.url, "--token", ADMIN]);
    assert.equal(none.status, 1);
    await s.origin.clearConsumer();
  });

  test("redacted payload fields never reach the logs, and inspect masks them", async () => {
    const e = event("redact-a", 1);
    assert.equal((await s.post(e)).status, 202);
    await s.until(e.eventId, delivered, "delivered");
    const shown = understudy(["events", "inspect", e.eventId, "--edge", s.edge.url, "--token", ADMIN, "--format", "json"]);
    assert.equal(shown.status, 0, shown.stderr);
    const p = JSON.parse(shown.stdout).payload;
    assert.deepEqual([p.customer.email, p.payment.card_number, p.orderId], ["[REDACTED]", "[REDACTED]", e.payload.orderId]);
    assert.ok(!shown.stdout.includes(e.payload.customer.email));
    // The same fields however the producer spelled them.
    const spelled = event("redact-b", 1, {
      payload: { orderId: "o-b", total: 1, currency: "EUR", Customer: { Email: "b1@example.com" }, "Payment.Card_Number": "4111-b2", "customer.email": "b3@example.com" },
    });
    assert.equal((await s.post(spelled)).status, 202);
    const other = understudy(["events", "inspect", spelled.eventId, "--edge", s.edge.url, "--token", ADMIN, "--format", "json"]);
    assert.equal(other.status, 0, other.stderr);
    const q = JSON.parse(other.stdout).payload;
    assert.deepEqual([q.Customer.Email, q["Payment.Card_Number"], q["customer.email"], q.orderId], ["[REDACTED]", "[REDACTED]", "[REDACTED]", "o-b"]);
    const logs = s.edge.logs().join("\n");
    assert.ok(logs.includes(e.eventId), "positive control: the event's log lines are there");
    for (const secret of [e.payload.customer.email, e.payload.payment.card_number]) {
      assert.ok(!logs.includes(secret), `log lines carry ${secret}`);
    }
  });

  test("events are encrypted at rest: the stored bytes never contain the payload", async () => {
    const e = event("rest-a", 1);
    assert.equal((await s.post(e)).status, 202);
    await s.until(e.eventId, delivered, "delivered");
    const files = [];
    const walk = async (dir) => {
      for (const d of await readdir(dir, { withFileTypes: true })) {
        const p = join(dir, d.name);
        if (d.isDirectory()) await walk(p);
        else files.push(await readFile(p));
      }
    };
    await walk(s.persist);
    const all = Buffer.concat(files);
    assert.ok(all.includes(Buffer.from(e.eventId)), "positive control: the event ID is stored in clear");
    for (const plain of [e.payload.orderId, e.payload.customer.email, e.payload.payment.card_number]) {
      assert.ok(!all.includes(Buffer.from(plain)), `storage holds ${plain}`);
    }
  });
});

describe("replay switched off", () => {
  test("replay of a dead letter is refused while the policy's replay switch is off", { timeout: 120_000 }, async () => {
    const s = await stack({ replay: false });
    try {
      const bad = event("off-a", 1);
      await s.origin.consumer({ rules: [{ event: bad.eventId, fault: { kind: "status", code: 400 } }] });
      assert.equal((await s.post(bad)).status, 202);
      await s.until(bad.eventId, (r) => r.state === "DEAD_LETTER", "dead-lettered");
      const r = understudy(["events", "replay", bad.eventId, "--edge", s.edge.url, "--token", ADMIN]);
      assert.equal(r.status, 1);
      assert.match(r.stderr, /403 REPLAY_DISABLED/);
      assert.equal((await s.inspect(bad.eventId)).event.state, "DEAD_LETTER");
      const noToken = understudy(["events", "list", "--edge", s.edge.url, "--token", "wrong"]);
      assert.equal(noToken.status, 2);
    } finally {
      await s.dispose();
    }
  });
});

// The outbox's tables as the release before event digests created them, and a shard's name
// as protocol.rs computes it (FNV-1a, 64-bit, over the parts joined by 0x1f).
const TABLES_BEFORE_DIGESTS = [
  `CREATE TABLE IF NOT EXISTS events(
    event_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, aggregate TEXT NOT NULL,
    sequence INTEGER NOT NULL, event_type TEXT NOT NULL, schema_version INTEGER NOT NULL,
    occurred_at TEXT NOT NULL, correlation_id TEXT NOT NULL, state TEXT NOT NULL,
    attempts INTEGER NOT NULL, last_error_class TEXT, last_error TEXT, last_status INTEGER,
    next_attempt_at INTEGER, stored_at INTEGER NOT NULL, first_attempt_at INTEGER,
    delivered_at INTEGER, skipped INTEGER NOT NULL, replays INTEGER NOT NULL, payload BLOB,
    UNIQUE(tenant, aggregate, sequence))`,
  "CREATE INDEX IF NOT EXISTS events_by_state ON events(state, stored_at)",
  `CREATE TABLE IF NOT EXISTS aggregates(tenant TEXT NOT NULL, aggregate TEXT NOT NULL,
    cursor INTEGER NOT NULL, PRIMARY KEY(tenant, aggregate))`,
  `CREATE TABLE IF NOT EXISTS claims(event_id TEXT PRIMARY KEY, tenant TEXT NOT NULL,
    aggregate TEXT NOT NULL, sequence INTEGER NOT NULL)`,
  "CREATE TABLE IF NOT EXISTS tally(name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
];
function shard(prefix, parts, shards = 16) {
  const M = (1n << 64n) - 1n;
  let h = 0xcbf29ce484222325n;
  parts.forEach((p, i) => {
    if (i > 0) h = ((h ^ 0x1fn) * 0x100000001b3n) & M;
    for (const b of Buffer.from(p)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & M;
  });
  return `${prefix}-${h % BigInt(shards)}`;
}
// A Worker of the edge's name with the outbox's class and binding (so the same objects, on
// the same storage), that runs the SQL it is sent in the shard it names.
const OLD_OUTBOX = `
export class OutboxShard {
  constructor(state) { this.sql = state.storage.sql; }
  async fetch(req) {
    for (const [q, ...bind] of await req.json()) this.sql.exec(q, ...bind);
    return new Response("ok");
  }
}
export default {
  async fetch(req, env) {
    const { shard, statements } = await req.json();
    const stub = env.UNDERSTUDY_OUTBOX.get(env.UNDERSTUDY_OUTBOX.idFromName(shard));
    return stub.fetch("https://outbox.shard/old", { method: "POST", body: JSON.stringify(statements) });
  },
};`;

describe("outbox objects stored before event digests", () => {
  test("are migrated where they stand: their events stay duplicates whatever is resent, new ones are digested", { timeout: 180_000 }, async () => {
    const old = event("mig-a", 1);
    const now = Date.now();
    const s = await stack({
      prepare: async (persist) => {
        const mf = miniflare({
          workers: [{
            name: "understudy-edge",
            modules: true,
            script: OLD_OUTBOX,
            compatibilityDate: "2025-01-01",
            durableObjects: { UNDERSTUDY_OUTBOX: { className: "OutboxShard", useSQLite: true } },
          }],
          durableObjectsPersist: join(persist, "do"),
        });
        try {
          const write = async (name, statements) => {
            const r = await mf.dispatchFetch("http://old.test/", { method: "POST", body: JSON.stringify({ shard: name, statements }) });
            assert.equal(r.status, 200, await r.text());
          };
          const tables = TABLES_BEFORE_DIGESTS.map((q) => [q]);
          await write(shard("agg", ["acme", old.aggregateId]), [
            ...tables,
            [
              `INSERT INTO events(event_id, tenant, aggregate, sequence, event_type, schema_version,
                 occurred_at, correlation_id, state, attempts, stored_at, first_attempt_at,
                 delivered_at, skipped, replays, payload)
               VALUES (?, 'acme', ?, 1, ?, ?, ?, ?, 'DELIVERED', 1, ?, ?, ?, 0, 0, NULL)`,
              old.eventId, old.aggregateId, old.type, old.schemaVersion, old.occurredAt, old.correlationId, now, now, now,
            ],
            ["INSERT INTO aggregates(tenant, aggregate, cursor) VALUES ('acme', ?, 1)", old.aggregateId],
          ]);
          await write(shard("ids", [old.eventId]), [
            ...tables,
            ["INSERT INTO claims(event_id, tenant, aggregate, sequence) VALUES (?, 'acme', ?, 1)", old.eventId, old.aggregateId],
          ]);
        } finally {
          await mf.dispose();
        }
      },
    });
    try {
      // A row without a digest matches any resend of its identity, as before.
      for (const resend of [old, { ...old, payload: { ...old.payload, total: 99 } }]) {
        const r = await s.post(resend);
        assert.deepEqual([r.status, r.json.status], [202, "duplicate"], r.text);
      }
      assert.equal((await s.inspect(old.eventId)).event.state, "DELIVERED");
      // The migrated table takes new events with their digest, and delivers them.
      const next = event("mig-a", 2);
      assert.equal((await s.post(next)).status, 202);
      await s.until(next.eventId, delivered, "delivered");
      const reused = await s.post({ ...next, payload: { ...next.payload, total: 99 } });
      assert.deepEqual([reused.status, reused.json.code], [409, "EVENT_ID_REUSED"], reused.text);
      // Started again, the objects do not migrate twice.
      await s.restart();
      const again = await s.post(next);
      assert.deepEqual([again.status, again.json.status], [202, "duplicate"], again.text);
      const third = event("mig-a", 3);
      assert.equal((await s.post(third)).status, 202);
      await s.until(third.eventId, delivered, "delivered");
    } finally {
      await s.dispose();
    }
  });
});
