// The Worker's JavaScript I/O (edge/worker/src/io.js), run in Node with stand-in bindings:
// no runtime needed. The real KV binding is exercised by the end-to-end suites.
import { test } from "node:test";
import assert from "node:assert/strict";
import { us_kv, us_prefetch } from "../edge/worker/src/io.js";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A KV namespace stand-in: each getWithMetadata answers as `answer(key, n)` says after
// `ms`, and is counted.
function namespace(ms, answer = (key) => ({ value: `v:${key}`, metadata: { written_at: 1 } })) {
  const ns = {
    calls: [],
    getWithMetadata(key, type) {
      assert.equal(type, "text");
      ns.calls.push(key);
      const n = ns.calls.length;
      if (ms === Infinity) return new Promise(() => {});
      return sleep(ms).then(() => answer(key, n));
    },
  };
  return ns;
}

test("concurrent reads of one key share one KV read, each gets the value", async () => {
  const ns = namespace(20);
  const got = await Promise.all(Array.from({ length: 10 }, () => us_kv(ns, "cat:audio", 100, "CURATED")));
  assert.equal(ns.calls.length, 1);
  for (const g of got) assert.deepEqual(g, [2, "v:cat:audio", '{"written_at":1}']);
});

test("reads of other keys or other bindings are not shared", async () => {
  const ns = namespace(10);
  await Promise.all([
    us_kv(ns, "a", 100, "ONE"),
    us_kv(ns, "b", 100, "ONE"),
    us_kv(ns, "a", 100, "TWO"),
    us_kv(ns, "a", 100, "ONE"),
  ]);
  assert.deepEqual(ns.calls.sort(), ["a", "a", "b"]);
});

test("a settled read is not kept: the next request reads again (the engine keeps reads)", async () => {
  const ns = namespace(5);
  await us_kv(ns, "k", 100, "B");
  await us_kv(ns, "k", 100, "B");
  assert.equal(ns.calls.length, 2);
});

test("absent, failed and throwing reads are told apart, and shared alike", async () => {
  const absent = namespace(5, () => ({ value: null, metadata: null }));
  assert.deepEqual(await us_kv(absent, "k", 100, "B"), [1, "", ""]);
  const failing = namespace(5, () => {
    throw new Error("KV GET failed: 500\nmore");
  });
  const both = await Promise.all([us_kv(failing, "k", 100, "F"), us_kv(failing, "k", 100, "F")]);
  assert.equal(failing.calls.length, 1);
  for (const g of both) assert.deepEqual(g, [3, "KV GET failed: 500", ""]);
  const throwing = { getWithMetadata() { throw new TypeError("no such namespace"); } };
  assert.deepEqual(await us_kv(throwing, "k", 100, "T"), [3, "no such namespace", ""]);
});

test("each request waits at most its own timeout, even on a shared read", async () => {
  const ns = namespace(60);
  const t0 = Date.now();
  const [short, long] = await Promise.all([
    us_kv(ns, "k", 10, "B").then((r) => [r, Date.now() - t0]),
    sleep(2).then(() => us_kv(ns, "k", 200, "B")).then((r) => [r, Date.now() - t0]),
  ]);
  assert.equal(ns.calls.length, 1, "the second request joined the first's read");
  assert.deepEqual(short[0], [0, "", ""]);
  assert.ok(short[1] < 50, `the first request gave up at its 10 ms timeout, not at ${short[1]} ms`);
  assert.deepEqual(long[0], [2, "v:k", '{"written_at":1}'], "the joined read still answered the second request");
});

test("a stuck read stops being shared when its first reader's time is up", async () => {
  const ns = namespace(Infinity);
  const first = us_kv(ns, "k", 15, "B");
  const joined = us_kv(ns, "k", 15, "B");
  assert.equal(ns.calls.length, 1);
  assert.deepEqual(await first, [0, "", ""]);
  assert.deepEqual(await joined, [0, "", ""]);
  const later = us_kv(ns, "k", 15, "B");
  assert.equal(ns.calls.length, 2, "a request after the timeout reads afresh instead of joining the stuck read");
  assert.deepEqual(await later, [0, "", ""]);
});

test("the request that starts a read keeps it alive until it settles; those joining do not", async () => {
  // workerd drops a finished request's pending I/O: without the starter's waitUntil, a
  // request that joined its read would wait out its own timeout once the starter answered.
  const ns = namespace(10);
  const kept = [], joinedKept = [];
  const starter = { waitUntil: (p) => kept.push(p) };
  const joiner = { waitUntil: (p) => joinedKept.push(p) };
  const [a, b] = await Promise.all([us_kv(ns, "k", 100, "W", starter), us_kv(ns, "k", 100, "W", joiner)]);
  assert.deepEqual(a, b);
  assert.equal(kept.length, 1);
  assert.equal(joinedKept.length, 0);
  assert.deepEqual(await kept[0], a, "what is kept alive is the read itself");
});

test("a speculative read is found done by the read at the deadline, and kept only its keepMs", async () => {
  const ns = namespace(5);
  const kept = [];
  us_prefetch(ns, "u:alice", "USER", { waitUntil: (p) => kept.push(p) }, 60);
  us_prefetch(ns, "u:alice", "USER", { waitUntil: (p) => kept.push(p) }, 60);
  assert.equal(ns.calls.length, 1, "a second prefetch of a key under way starts nothing");
  assert.equal(kept.length, 1, "the prefetching request keeps its read alive");
  await sleep(20); // the read has settled; the model's deadline comes
  const t0 = Date.now();
  assert.deepEqual(await us_kv(ns, "u:alice", 8, "USER"), [2, "v:u:alice", '{"written_at":1}']);
  assert.ok(Date.now() - t0 < 5, "answered from the settled read, no new KV read");
  assert.equal(ns.calls.length, 1);
  await sleep(60);
  await us_kv(ns, "u:alice", 8, "USER");
  assert.equal(ns.calls.length, 2, "past its keepMs the speculative read is no longer used");
});

test("a speculative read of a key whose read is under way joins it", async () => {
  const ns = namespace(20);
  const reading = us_kv(ns, "k", 100, "B");
  us_prefetch(ns, "k", "B", null, 100);
  assert.equal(ns.calls.length, 1);
  await reading;
  us_prefetch(ns, "k", "B", null, 100);
  assert.equal(ns.calls.length, 2, "a settled ordinary read is not kept: the prefetch reads");
});
