// The Worker's JS driver (edge/worker/src/io.js), run in Node against a stand-in engine
// that speaks the real wire format and stand-in bindings: no runtime needed. The driver
// must perform exactly what the engine says and report each thing that ended once — it
// decides nothing (docs/adr/010-the-engine-owns-time.md). The real bindings are exercised
// by the end-to-end suites.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { us_run, us_incoming, us_outbox, us_outbox_fetch, us_outbox_alarm, us_coordinator, us_coordinator_fetch, FETCHED, KV, LIMITED, TIMER, HEARD, ASKED } from "../edge/worker/src/io.js";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The wire format's writer (understudy_core::wire), for the stand-in engine.
const num = (n) => `${n};`;
const str = (s) => (s === undefined ? "-1;" : `${s.length};${s}`);
const out = (wake, ...cmds) => num(wake) + cmds.join("");
const fetchCmd = (io, url, { method = "GET", head = "", body, max = 1 << 20 } = {}) =>
  num(1) + num(io) + str(url) + str(method) + str(head) + str(body) + num(max);
const kvCmd = (io, binding, key) => num(2) + num(io) + str(binding) + str(key);
const limitCmd = (io, binding, key) => num(3) + num(io) + str(binding) + str(key);
const abortCmd = (io) => num(5) + num(io);
const hearCmd = (io, until) => num(6) + num(io) + num(until);
const askCmd = (call) => num(9) + callsOf([call]);
const eventsCmd = (io) => num(7) + num(io);
// A call's fields as the engine writes them (`wire::calls`): the answer's begin deadline
// defaults to its end (a report's are both the report timeout).
const callsOf = (calls) =>
  num(calls.length) +
  calls.map(([path, binding, object, hint, body, timeout, begin = timeout]) => str(path) + str(binding) + str(object) + str(hint) + str(body) + num(timeout) + num(begin)).join("");
const respondCmd = (status, body, { head = "Content-Type\napplication/json\nX-Correlation-ID\ncid-1", log = '{"outcome":"x"}', cid = "cid-1", writes = [], calls = [], wake = -1 } = {}) =>
  num(8) + num(status) + str(head) + str(body) + str(log) + str(cid) + num(0) + num(writes.length) + writes.map((w) => w.map(str).join("")).join("") + callsOf(calls) + num(wake);

// A stand-in engine: `script(report)` returns the next output for each report, and every
// report is recorded as [kind & 0xff, io, num, a, b, bytes length, live].
function engine(script) {
  const reports = [];
  return {
    reports,
    step(id, kind, io, n, a, b, bytes) {
      const r = { kind: kind & 0xff, live: (kind & 256) !== 0, io, num: n, a, b, bytes };
      reports.push(r);
      return script(r);
    },
    perform: () => undefined,
    performed() {},
    failed: (id, why) => out(-1, respondCmd(503, JSON.stringify({ code: "DEPENDENCY_UNAVAILABLE", why }))),
    writeFailed() {},
  };
}

function origin(handler) {
  return new Promise((resolve) => {
    const s = createServer(handler);
    s.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${s.address().port}`, close: () => s.close() }));
  });
}

test("a fetch is performed as given and reported once with its status and body", async () => {
  const seen = [];
  const o = await origin((req, res) => {
    seen.push([req.method, req.url, req.headers["x-a"]]);
    res.setHeader("content-type", "application/json");
    res.end('{"items":[1]}');
  });
  const e = engine((r) => out(-1, respondCmd(200, `got ${r.num} ${Buffer.from(r.bytes).toString()}`)));
  const res = await us_run(1, out(Date.now() + 5000, fetchCmd(7, `${o.url}/m?q=1`, { head: "X-A\n1" })), {}, {}, null, e);
  assert.equal(await res.text(), 'got 200 {"items":[1]}');
  assert.deepEqual(seen, [["GET", "/m?q=1", "1"]]);
  assert.equal(e.reports.length, 1);
  assert.equal(e.reports[0].kind, FETCHED);
  assert.equal(e.reports[0].io, 7);
  assert.equal(e.reports[0].live, true);
  o.close();
});

test("the driver never decides a timeout: the engine's timer fires and the engine aborts", async () => {
  let aborted = false;
  const o = await origin((req) => req.on("close", () => { aborted = true; })); // never answers
  const e = engine((r) => {
    assert.equal(r.kind, TIMER, "no report of the hung fetch");
    return out(-1, abortCmd(3), respondCmd(200, "fallback"));
  });
  const t0 = Date.now();
  const res = await us_run(2, out(Date.now() + 40, fetchCmd(3, o.url)), {}, {}, null, e);
  assert.equal(await res.text(), "fallback");
  assert.ok(Date.now() - t0 >= 35, "answered at the engine's instant, not before");
  await sleep(50);
  assert.ok(aborted, "the engine's abort reached the origin");
  assert.equal(e.reports.length, 1);
  o.close();
});

test("a re-armed timer fires once, at the new instant; a fetch aborted first is never reported", async () => {
  let n = 0;
  const o = await origin((req, res) => setTimeout(() => res.end("late"), 30));
  const e = engine((r) => {
    n++;
    if (n === 1) return out(Date.now() + 60, abortCmd(1)); // moved the timer later, aborted io 1
    return out(-1, respondCmd(200, "done"));
  });
  const res = await us_run(3, out(Date.now() + 10, fetchCmd(1, o.url)), {}, {}, null, e);
  assert.equal(await res.text(), "done");
  assert.deepEqual(e.reports.map((r) => r.kind), [TIMER, TIMER]);
  await sleep(40);
  assert.equal(e.reports.length, 2, "the aborted fetch's answer was not reported");
  o.close();
});

test("a fetch listened to after its timeout: its late answer is reported after the response, kept alive by waitUntil; past `until` it is aborted unreported", async () => {
  let closed = 0;
  // io 1 answers at 40 ms (after the 10 ms timer), io 2 never does.
  const o = await origin((req, res) => {
    req.on("close", () => closed++);
    if (req.url === "/late") setTimeout(() => res.end("late"), 40);
  });
  const kept = [];
  const ctx = { waitUntil: (p) => kept.push(p) };
  let listenedUntil;
  const e = engine((r) => {
    if (r.kind === TIMER) {
      listenedUntil = Date.now() + 80;
      return out(-1, hearCmd(1, listenedUntil), hearCmd(2, listenedUntil), respondCmd(200, "fallback"));
    }
    return out(-1);
  });
  const res = await us_run(4, out(Date.now() + 10, fetchCmd(1, `${o.url}/late`), fetchCmd(2, `${o.url}/hang`)), {}, {}, ctx, e);
  assert.equal(await res.text(), "fallback", "the request does not wait for what it listens to");
  assert.equal(kept.length, 2, "both listened fetches are kept alive past the response");
  await Promise.all(kept);
  assert.ok(Date.now() >= listenedUntil - 2, "the hung one was kept until `until`");
  const late = e.reports.filter((r) => r.kind === FETCHED);
  assert.deepEqual(late.map((r) => [r.io, r.num, r.live]), [[1, 200, false], [2, -1, false]], "the late answer, then the abort at `until`");
  await sleep(20);
  assert.equal(closed, 2, "the hung fetch was aborted");
  o.close();
});

test("a KV read is reported to the request that started it, and outlives it (waitUntil)", async () => {
  const calls = [];
  let release;
  const gate = new Promise((r) => { release = r; });
  const ns = {
    async getWithMetadata(key, type) {
      calls.push([key, type]);
      await gate;
      return { value: `v:${key}`, metadata: { written_at: 1 } };
    },
  };
  const waits = [];
  const ctx = { waitUntil: (p) => waits.push(p) };
  // The engine answers before the read ends (a speculative read): the read still reports,
  // marked as no longer waited for, so the isolate learns its value.
  let n = 0;
  const e = engine((r) => (n++ === 0 ? out(-1) : assert.fail("one report")));
  const res = await us_run(4, out(-1, kvCmd(5, "CAT", "cat:audio"), respondCmd(200, "early")), {}, { CAT: ns }, ctx, e);
  assert.equal(await res.text(), "early");
  release();
  await Promise.all(waits);
  await sleep(5);
  assert.deepEqual(calls, [["cat:audio", "text"]]);
  assert.equal(waits.length, 1, "kept alive past its request's answer");
  assert.deepEqual(
    e.reports.map((r) => [r.kind, r.io, r.num, r.a, r.b, r.live]),
    [[KV, 5, 1, "v:cat:audio", '{"written_at":1}', false]],
  );
});

test("absent, failed and unbound KV reads are told apart", async () => {
  const cases = [
    [{ getWithMetadata: async () => ({ value: null, metadata: null }) }, "0 undefined"],
    [{ getWithMetadata: async () => { throw new Error("KV GET failed: 500\nstack"); } }, "2 KV GET failed: 500"],
    [{ getWithMetadata() { throw new TypeError("no such namespace"); } }, "2 no such namespace"],
    [undefined, "2 KV binding `B` is not bound"],
  ];
  for (const [ns, want] of cases) {
    const e = engine((r) => out(-1, respondCmd(200, `${r.num} ${r.a}`)));
    const res = await us_run(7, out(-1, kvCmd(1, "B", "k")), {}, { B: ns }, null, e);
    assert.equal(await res.text(), want);
  }
});

test("the rate limiter's verdict, or why it could not be asked", async () => {
  const cases = [
    [{ limit: async ({ key }) => ({ success: key === "ok" }) }, "ok", "1"],
    [{ limit: async () => ({ success: false }) }, "x", "0"],
    [{ limit: async () => { throw new Error("limiter down"); } }, "x", "2 limiter down"],
    [undefined, "x", "2 no Rate Limiting binding STORM"],
  ];
  for (const [binding, key, want] of cases) {
    const e = engine((r) => {
      assert.equal(r.kind, LIMITED);
      return out(-1, respondCmd(200, r.num === 2 ? `2 ${r.a}` : `${r.num}`));
    });
    const res = await us_run(8, out(-1, limitCmd(1, "STORM", key)), {}, { STORM: binding }, null, e);
    assert.equal(await res.text(), want);
  }
});

test("the response carries the engine's status, headers and body; writes go out in the background", async () => {
  const puts = [];
  const waits = [];
  const ns = { put: async (k, v, o) => { puts.push([k, v, o]); } };
  const e = engine(() => assert.fail("no report expected"));
  const res = await us_run(9, out(-1, respondCmd(200, '{"items":["é"]}', { writes: [["U", "user:1", "{}", '{"written_at":5}']] })), {}, { U: ns }, { waitUntil: (p) => waits.push(p) }, e);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("x-correlation-id"), "cid-1");
  assert.equal(await res.text(), '{"items":["é"]}', "lengths are UTF-16 units: non-ASCII bodies arrive whole");
  await Promise.all(waits);
  assert.deepEqual(puts, [["user:1", "{}", { metadata: { written_at: 5 } }]]);
});

test("a write-through's put is issued from the next task, and its failure reaches the engine even without a context", async () => {
  const puts = [];
  const ns = { put: async (k) => { puts.push(k); } };
  const e = engine(() => assert.fail("no report expected"));
  const res = await us_run(12, out(-1, respondCmd(200, "{}", { writes: [["U", "user:2", "{}", ""]] })), {}, { U: ns }, { waitUntil: () => {} }, e);
  assert.equal(res.status, 200);
  assert.deepEqual(puts, [], "the answer resolves before the put is issued");
  await sleep(5);
  assert.deepEqual(puts, ["user:2"]);
  // No execution context (ctx null) and metadata that does not parse: the failure still
  // goes back to the engine, not to an unhandled rejection.
  const failures = [];
  const e2 = { ...engine(() => assert.fail("no report expected")), writeFailed: (binding, key, why) => failures.push([binding, key, why]) };
  await us_run(13, out(-1, respondCmd(200, "{}", { writes: [["U", "user:3", "{}", "{not json"]] })), {}, { U: ns }, null, e2);
  await sleep(5);
  assert.equal(failures.length, 1);
  assert.deepEqual(failures[0].slice(0, 2), ["U", "user:3"]);
  assert.match(failures[0][2], /JSON/);
});

test("an exception on the driver's path is rendered by the engine, never a bare error", async () => {
  // The engine's output names a command the driver does not know: it throws while
  // performing it, and the engine's `failed` answer goes out instead.
  const e = engine(() => assert.fail("no report expected"));
  const res = await us_run(10, out(-1, num(99) + num(1)), {}, {}, null, e);
  assert.equal(res.status, 503);
  const body = await res.json();
  assert.equal(body.code, "DEPENDENCY_UNAVAILABLE");
  assert.match(body.why, /unknown command 99/);
  // And when the engine itself throws on a report, the same.
  const o = await origin((req, res2) => res2.end("{}"));
  const broken = engine(() => { throw new Error("RuntimeError: unreachable"); });
  const res2 = await us_run(11, out(-1, fetchCmd(1, o.url)), {}, {}, null, broken);
  assert.equal(res2.status, 503);
  assert.match((await res2.json()).why, /unreachable/);
  o.close();
});

test("reports after the response say the request is no longer waiting", async () => {
  const o = await origin((req, res) => setTimeout(() => res.end("{}"), 20));
  const e = engine((r) => out(-1));
  // The engine answers at once and leaves a fetch out (a speculative read would do the same).
  const res = await us_run(12, out(-1, fetchCmd(1, o.url), respondCmd(200, "early")), {}, {}, null, e);
  assert.equal(await res.text(), "early");
  await sleep(60);
  assert.equal(e.reports.length, 1);
  assert.equal(e.reports[0].live, false, "the late report is marked: nothing to answer");
  o.close();
});

test("the incoming request: the probe's lateness, the clock, a seed, method, URL and only the named headers", async () => {
  const req = new Request("https://edge.example/r/alice?x=1", { headers: { "X-Correlation-ID": "c-1", Cookie: "s=1", "X-Other": "no" } });
  await sleep(15);
  us_incoming(req, ["x-correlation-id"]); // starts a probe
  await sleep(15);
  const t0 = Date.now();
  const lines = us_incoming(req, ["x-correlation-id", "cookie", "absent"]).split("\n");
  assert.ok(Number(lines[0]) >= 0, `the probe's lateness: ${lines[0]}`);
  assert.ok(Math.abs(Number(lines[1]) - t0) < 50, `the clock: ${lines[1]}`);
  for (const r of lines.slice(2, 4)) assert.ok(Number.isInteger(Number(r)) && Number(r) >= 0 && Number(r) < 2 ** 32, r);
  assert.deepEqual(lines.slice(4), ["-", "GET", "https://edge.example/r/alice?x=1", "x-correlation-id", "c-1", "cookie", "s=1"]);
});

test("the incoming request's place: cf's continent, country and longitude only when asked, an empty line without cf", () => {
  const req = new Request("https://edge.example/r/alice");
  assert.equal(us_incoming(req, [], true).split("\n")[4], "", "no cf: a local runtime");
  const withCf = { method: "GET", url: "https://edge.example/", headers: new Headers(), cf: { continent: "EU", country: "DE", longitude: "8.68", colo: "FRA" } };
  assert.equal(us_incoming(withCf, [], true).split("\n")[4], "EU\tDE\t8.68");
  assert.equal(us_incoming(withCf, [], false).split("\n")[4], "-", "not asked: cf is not read");
  const odd = { ...withCf, cf: { continent: "N\tA", country: undefined } };
  assert.equal(us_incoming(odd, [], true).split("\n")[4], "NA\t\t");
});

test("a reply's wake: at its instant, under waitUntil, the driver asks fleetWake for that instant and sends the calls it returns", async () => {
  const e = engine(() => assert.fail("no report: the request is answered at once"));
  const sent = [];
  const heard = [];
  let woke = 0;
  let asked;
  e.fleetWake = (instant) => {
    woke = Date.now();
    asked = instant;
    return callsOf([["/report", "COORD", "svc/cfg/enam", "enam", '{"seq":1}', 500]]);
  };
  e.fleetHeard = (path, ok, text) => {
    heard.push([path, ok, text]);
    return undefined;
  };
  const ns = {
    idFromName: (n) => `id:${n}`,
    get: (id, opts) => ({
      fetch: async (url, init) => {
        sent.push([id, opts.locationHint, url, init.method, init.body]);
        return new Response('{"mode":"CLOSED"}');
      },
    }),
  };
  const waits = [];
  const at = Date.now() + 120;
  const res = await us_run(21, out(-1, respondCmd(200, "ok", { wake: at })), {}, { COORD: ns }, { waitUntil: (p) => waits.push(p) }, e);
  assert.equal(await res.text(), "ok");
  assert.equal(woke, 0, "not before its instant");
  assert.equal(waits.length, 1, "the wake is kept alive past the answer");
  await waits[0];
  await Promise.all(waits);
  assert.ok(woke >= at - 2, `woken at its instant: ${woke - at} ms`);
  assert.equal(asked, at, "the engine is told which wake this is (a later answer may have moved it)");
  assert.deepEqual(sent, [["id:svc/cfg/enam", "enam", "https://coordinator/report?of=svc%2Fcfg%2Fenam", "POST", '{"seq":1}']]);
  assert.deepEqual(heard, [["/report", true, '{"mode":"CLOSED"}']]);
});

test("a call that failed: what the engine makes of it — a log line, a point, the call sent again at once — is performed", async () => {
  const e = engine(() => assert.fail("no report: the request is answered at once"));
  const call = ["/report", "COORD", "svc/cfg/enam", "enam", '{"seq":1}', 500];
  e.fleetWake = () => callsOf([call]);
  const heard = [];
  e.fleetHeard = (path, ok, text) => {
    heard.push([path, ok, text]);
    // The first failure: its log line, its point and the call again (wire::encode_heard);
    // the second: nothing to do.
    if (heard.length > 1) return "";
    return str("lost line") + num(1) + str("idx") + ["b1", "b2", "b3", "b4", "b5"].map(str).join("") + num(1) + num(2) + num(3) + callsOf([call]);
  };
  let tries = 0;
  const ns = { idFromName: (n) => `id:${n}`, get: () => ({ fetch: async () => { tries++; throw new Error("unreachable"); } }) };
  const points = [];
  const env = { COORD: ns, UNDERSTUDY_ANALYTICS: { writeDataPoint: (p) => points.push(p) } };
  const printed = [];
  const log = console.log;
  console.log = (line) => printed.push(line);
  try {
    const waits = [];
    const res = await us_run(24, out(-1, respondCmd(200, "ok", { wake: Date.now() })), {}, env, { waitUntil: (p) => waits.push(p) }, e);
    assert.equal(await res.text(), "ok");
    for (let i = 0; i < waits.length; i++) await waits[i];
  } finally {
    console.log = log;
  }
  assert.equal(tries, 2, "sent, then sent again once");
  assert.deepEqual(heard.map(([path, ok]) => [path, ok]), [["/report", false], ["/report", false]]);
  assert.ok(printed.includes("lost line"), JSON.stringify(printed));
  assert.deepEqual(points, [{ indexes: ["idx"], blobs: ["b1", "b2", "b3", "b4", "b5"], doubles: [1, 2, 3] }]);
});

test("a reply with no wake sets no timer; a truncated output ends the reader instead of reading it again", async () => {
  const e = engine(() => assert.fail("no report"));
  let woken = false;
  e.fleetWake = () => {
    woken = true;
    return callsOf([]);
  };
  const waits = [];
  const res = await us_run(22, out(-1, respondCmd(200, "ok")), {}, {}, { waitUntil: (p) => waits.push(p) }, e);
  assert.equal(await res.text(), "ok");
  assert.equal(waits.length, 0);
  // The output of an older engine, without the calls and the wake: answered once.
  const old = num(-1) + num(8) + num(200) + str("") + str("old") + str("{}") + str("c") + num(0) + num(0);
  const r2 = await us_run(23, old, {}, {}, null, e);
  assert.equal(await r2.text(), "old");
  await sleep(20);
  assert.equal(woken, false);
});

test("an ask goes to the coordinator at once, with the request's call; its answer goes to fleetHeard, then to the request while it waits, and not after", async () => {
  let asked = 0;
  const e = engine((r) => {
    if (r.kind === ASKED) {
      asked++;
      return out(-1, abortCmd(1), respondCmd(200, "cut"));
    }
    return assert.fail(`unexpected report ${JSON.stringify(r)}`);
  });
  const sent = [];
  const heard = [];
  e.fleetHeard = (path, ok, text) => {
    heard.push([path, ok, text, asked]);
    return undefined;
  };
  const ns = {
    idFromName: (n) => `id:${n}`,
    get: (id, opts) => ({
      fetch: async (url, init) => {
        sent.push([id, opts.locationHint, url, init.body]);
        await sleep(15);
        return new Response('{"mode":"OPEN"}');
      },
    }),
  };
  const model = await origin(() => { /* hangs: the ask's answer decides */ });
  try {
    const waits = [];
    const call = ["/report", "COORD", "svc/cfg/weur", "weur", '{"seq":1}', 500];
    const res = await us_run(31, out(-1, askCmd(call), fetchCmd(1, `${model.url}/r`)), {}, { COORD: ns }, { waitUntil: (p) => waits.push(p) }, e);
    assert.equal(await res.text(), "cut");
    assert.deepEqual(sent, [["id:svc/cfg/weur", "weur", "https://coordinator/report?of=svc%2Fcfg%2Fweur", '{"seq":1}']]);
    assert.deepEqual(heard, [["/report", true, '{"mode":"OPEN"}', 0]], "the isolate hears it before the request");
    assert.equal(asked, 1);
    // Answered already when the ask's answer comes: the isolate hears it, the request is not told.
    const late = ["/report", "COORD", "svc/cfg/weur", "weur", '{"seq":2}', 500];
    const r2 = await us_run(32, out(-1, askCmd(late), respondCmd(200, "at once")), {}, { COORD: ns }, { waitUntil: (p) => waits.push(p) }, e);
    assert.equal(await r2.text(), "at once");
    await Promise.all(waits);
    assert.equal(heard.length, 2);
    assert.equal(asked, 1, "no ASKED report for an answered request");
  } finally {
    model.close();
  }
});

// [V-INGEST] [V-STORE] An event operation: the driver performs what the engine's `perform`
// says — the body read up to its limit, the shards called — hands back what came, as it came,
// through `performed`, and reports it heard.
test("an event operation is performed as the engine says, and what came back goes to the engine as it is", async () => {
  const performed = [];
  const stub = (name) => ({
    fetch: async (url, init) => {
      if (name === "down") throw new Error("shard unreachable\nstack");
      return new Response(new Uint8Array([...new Uint8Array(init.body), 9]), { status: 200 });
    },
  });
  const env = { OUTBOX: { idFromName: (n) => n, get: (id) => stub(id) } };
  for (const [todo, check] of [
    [[1, 4], (got) => assert.deepEqual([got[0], [...got[1]]], [0, [104, 105]])],
    [[1, 1], (got) => assert.deepEqual(got, [1, null])],
    [[2, "OUTBOX", "https://shard/x", ["a", "down"], [new Uint8Array([1, 2])]], (got) => {
      assert.deepEqual([got[0][0], [...got[0][1]], got[0][2]], [1, [1, 2, 9], 200]);
      assert.deepEqual(got[1], [2, "shard unreachable", 0]);
    }],
    [[2, "MISSING", "https://shard/x", ["a"], [new Uint8Array([1])]], (got) => assert.match(got, /`MISSING` is not bound/)],
    [undefined, (got) => assert.equal(got, undefined)],
  ]) {
    const e = engine((r) => {
      assert.equal(r.kind, HEARD);
      assert.equal(r.io, 4);
      return out(-1, respondCmd(200, "ok"));
    });
    e.perform = (id, io) => { assert.deepEqual([id, io], [5, 4]); return todo; };
    e.performed = (id, io, got) => performed.push([id, io, got]);
    const req = new Request("https://edge/e", { method: "POST", body: "hi" });
    const res = await us_run(5, out(Date.now() + 5000, eventsCmd(4)), req, env, null, e);
    assert.equal(await res.text(), "ok");
    assert.equal(performed.length, 1, "what came back is handed over once, before the report");
    check(performed.pop()[2]);
  }
});

// The outbox's object: the core's reply bytes answered as they are, the alarm it asks for set
// (at that instant unless one is set earlier; only when none is, for the watchdog); the alarm
// run's deliveries performed within the core's timeout, null for one that did not answer.
test("the outbox's driver performs the core's replies, alarms and deliveries, and decides none", async () => {
  let alarm = null;
  const storage = { getAlarm: async () => alarm, setAlarm: async (t) => { alarm = t; }, deleteAlarm: async () => { alarm = null; } };
  const replies = [[new Uint8Array([7]), [1000, false]], [new Uint8Array([8]), [2000, false]], [new Uint8Array([9]), [500, true]], [new Uint8Array([10]), [400, false]]];
  const seen = [];
  const core = { command: (bytes) => { seen.push([...bytes]); return replies.shift(); }, unreadable: () => new Uint8Array([0]) };
  const o = us_outbox({ storage }, core);
  const body = async (r) => [...new Uint8Array(await r.arrayBuffer())];
  assert.deepEqual(await body(await us_outbox_fetch(o, new Request("https://s/", { method: "POST", body: new Uint8Array([1]) }))), [7]);
  assert.equal(alarm, 1000);
  assert.deepEqual(await body(await us_outbox_fetch(o, new Request("https://s/", { method: "POST", body: new Uint8Array([2]) }))), [8]);
  assert.equal(alarm, 1000, "an alarm set earlier stands");
  await us_outbox_fetch(o, new Request("https://s/", { method: "POST", body: new Uint8Array([3]) }));
  assert.equal(alarm, 1000, "the watchdog sets one only when none is set");
  await us_outbox_fetch(o, new Request("https://s/", { method: "POST", body: new Uint8Array([4]) }));
  assert.equal(alarm, 400);
  assert.deepEqual(seen, [[1], [2], [3], [4]]);

  const hung = await origin(() => {}); // never answers
  const ok = await origin((req, res) => res.end("done"));
  const steps = [];
  core.alarm = (outcomes) => {
    steps.push(outcomes);
    if (steps.length === 1) return ["deliver", 60, [[`${ok.url}/e`, "POST", "Idempotency-Key\ne-1", "{}", 1000], undefined, [`${hung.url}/e`, "POST", "", "{}", 1000]]];
    return ["end", 12345];
  };
  const t0 = Date.now();
  await us_outbox_alarm(o);
  assert.ok(Date.now() - t0 >= 55, "the hung delivery waited the core's timeout");
  assert.equal(steps.length, 2);
  assert.equal(steps[0], undefined);
  const [done, none, cut] = steps[1];
  assert.equal(done[0], 200);
  assert.equal(Buffer.from(done[2]).toString(), "done");
  assert.equal(none, undefined);
  assert.equal(cut, null);
  assert.equal(alarm, 12345);
  core.alarm = () => ["end", undefined];
  await us_outbox_alarm(o);
  assert.equal(alarm, null, "no alarm when the core gives no instant");
  core.alarm = () => ["failed", 99];
  await us_outbox_alarm(o);
  assert.equal(alarm, 99);
  hung.close();
  ok.close();
});

// The coordinator's object: its answer is the core's; a held watch's headers go at once and
// its verdict when the fleet moves (another call's broadcast) or at the end of the core's hold.
test("the coordinator's driver answers as the core says and holds a watch for the core's hold", async () => {
  const put = [];
  const storage = { get: async () => "snap", put: async (k, v) => { put.push([k, v]); }, setAlarm: async () => {} };
  const calls = [];
  let moved = false;
  const core = {
    place: (url) => (url.includes("of=bad") ? "not a coordinator's name" : undefined),
    ready: () => calls.includes("resume"),
    resume: (s) => { calls.push("resume"); assert.equal(s, "snap"); return undefined; },
    report: (t) => { calls.push(`report ${t}`); return moved ? [200, "opened", true, false, 0] : [200, "closed", false, false, 0]; },
    watch: (t) => { calls.push(`watch ${t}`); return [200, "as it stands", false, true, t === "short" ? 40 : 5000]; },
    verdict: () => "at the hold's end",
    snapshotDue: () => (calls.length === 2 ? "s1" : undefined),
    snapshotStored: () => calls.push("stored"),
    armIn: () => undefined,
  };
  const o = us_coordinator({ storage }, {}, core);
  const post = (path, body) => new Request(`https://coordinator${path}?of=x`, { method: "POST", body });
  assert.equal((await us_coordinator_fetch(o, new Request("https://coordinator/report?of=bad", { method: "POST", body: "" }))).status, 400);
  const r1 = await us_coordinator_fetch(o, post("/report", "r1"));
  assert.equal(await r1.text(), "closed");
  assert.deepEqual(put, [["snapshot", "s1"]]);
  const t0 = Date.now();
  const short = await us_coordinator_fetch(o, post("/watch", "short"));
  assert.equal(short.status, 200, "a held watch's answer begins at once");
  assert.equal(await short.text(), "at the hold's end");
  assert.ok(Date.now() - t0 >= 35, "held for the core's hold");
  const long = await us_coordinator_fetch(o, post("/watch", "long"));
  moved = true;
  const r2 = await us_coordinator_fetch(o, post("/report", "r2"));
  assert.equal(await r2.text(), "opened");
  assert.equal(await long.text(), "opened", "the held watch got the verdict that moved the fleet");
  assert.deepEqual(calls.filter((c) => c !== "stored"), ["resume", "report r1", "watch short", "watch long", "report r2"]);
});
