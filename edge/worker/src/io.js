// The Worker's driver of the request engine (docs/adr/010-the-engine-owns-time.md): it
// performs the engine's commands — fetch, abort, read KV, ask the rate limiter — arms the
// one timer per request the engine asks for, and reports what ended,
// with one call into the engine each time. It decides nothing: no timeout, no winner, no
// retry. Its only branches are on what a command says and on what the runtime returned.
//
// The engine's output comes as ONE string (`decode` below documents the format) and each
// report goes back as a few numbers, two strings and a byte array: one crossing each way
// per step, no per-field `Array` calls (issue 23, point 5). Imported by crate::shim; its
// unit tests (tests/io.test.mjs) drive it with a stand-in engine, no runtime needed.

// The wire's codes, paths and timeout: `wire.js`, generated from the engine's `crate::wire`
// (what a report is about, the `kind` argument of `step`, and LIVE added while the request
// waits; what a command is; the coordinator's paths; how soon its answer must begin).
import { FETCHED, KV, LIMITED, TIMER, HEARD, ASKED, LIVE, START_FETCH, START_KV, START_LIMIT, ABORT, HEAR, EVENTS, RESPOND, ASK, FETCH_FAILED, FETCH_TOO_LARGE, REPORT_PATH, WATCH_PATH, PROBE_EVERY_MS } from "./wire.js";
export { FETCHED, KV, LIMITED, TIMER, HEARD, ASKED } from "./wire.js";

const firstLine = (e) => String((e && e.message) || e).split("\n")[0];

function headersOf(flat) {
  const h = new Headers();
  if (flat.length === 0) return h;
  const p = flat.split("\n");
  for (let i = 0; i + 1 < p.length; i += 2) {
    try { h.set(p[i], p[i + 1]); } catch (_) { /* a value the runtime refuses is dropped */ }
  }
  return h;
}

// --- The driver's timing primitives. Every instant comes from the engine (a step's wake,
// `Hear { until }`, a coordinator call's deadlines); these only perform it, and no other
// code here sets a timer or races one (cli/tests/timing.rs holds it so).
// `fn` at the instant `t` (ms since the epoch); a handle for `clearTimeout`.
function at(t, fn) { return setTimeout(fn, Math.max(0, t - Date.now())); }
// `fn` from the next task, after what is already queued.
function soon(fn) { return setTimeout(fn, 0); }
// `p`, or a rejection "no answer within `ms` ms" at the instant `t`.
function within(p, t, ms) {
  let timer;
  const late = new Promise((_, reject) => { timer = at(t, () => reject(new Error(`no answer within ${ms} ms`))); });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

// --- The isolate's scheduling delay: a zero-delay timer at most every PROBE_EVERY_MS (the
// engine's `lag.rs`), its lateness handed to the engine with the next report (the engine
// keeps the window).
let probing = false, lastProbe = 0, late = -1;
function probe() {
  const t0 = Date.now();
  if (probing || t0 - lastProbe < PROBE_EVERY_MS) return;
  probing = true;
  lastProbe = t0;
  soon(() => { late = Math.max(late, Date.now() - t0); probing = false; });
}
function takeLate() { const l = late; late = -1; return l; }

// [F-SCOPE] The request's `cf` fields a fleet-scoped isolate picks its region from (the
// engine's `breaker::fleet::place`), asked for only until it has: `-` not asked, an empty
// line without `cf` (a local runtime), else continent, country and longitude, tab-separated.
const cfField = (v) => (v == null ? "" : String(v).replace(/[\t\n]/g, ""));
function placeOf(req, place) {
  if (!place) return "-";
  const cf = req.cf;
  if (cf == null) return "";
  return cfField(cf.continent) + "\t" + cfField(cf.country) + "\t" + cfField(cf.longitude);
}

// The lateness of the last probe, the clock, two random 32-bit numbers (the request's seed),
// the place (`placeOf`), the method, the URL and the headers named in `names` that the
// request carries: the engine reads no other header, and a `get` per name costs a fraction
// of iterating every header the client and the platform sent. One crossing for all of it.
export function us_incoming(req, names, place) {
  probe();
  let out = takeLate() + "\n" + Date.now() + "\n" + ((Math.random() * 4294967296) >>> 0) + "\n" +
    ((Math.random() * 4294967296) >>> 0) + "\n" + placeOf(req, place) + "\n" + req.method + "\n" + req.url;
  const h = req.headers;
  for (let i = 0; i < names.length; i++) {
    const v = h.get(names[i]);
    if (v !== null) out += "\n" + names[i] + "\n" + v;
  }
  return out;
}

// --- The engine's output. A field is a number ending in ";" or a string as its length (in
// UTF-16 units) ending in ";", then its text. The output is the instant to wake at (-1:
// none), then commands, each a code and its fields:
//   1 fetch  io url method head body max  (body's length -1: no body)
//   2 kv     io binding key
//   3 limit  io binding key
//   5 abort  io       6 hear io until      7 events io (performed in Rust)
//   9 ask    calls (one call, read as a reply's `calls`: sent now; its answer goes to
//             `fleetHeard`, then, while the request waits, to the request as ASKED)
//   8 respond status head body log cid point [index blob×5 double×3] writes [binding key value meta]×writes
//             calls [path binding object hint body timeout_ms]×calls  (the coordinator's: /report, /watch)
//             wake  (the instant to ask `fleetWake(wake)` for more calls, read as `calls` are; -1: none)
// `head` is `name\nvalue\n…` (names and values never contain a newline).
class Reader {
  constructor(s) { this.s = s; this.p = 0; }
  more() { return this.p < this.s.length; }
  // Past the end (a truncated output): NaN, and the reader stays at the end.
  num() { const j = this.s.indexOf(";", this.p); if (j < 0) { this.p = this.s.length; return NaN; } const v = +this.s.slice(this.p, j); this.p = j + 1; return v; }
  str() { const n = this.num(); if (!(n >= 0)) return undefined; const v = this.s.slice(this.p, this.p + n); this.p += n; return v; }
}

// A request in flight: what its commands need, its timer, its fetches still wanted.
// `engine` is { step, perform, failed, writeFailed, fleetHeard, fleetWake }: the engine's closures.
class Flight {
  constructor(id, req, env, ctx, engine, resolve) {
    this.id = id; this.req = req; this.env = env; this.ctx = ctx; this.engine = engine;
    this.resolve = resolve; this.live = resolve !== null;
    this.timer = undefined; this.due = -1; this.fetches = new Map();
  }
}

// One fetch: [status, retry-after, body] once headers and (for a 2xx) the whole body are
// in; [FETCH_TOO_LARGE] past `max` bytes; [FETCH_FAILED, message] when it failed (read by
// understudy_core::wire::fetched). No timer: the engine's.
async function fetchOne(url, method, head, body, max, ctl) {
  try {
    const res = await fetch(url, { method, headers: headersOf(head), body: body === undefined ? null : body, signal: ctl.signal });
    probe();
    const status = res.status;
    if (status < 200 || status > 299) {
      const ra = res.headers.get("retry-after");
      ctl.abort(); // the unread body stops costing a connection
      return [status, ra === null ? undefined : ra, undefined];
    }
    const len = res.headers.get("content-length");
    if (len !== null && Number(len) > max) { ctl.abort(); return [FETCH_TOO_LARGE]; }
    let bytes;
    if (len !== null) {
      bytes = new Uint8Array(await res.arrayBuffer());
    } else {
      bytes = await readUpTo(res.body, max);
      if (bytes === null) { ctl.abort(); return [FETCH_TOO_LARGE]; }
    }
    if (bytes.length > max) return [FETCH_TOO_LARGE];
    return [status, undefined, bytes];
  } catch (e) {
    return [FETCH_FAILED, firstLine(e)];
  }
}

// A body stream read up to `max` bytes: its bytes, or null once it passes `max` (reading
// stops there, and what was read is dropped). An origin's answer and an ingested request's
// body are read alike.
async function readUpTo(stream, max) {
  const reader = stream.getReader();
  const parts = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > max) { reader.cancel().catch(() => {}); return null; }
    parts.push(value);
  }
  const bytes = new Uint8Array(n);
  let at = 0;
  for (const p of parts) { bytes.set(p, at); at += p.length; }
  return bytes;
}

// [V-INGEST] A request's body, read up to `max` bytes: [0, bytes] read, [1] too large (the
// engine answers 413; a large body never sits in memory), [2, message] failed.
export async function us_read_body(req, max) {
  try {
    if (req.body === null) return [0, new Uint8Array(0)];
    const len = req.headers.get("content-length");
    if (len !== null && Number(len) > max) return [1, null];
    const bytes = await readUpTo(req.body, max);
    return bytes === null ? [1, null] : [0, bytes];
  } catch (e) {
    return [2, firstLine(e)];
  }
}

// [V-INGEST] [V-STORE] An event operation the engine asks for (`serve.rs`, `perform`): the
// request's body read up to its limit ([1, max]), or the outbox shards called
// ([2, binding, url, names, bodies]); what came back goes to the engine as it is.
function performEvents(f, todo) {
  if (todo === undefined) return Promise.resolve(undefined);
  if (todo[0] === 1) return us_read_body(f.req, todo[1]);
  const [, binding, url, names, bodies] = todo;
  const ns = f.env[binding];
  if (ns == null) return Promise.resolve(`outbox binding \`${binding}\` is not bound`);
  return callShards(ns, url, names, bodies);
}

// One [kind, bytes or message, status] per call: kind 1 answered, 2 failed.
function callShards(ns, url, names, bodies) {
  return Promise.all(names.map(async (name, i) => {
    try {
      const stub = ns.get(ns.idFromName(name));
      const res = await stub.fetch(url, { method: "POST", body: bodies[i] });
      return [1, new Uint8Array(await res.arrayBuffer()), res.status];
    } catch (e) {
      return [2, firstLine(e), 0];
    }
  }));
}

// [0] absent, [1, value, metadata JSON] present, [2, message] failed.
function readKv(ns, key) {
  try {
    return ns.getWithMetadata(key, "text").then(
      (got) => (got.value === null ? [0] : [1, got.value, got.metadata == null ? undefined : JSON.stringify(got.metadata)]),
      (e) => [2, firstLine(e)],
    );
  } catch (e) {
    return Promise.resolve([2, firstLine(e)]);
  }
}

// [1] within the limit, [0] over it, [2, message] the call failed.
async function limit(env, binding, key) {
  try {
    const ns = env[binding];
    if (ns === undefined || ns === null || typeof ns.limit !== "function") return [2, `no Rate Limiting binding ${binding}`];
    const { success } = await ns.limit({ key });
    return [success ? 1 : 0];
  } catch (e) {
    return [2, firstLine(e)];
  }
}

// Hands what ended to the engine and performs what it says next.
function report(f, kind, io, num, a, b, bytes) {
  let out;
  try {
    out = f.engine.step(f.id, kind | (f.live ? LIVE : 0), io, num, a, b, bytes, Date.now());
  } catch (e) {
    return fail(f, e);
  }
  apply(f, out);
}

// Aborts run after the current turn: the answer a timeout leads to goes out first, and
// cancelling a subrequest is work for the runtime.
function abortSoon(ctl) { soon(() => ctl.abort()); }

// Performs one output of the engine for request `f`.
function apply(f, out) {
  try {
    const r = new Reader(out);
    const wake = r.num();
    while (r.more()) {
      const code = r.num();
      if (code === RESPOND) { respond(f, r); continue; }
      if (code === ASK) {
        // [F-SCOPE] The isolate asks the coordinator with the request's first call.
        for (const call of calls(r)) fleetReport(f, ...call, () => { if (f.live) report(f, ASKED, 0, 0); });
        continue;
      }
      const io = r.num();
      switch (code) {
        case START_FETCH: {
          const url = r.str(), method = r.str(), head = r.str(), body = r.str(), max = r.num();
          const ctl = new AbortController();
          f.fetches.set(io, ctl);
          ctl.done = fetchOne(url, method, head, body, max, ctl).then((x) => {
            // An aborted fetch is no longer wanted: nothing to report.
            if (f.fetches.get(io) !== ctl) return;
            f.fetches.delete(io);
            report(f, FETCHED, io, x[0], x[1], undefined, x[2]);
          });
          break;
        }
        case START_KV: {
          const binding = r.str(), key = r.str();
          const ns = f.env[binding];
          const p = ns == null ? Promise.resolve([2, `KV binding \`${binding}\` is not bound`]) : readKv(ns, key);
          // workerd drops a finished request's pending I/O: the read must outlive its
          // request, whose report is where requests waiting on the same key find it (they
          // never await this promise: a cross-request promise lost wake-ups in workerd,
          // docs/adr/010-the-engine-owns-time.md).
          if (f.ctx != null) f.ctx.waitUntil(p);
          p.then((x) => report(f, KV, io, x[0], x[1], x[2]));
          break;
        }
        case START_LIMIT: {
          const binding = r.str(), key = r.str();
          limit(f.env, binding, key).then((x) => report(f, LIMITED, io, x[0], x[1]));
          break;
        }
        case ABORT: {
          const ctl = f.fetches.get(io);
          if (ctl !== undefined) { f.fetches.delete(io); abortSoon(ctl); }
          break;
        }
        case HEAR: {
          // Listened to after its timeout: aborted at `until`, its end reported if sooner
          // (the engine's; the request may be answered by then, hence waitUntil).
          const until = r.num();
          const ctl = f.fetches.get(io);
          if (ctl !== undefined) {
            const t = at(until, () => ctl.abort());
            ctl.done.then(() => clearTimeout(t));
            if (f.ctx != null) f.ctx.waitUntil(ctl.done);
          }
          break;
        }
        case EVENTS: {
          const todo = f.engine.perform(f.id, io);
          performEvents(f, todo).then((got) => {
            f.engine.performed(f.id, io, got);
            report(f, HEARD, io, 0);
          });
          break;
        }
        default:
          throw new Error(`unknown command ${code}`);
      }
    }
    if (f.live && wake !== f.due) {
      clearTimeout(f.timer);
      f.due = wake;
      if (wake >= 0) f.timer = at(wake, () => report(f, TIMER, 0, 0));
    }
  } catch (e) {
    fail(f, e);
  }
}

function respond(f, r) {
  const status = r.num(), head = r.str(), body = r.str(), log = r.str(), cid = r.str();
  const point = pointOf(r);
  const writes = r.num();
  const puts = [];
  for (let i = 0; i < writes; i++) puts.push([r.str(), r.str(), r.str(), r.str()]);
  const fleet = calls(r);
  const wake = r.num();
  if (!f.live) {
    // Answered already (by a failure path): nothing more to send. A watch the engine counted
    // as sent is handed back as failed, or the isolate would wait for its answer.
    for (const [path] of fleet) if (path === WATCH_PATH) f.engine.fleetHeard(path, false, "not sent: the request was answered already");
    return;
  }
  const res = new Response(body, { status, headers: headersOf(head) });
  finish(f, res);
  console.log(log);
  writePoint(f, point);
  for (const [binding, key, value, meta] of puts) put(f, binding, key, value, meta, cid);
  for (const call of fleet) fleetReport(f, ...call);
  if (wake >= 0 && f.ctx != null) {
    // The isolate's first report, when no request may come to carry it: from this answer's
    // background work, at the instant the engine named.
    const woken = new Promise((next) => at(wake, next)).then(() => {
      for (const call of calls(new Reader(f.engine.fleetWake(wake)))) fleetReport(f, ...call);
    });
    f.ctx.waitUntil(woken.catch(() => {}));
  }
}

// An Analytics Engine point as the engine writes it (`1`, its index, 5 blobs and 3
// doubles), or undefined (`0`).
function pointOf(r) {
  if (r.num() !== 1) return undefined;
  const index = r.str(), blobs = [r.str(), r.str(), r.str(), r.str(), r.str()];
  return { indexes: [index], blobs, doubles: [r.num(), r.num(), r.num()] };
}

function writePoint(f, point) {
  if (point === undefined) return;
  const ds = f.env[us_analytics];
  if (ds != null) try { ds.writeDataPoint(point); } catch (_) { /* analytics never fails a request */ }
}

// The coordinator's calls in a reply (or from `fleetWake`): [path binding object hint body
// timeout_ms begin_ms].
function calls(r) {
  const out = [];
  for (let i = r.num(); i > 0; i--) out.push([r.str(), r.str(), r.str(), r.str(), r.str(), r.num(), r.num()]);
  return out;
}

// [F-SCOPE] A report or a watch to the breaker's coordinator
// (docs/adr/011-fleet-scoped-breaker.md), after the answer, kept alive by `ctx.waitUntil`:
// its answer — or why there is none: not begun within `beginMs`, not ended within
// `timeoutMs` — goes back to the engine,
// then to `then` (a request's ask: the request heeds it). No request waits for it beyond
// what the engine decides. A watch is held by the coordinator until the fleet opens or
// closes (or its hold passes): how an isolate hears of it between its requests. The object
// is its region's, created near it (`hint`, a location hint), or the global one standing in
// for a failing region (no hint); the URL names the object, which learns its role from it.
// A call that fails may come back from the engine as one to send again at once.
function fleetReport(f, path, binding, object, hint, body, timeoutMs, beginMs, then) {
  const heard = (ok, text) => {
    const todo = f.engine.fleetHeard(path, ok, text);
    if (todo) {
      // The log line (or none), the point (or none), the call to send again (wire::encode_heard).
      const r = new Reader(todo);
      const log = r.str();
      if (log !== undefined) console.log(log);
      writePoint(f, pointOf(r));
      // A failed call's retry, sent at once (still within this request's waitUntil).
      for (const call of calls(r)) fleetReport(f, ...call);
    }
    if (then !== undefined) then();
  };
  try {
    const ns = f.env[binding];
    if (ns == null) throw new Error(`Durable Object binding \`${binding}\` is not bound`);
    // The global coordinator (standing in for a failing region) has no location hint.
    const stub = ns.get(ns.idFromName(object), hint ? { locationHint: hint } : undefined);
    const url = `https://coordinator${path}?of=${encodeURIComponent(object)}`;
    // The answer begins within beginMs (a held watch's headers come at once), and ends
    // within timeoutMs of the call (a watch's verdict when the fleet moves): the engine's
    // deadlines (`FleetReport::begin_ms`).
    const t0 = Date.now();
    const begun = within(stub.fetch(url, { method: "POST", body }), t0 + beginMs, beginMs);
    const p = begun.then((res) => {
      const text = res.text().then((t) => {
        if (!res.ok) throw new Error(`HTTP ${res.status}: ${t}`);
        return t;
      });
      return within(text, t0 + timeoutMs, timeoutMs);
    }).then(
      (text) => heard(true, text),
      (e) => heard(false, firstLine(e)),
    );
    if (f.ctx != null) f.ctx.waitUntil(p);
  } catch (e) {
    heard(false, firstLine(e));
  }
}

// [F-SCOPE] The breaker's coordinator, a Durable Object (`coordinator.rs`,
// docs/adr/015-durable-objects-driven-from-js.md): this driver reads the request, performs
// the storage, the alarm, the region's call to the global object and a held watch's stream;
// `core` decides each step (its role, the verdict, whether a watch is held and how long,
// when the snapshot is written, when the alarm is due, what the merge sends).
const SNAPSHOT_KEY = "snapshot";
const TEXT = { "content-type": "text/plain; charset=utf-8" };
export function us_coordinator(state, env, core) { return { state, env, core, held: new Set() }; }

// Answers every held watch with `body` (the fleet moved).
function release(o, body) {
  const held = [...o.held];
  o.held.clear();
  for (const answer of held) answer(body);
}

// The snapshot, when `core` says it is due; then the alarm, when it says one is.
async function persist(o) {
  const text = o.core.snapshotDue();
  if (text === undefined) return;
  try {
    await o.state.storage.put(SNAPSHOT_KEY, text);
    o.core.snapshotStored();
  } catch (e) {
    console.log(`fleet snapshot: cannot write it: ${firstLine(e)}`);
  }
}
async function arm(o) {
  const ms = o.core.armIn();
  if (ms === undefined) return;
  try {
    await o.state.storage.setAlarm(Date.now() + ms);
  } catch (e) {
    o.core.armFailed();
    console.log(`fleet merge: cannot set the alarm: ${firstLine(e)}`);
  }
}

// A held watch's answer: its headers at once, the verdict when the fleet moves or, at the
// end of its hold (`holdMs`, the core's), the verdict as it stands.
function heldAnswer(o, holdMs) {
  let answer;
  const moved = new Promise((resolve) => { answer = resolve; });
  o.held.add(answer);
  const { readable, writable } = new TransformStream();
  const w = writable.getWriter();
  within(moved, Date.now() + holdMs, holdMs).then(
    (body) => body,
    () => { o.held.delete(answer); return o.core.verdict(); },
  ).then((body) => w.write(new TextEncoder().encode(body)).then(() => w.close())).catch(() => {});
  return new Response(readable, { headers: TEXT });
}

export async function us_coordinator_fetch(o, req) {
  try {
    const bad = o.core.place(req.url);
    if (bad !== undefined) return new Response(bad, { status: 400, headers: TEXT });
    let text;
    try {
      text = await req.text();
    } catch (e) {
      return new Response(`unreadable request: ${firstLine(e)}`, { status: 400, headers: TEXT });
    }
    if (!o.core.ready()) {
      let kept;
      try {
        kept = await o.state.storage.get(SNAPSHOT_KEY);
      } catch (e) {
        console.log(`fleet snapshot: cannot read it: ${firstLine(e)}`);
      }
      const log = o.core.resume(typeof kept === "string" ? kept : undefined);
      if (log !== undefined) console.log(log);
    }
    const watch = new URL(req.url).pathname === WATCH_PATH;
    const [status, body, moved, held, holdMs] = watch ? o.core.watch(text) : o.core.report(text);
    if (moved) release(o, body);
    await persist(o);
    if (status !== 200) return new Response(body, { status, headers: TEXT });
    if (held) return heldAnswer(o, holdMs);
    if (!watch) await arm(o);
    return new Response(body, { headers: TEXT });
  } catch (e) {
    return new Response(`the coordinator failed: ${firstLine(e)}`, { status: 500, headers: TEXT });
  }
}

// A region's merge, from its alarm: its window to the global coordinator within the core's
// timeout, the verdict heeded (the held watches answered if it moved the region), and the
// next alarm while the region keeps isolates.
export async function us_coordinator_alarm(o) {
  try {
    const [body, binding, object, timeoutMs] = o.core.merge();
    if (binding === undefined) {
      if (body.startsWith("fleet merge:")) console.log(body);
      else return;
    } else {
      let ok = true, got;
      try {
        const ns = o.env[binding];
        if (ns == null) throw new Error(`Durable Object binding \`${binding}\` is not bound`);
        const stub = ns.get(ns.idFromName(object));
        const asked = stub.fetch(`https://coordinator${REPORT_PATH}?of=${encodeURIComponent(object)}`, { method: "POST", body }).then(async (res) => {
          const t = await res.text();
          if (!res.ok) throw new Error(`HTTP ${res.status}: ${t}`);
          return t;
        });
        got = await within(asked, Date.now() + timeoutMs, timeoutMs);
      } catch (e) {
        ok = false;
        got = firstLine(e);
      }
      const [log, moved, verdict] = o.core.heed(ok, got);
      if (log) console.log(log);
      if (moved) release(o, verdict);
    }
    await persist(o);
    await arm(o);
  } catch (e) {
    console.log(`fleet merge: ${firstLine(e)}`);
  }
}

// [V-STORE] The events outbox's shard, a Durable Object with SQLite storage (`outbox/`,
// docs/adr/006-durable-events.md, docs/adr/015-durable-objects-driven-from-js.md): this
// driver reads the shard request's bytes, sets the alarm the core asks for, and performs the
// alarm run's deliveries, each within the core's attempt timeout; `core` decides the rest
// (its SQL is synchronous: `us_sql`).
export function us_outbox(state, core) { return { state, core }; }

// One SQL statement: every row's cells.
export function us_sql(sql, query, bind) { return Array.from(sql.exec(query, ...bind).raw()); }

// A data point for the Analytics Engine dataset, when one is bound.
export function us_point(env, index, blobs, doubles) {
  writePoint({ env }, { indexes: [index], blobs, doubles });
}

// The alarm at `at` (ms since the epoch) unless one is set earlier; `ifNone`: only when none
// is set (the watchdog of a lost alarm).
async function armAt(o, at, ifNone) {
  const storage = o.state.storage;
  const current = await storage.getAlarm();
  if (current == null || (!ifNone && current > at)) await storage.setAlarm(at);
}

export async function us_outbox_fetch(o, req) {
  let reply;
  try {
    const bytes = new Uint8Array(await req.arrayBuffer());
    const [encoded, arm] = o.core.command(bytes);
    reply = encoded;
    if (arm !== undefined) {
      try { await armAt(o, arm[0], arm[1]); } catch (e) { console.log(`outbox: cannot set the alarm: ${firstLine(e)}`); }
    }
  } catch (e) {
    reply = o.core.unreadable(firstLine(e));
  }
  return new Response(reply);
}

// One delivery: what the consumer answered, or null when no answer came within `ms`.
async function deliverOne([url, method, head, body, max], ms) {
  const ctl = new AbortController();
  try {
    return await within(fetchOne(url, method, head, body, max, ctl), Date.now() + ms, ms);
  } catch (_) {
    ctl.abort();
    return null;
  }
}

export async function us_outbox_alarm(o) {
  try {
    let next = o.core.alarm(undefined);
    while (next[0] === "deliver") {
      const [, ms, requests] = next;
      const outcomes = await Promise.all(requests.map((r) => (r === undefined ? undefined : deliverOne(r, ms))));
      next = o.core.alarm(outcomes);
    }
    const [what, at] = next;
    if (what === "failed") await armAt(o, at, false);
    else if (at !== undefined) await o.state.storage.setAlarm(at);
    else await o.state.storage.deleteAlarm();
  } catch (e) {
    console.log(JSON.stringify({ event: "event_alarm_failed", error: firstLine(e) }));
  }
}

// [E-LIVE] A write-through in the background: the put, kept alive by `ctx.waitUntil`; a
// failure goes back to the engine, which forgets the write (the next live answer writes
// again) and prints its log line. The put is issued from the next task, not this one: the
// answer just resolved, and the answers of other requests already queued, go out before
// a write that no client waits for (a fresh isolate's first wave of 10: p99 78.9 → 66.1 ms
// and 64.2 → 58.5 ms, medians of 10 fresh runtimes, docs/history/2026-12-bench.md "The cold
// first wave and the write-through").
function put(f, binding, key, value, meta, cid) {
  const failed = (e) => f.engine.writeFailed(binding, key, firstLine(e), cid);
  try {
    const ns = f.env[binding];
    if (ns == null) throw new Error(`KV binding \`${binding}\` is not bound`);
    const p = new Promise((next) => soon(next)).then(() =>
      ns.put(key, value, meta === "" ? {} : { metadata: JSON.parse(meta) }),
    );
    const done = p.then(undefined, failed);
    if (f.ctx != null) f.ctx.waitUntil(done);
  } catch (e) {
    failed(e);
  }
}

function finish(f, res) {
  f.live = false;
  clearTimeout(f.timer);
  f.due = -1;
  const resolve = f.resolve;
  f.resolve = null;
  resolve(res);
}

// Something on this path threw (the runtime refused a value, the engine trapped): the
// engine renders the answer, with every header; if the engine itself cannot run, the
// entry's last resort does (`compiler/src/dist/entry.rs`).
function fail(f, e) {
  if (!f.live) return;
  let out;
  try {
    out = f.engine.failed(f.id, firstLine(e));
  } catch (_) {
    out = undefined;
  }
  if (out !== undefined) {
    try {
      const r = new Reader(out);
      r.num();
      if (r.num() === RESPOND) return respond(f, r);
    } catch (_) { /* fall through to the last resort */ }
  }
  finish(f, lastResort(f.req, firstLine(e)));
}

// The binding name of the Analytics Engine dataset (`us_init`).
let us_analytics = "UNDERSTUDY_ANALYTICS";
// The answer when nothing else can render one: set by `us_init` from what the engine
// rendered when the isolate started.
let lastResort = (req, message) => new Response(JSON.stringify({ code: "EDGE_FAILED", message, retryable: true }), {
  status: 503,
  headers: { "Content-Type": "application/json", "Cache-Control": "no-store", "Retry-After": "1", "X-Breaker-Mode": "UNKNOWN", "X-Policy-Version": "unknown", "X-Correlation-ID": crypto.randomUUID() },
});

// Once per isolate: the dataset's binding name and the last-resort answer's template (the
// engine's headers and body with `{cid}` for the correlation ID).
export function us_init(analytics, head, body) {
  us_analytics = analytics;
  lastResort = (req, message) => {
    const cid = crypto.randomUUID();
    console.log(JSON.stringify({ event: "edge_failed", correlation_id: cid, error: message }));
    return new Response(body.replaceAll("{cid}", cid), { status: 503, headers: headersOf(head.replaceAll("{cid}", cid)) });
  };
}

// A request's driver: performs the engine's first output `out` for request `id` and every
// one after, and settles with the response. `engine` is the engine's closures.
export function us_run(id, out, req, env, ctx, engine) {
  return new Promise((resolve) => {
    const f = new Flight(id, req, env, ctx, engine, resolve);
    apply(f, out);
  });
}
