function headersOf(flat) {
  const h = new Headers();
  if (flat.length === 0) return h;
  const p = flat.split("\n");
  for (let i = 0; i + 1 < p.length; i += 2) {
    try { h.set(p[i], p[i + 1]); } catch (_) { /* a value the runtime refuses is dropped */ }
  }
  return h;
}
const firstLine = (e) => String((e && e.message) || e).split("\n")[0];

// The isolate's scheduling delay: how late its timers fire, as the largest sample of the
// last second (ten 100 ms buckets). Sampled with a zero-delay timer at each request (at most
// every 10 ms) and from every race timer that fires. A busy or cold isolate takes every
// answer late by about this much — the breaker must not count that as the model's latency —
// and stays known as busy for a second after its last late timer.
const lagBuckets = new Array(10).fill(0), lagAt = new Array(10).fill(0);
let probing = false, lastProbe = 0;
function sample(late) {
  const now = Date.now(), slot = Math.floor(now / 100) % 10;
  if (now - lagAt[slot] >= 100) { lagBuckets[slot] = 0; lagAt[slot] = now - (now % 100); }
  if (late > lagBuckets[slot]) lagBuckets[slot] = late;
}
function probe() {
  const t0 = Date.now();
  if (probing || t0 - lastProbe < 10) return;
  probing = true;
  lastProbe = t0;
  setTimeout(() => { sample(Date.now() - t0); probing = false; }, 0);
}
export function us_lag() {
  probe();
  const now = Date.now();
  let m = 0;
  for (let i = 0; i < 10; i++) if (now - lagAt[i] < 1000 && lagBuckets[i] > m) m = lagBuckets[i];
  return m;
}

// The method, the URL, and the headers named in `names` that the request carries: the engine
// reads no others (`Engine::request_headers`), and a `get` per name costs a fraction of
// iterating every header the client and the platform sent (the profile: ~75 µs a request).
export function us_incoming(req, names) {
  let out = req.method + "\n" + req.url;
  const h = req.headers;
  for (let i = 0; i < names.length; i++) {
    const v = h.get(names[i]);
    if (v !== null) out += "\n" + names[i] + "\n" + v;
  }
  return out;
}

export function us_response(status, head, body) {
  return new Response(body, { status, headers: headersOf(head) });
}

// One request of a race: [kind, status, retryAfter, body], kind 0 timed out, 1 answered,
// 2 body too large, 3 failed. `ctl` aborts it; `isTimedOut()` says whether the race's
// timer fired.
async function attempt(url, method, head, body, maxBody, ctl, isTimedOut) {
  try {
    const res = await fetch(url, { method, headers: headersOf(head), body: body === undefined ? null : body, signal: ctl.signal });
    probe();
    const status = res.status;
    if (status < 200 || status > 299) {
      const ra = res.headers.get("retry-after");
      ctl.abort(); // the unread body stops costing a connection
      return [1, status, ra === null ? "" : ra, null];
    }
    const len = res.headers.get("content-length");
    if (len !== null && Number(len) > maxBody) { ctl.abort(); return [2, status, "", null]; }
    let bytes;
    if (len !== null) {
      bytes = new Uint8Array(await res.arrayBuffer());
    } else {
      const reader = res.body.getReader();
      const parts = [];
      let n = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        n += value.length;
        if (n > maxBody) { ctl.abort(); return [2, status, "", null]; }
        parts.push(value);
      }
      bytes = new Uint8Array(n);
      let at = 0;
      for (const p of parts) { bytes.set(p, at); at += p.length; }
    }
    if (bytes.length > maxBody) return [2, status, "", null];
    return [1, status, "", bytes];
  } catch (e) {
    if (isTimedOut()) return [0, 0, "", null];
    ctl.abort();
    return [3, 0, firstLine(e), null];
  }
}

const good = (r) => r[0] === 1 && r[1] >= 200 && r[1] <= 299;

// The race: [kind, status, retryAfter, body, hedgeSent, hedgeWon]. With hedgeAfterMs >= 0,
// the same request goes out once more if no answer came within it; the first good answer
// wins and the other is aborted; a failure before the hedge is due is the answer. When the
// timer fires, the race is answered at once (the fallback starts now, not when the aborted
// fetch gets round to rejecting), and the requests are aborted once that answer is out.
export function us_race(url, method, head, body, timeoutMs, maxBody, hedgeAfterMs) {
  probe();
  const ctls = [new AbortController(), new AbortController()];
  let timedOut = false, sent = false, timer;
  const due = Date.now() + timeoutMs;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => {
      timedOut = true;
      sample(Date.now() - due);
      resolve([0, 0, "", null, sent ? 1 : 0, 0]);
      // Cancelling a subrequest is work for the runtime: it waits until the fallback answer
      // has been handed over.
      setTimeout(() => { ctls[0].abort(); ctls[1].abort(); }, 0);
    }, timeoutMs);
  });
  const isTimedOut = () => timedOut;
  let run;
  if (!(hedgeAfterMs >= 0)) {
    run = attempt(url, method, head, body, maxBody, ctls[0], isTimedOut).then((r) => { r.push(0, 0); return r; });
  } else {
    run = new Promise((resolve) => {
      let done = false, pending = 1, hedgeTimer;
      const finish = (i, r) => {
        done = true;
        clearTimeout(hedgeTimer);
        ctls[1 - i].abort();
        r.push(sent ? 1 : 0, sent && i === 1 ? 1 : 0);
        resolve(r);
      };
      const settle = (i, r) => {
        if (done) return;
        pending--;
        if (good(r) || !sent || pending === 0) finish(i, r);
      };
      attempt(url, method, head, body, maxBody, ctls[0], isTimedOut).then((r) => settle(0, r));
      hedgeTimer = setTimeout(() => {
        if (done || timedOut) return;
        sent = true;
        pending++;
        attempt(url, method, head, body, maxBody, ctls[1], isTimedOut).then((r) => settle(1, r));
      }, hedgeAfterMs);
    });
  }
  run.then(() => clearTimeout(timer));
  return Promise.race([run, late]);
}

// [E-LIVE] A write-through in the background: the put (its metadata as JSON text), kept
// alive by `ctx.waitUntil`; a failure goes to `failed(binding, key, message, correlationId)`.
export function us_put(ctx, ns, binding, key, value, meta, cid, failed) {
  let p;
  try {
    p = ns.put(key, value, meta === "" ? {} : { metadata: JSON.parse(meta) });
  } catch (e) {
    failed(binding, key, firstLine(e), cid);
    return;
  }
  ctx.waitUntil(p.then(undefined, (e) => failed(binding, key, firstLine(e), cid)));
}

// [E-STORM] The Rate Limiting binding `binding`'s verdict for `key`: [1] within the limit,
// [0] over it, [2, message] the call failed.
export async function us_limit(env, binding, key) {
  try {
    const ns = env[binding];
    if (ns === undefined || ns === null || typeof ns.limit !== "function") return [2, `no Rate Limiting binding ${binding}`];
    const { success } = await ns.limit({ key });
    return [success ? 1 : 0];
  } catch (e) {
    return [2, firstLine(e)];
  }
}

// The request's loop (crate::serve): perform the action `a` — [1, race args…] a fetch race,
// [2, namespace, key, timeout, binding, ctx] a KV read, [3, ms] a wait, [5, binding, key] a rate-limit
// call, [4] an action Rust performs itself (`perform(id)`) — then hand what happened to
// `step(id, code, result)`, which steps the engine synchronously and returns the next
// action, until it is [0, response]. Every await of the request is one of these; none wakes
// a Rust future.
export async function us_drive(id, a, env, step, perform) {
  for (;;) {
    let r;
    switch (a[0]) {
      case 0:
        return a[1];
      case 1:
        try { r = await us_race(a[1], a[2], a[3], a[4], a[5], a[6], a[7]); }
        catch (e) { r = [3, 0, firstLine(e), null, 0, 0]; }
        break;
      case 2:
        r = await us_kv(a[1], a[2], a[3], a[4], a[5]);
        break;
      case 3:
        await new Promise((res) => setTimeout(res, a[1]));
        break;
      case 5:
        r = await us_limit(env, a[1], a[2]);
        break;
      default:
        await perform(id);
    }
    a = step(id, a[0], r);
  }
}

// [E-CASCADE] KV reads, one per key at a time. A burst of requests walking the same tier at
// once (every request of an outage's first moment reads the same category key) shares one
// `getWithMetadata` of that key instead of making one each: each request still waits at
// most its own `timeoutMs` for it. A read is shared until it settles, and at most until its
// first reader's time is up (a KV read cannot be aborted; a stuck one must not hold every
// later request): the next request then reads afresh. A speculative read (`us_prefetch`)
// is shared, settled or not, for the `keepMs` the engine gives it. Keyed by binding name
// and key (docs/adr/009-io-in-js.md). The read belongs to the request that started it, and
// workerd drops a finished request's pending I/O — the requests that joined would then
// wait out their timeouts — so that request's `ctx.waitUntil` keeps it until it settles.
// Entries carry their own end (`until`, by the runtime's clock), so no timer is needed to
// drop them: a timer of a request that has ended never fires.
const kvShared = new Map();
function kvRead(ns, key) {
  return ns.getWithMetadata(key, "text").then(
    (got) => (got.value === null ? [1, "", ""] : [2, got.value, got.metadata == null ? "" : JSON.stringify(got.metadata)]),
    (e) => [3, firstLine(e), ""],
  );
}
function kvJoin(id, now) {
  const e = kvShared.get(id);
  if (e === undefined) return undefined;
  if (e.until > now) return e.read;
  kvShared.delete(id);
  return undefined;
}
function kvStart(ns, key, id, until, ctx, dropWhenSettled) {
  if (kvShared.size >= 1024) {
    const now = Date.now();
    for (const [k, e] of kvShared) if (e.until <= now) kvShared.delete(k);
  }
  const read = kvRead(ns, key);
  const entry = { read, until };
  kvShared.set(id, entry);
  if (ctx != null) ctx.waitUntil(read);
  if (dropWhenSettled) read.then(() => { if (kvShared.get(id) === entry) kvShared.delete(id); });
  return read;
}

// [E-CASCADE] A speculative tier read (the engine's `prefetch`, asked for when the model has
// gone silent): started now, so that the cascade's read of the key at the deadline finds it
// done. Nothing is reported; a failure shows when the key is read.
export function us_prefetch(ns, key, binding, ctx, keepMs) {
  const id = `${binding}\n${key}`;
  const now = Date.now();
  if (kvJoin(id, now) !== undefined) return;
  try {
    kvStart(ns, key, id, now + keepMs, ctx, false);
  } catch (_) {
    /* the read at the deadline will say what is wrong */
  }
}

// [kind, value, metadata JSON]: kind 0 timed out, 1 absent, 2 present, 3 failed.
export async function us_kv(ns, key, timeoutMs, binding, ctx) {
  const id = `${binding}\n${key}`;
  const now = Date.now();
  let read = kvJoin(id, now);
  if (read === undefined) {
    try {
      read = kvStart(ns, key, id, now + timeoutMs, ctx, true);
    } catch (e) {
      return [3, firstLine(e), ""];
    }
  }
  let timer;
  const late = new Promise((r) => { timer = setTimeout(() => r([0, "", ""]), timeoutMs); });
  try {
    return await Promise.race([read, late]);
  } catch (e) {
    return [3, firstLine(e), ""];
  } finally {
    clearTimeout(timer);
  }
}
