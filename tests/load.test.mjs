// Issue 23, from the checks run from outside the project: load from a process of its own
// (scripts/load.mjs: 16 keep-alive connections, a fresh user and bearer token per request)
// against the built edge in workerd and the simulated origin.
//
// 1. With the breaker open and the category tier's key cold every second, the old edge let
//    requests await another request's KV read — a cross-request promise, whose wake-up
//    workerd lost under load — and the runtime cancelled them as hung: bare 500s with none
//    of our headers (78 in 4 runs of 40 s). Every answer must carry our envelope now.
// 2. On a healthy 25 ms origin, a handful of timeouts in the first seconds opened the breaker
//    (the window's p95 over the bar: 4 of 12 runs). It must never open.
//
// Short form in the suite (10 s of the open path, about 15,000 answers; 3 healthy runs of
// 6 s); UNDERSTUDY_LONG=1 runs the long form (40 s of the open path, 10 healthy runs of 12 s),
// as the issue asks.

import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";

import { ROOT, requireEdge, startStack, devSecret } from "./harness.mjs";

requireEdge();

const LONG = process.env.UNDERSTUDY_LONG === "1";
const LOAD = join(ROOT, "scripts", "load.mjs");

/** Runs scripts/load.mjs against `url` as a separate process; its JSON summary. */
function load(url, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [LOAD, "--url", url, "--secret", devSecret("TOKEN_HMAC_KEY"), ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const killer = setTimeout(() => child.kill("SIGKILL"), 330_000);
    child.once("exit", (code) => {
      clearTimeout(killer);
      const line = out.trim().split("\n").at(-1);
      try {
        resolve({ code, summary: JSON.parse(line), stderr: err });
      } catch {
        reject(new Error(`load exited ${code} without a summary:\n${out}\n${err}`));
      }
    });
  });
}

/** The status endpoint's breaker transitions, and the counters of what the breaker held against the model. */
async function breakerSeen(stack) {
  const r = await stack.fetch("/__understudy/status", { headers: { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` } });
  assert.equal(r.status, 200, r.text);
  const c = r.json?.counters ?? {};
  return {
    transitions: r.json?.breaker?.transitions ?? [],
    timeouts: { counted: c.timeouts_counted, convicted: c.timeouts_convicted, late_answers: c.late_answers, unrecorded: c.unrecorded },
  };
}

describe("the edge under load from a separate process (issue 23)", () => {
  test("breaker open, cold category keys every second: every answer carries our envelope", { timeout: 400_000 }, async (t) => {
    const stack = await startStack("recommendations");
    try {
      await stack.origin.setFault({ kind: "hang" });
      const seconds = LONG ? 40 : 10;
      const { code, summary } = await load(stack.edge.url, ["--conns", "16", "--duration-s", String(seconds), "--max", "60000", "--cat-mode", "rotate"]);
      const { anomalies, ...rest } = summary;
      assert.equal(summary.unenveloped, 0, `unenveloped answers: ${JSON.stringify(rest)}`);
      assert.equal(code, 0);
      assert.deepEqual(Object.keys(summary.status), ["200"], JSON.stringify(summary.status));
      assert.ok(summary.sent > 1_000, `${summary.sent} requests`);
      assert.ok((summary.modes.DEGRADED_FALLBACK ?? 0) > summary.sent / 2, `the breaker was open: ${JSON.stringify(summary.modes)}`);
      t.diagnostic(JSON.stringify({ sent: summary.sent, unenveloped: summary.unenveloped, status: summary.status, modes: summary.modes }));
      void anomalies;
    } finally {
      await stack.dispose();
    }
  });

  test("a healthy 25 ms origin, a fresh isolate each run: the breaker never opens", { timeout: 400_000 }, async (t) => {
    // UNDERSTUDY_LOAD_RUNS / UNDERSTUDY_LOAD_SECONDS: more, shorter runs (a fresh isolate's
    // first seconds are where the breaker opened: docs/outcomes.md, the listening after a timeout).
    const runs = Number(process.env.UNDERSTUDY_LOAD_RUNS ?? (LONG ? 10 : 3));
    const seconds = Number(process.env.UNDERSTUDY_LOAD_SECONDS ?? (LONG ? 12 : 6));
    const seen = [];
    for (let i = 0; i < runs; i++) {
      const stack = await startStack("recommendations");
      try {
        await stack.origin.setFault({ kind: "latency", ms: 25 });
        const { summary } = await load(stack.edge.url, ["--conns", "16", "--duration-s", String(seconds), "--max", "60000"]);
        const { transitions, timeouts } = await breakerSeen(stack);
        const opened = transitions.filter((x) => x.to !== "PRIMARY_HEALTHY");
        seen.push({ run: i, sent: summary.sent, rps: summary.rps, status: summary.status, modes: summary.modes, timeouts, opened });
        assert.equal(summary.unenveloped, 0, JSON.stringify(summary.status));
        assert.deepEqual(opened, [], `run ${i}: the breaker opened on a healthy origin: ${JSON.stringify(opened)} (timeouts ${JSON.stringify(timeouts)}; runs before: ${JSON.stringify(seen.slice(0, -1))})`);
        assert.deepEqual(Object.keys(summary.modes), ["PRIMARY_HEALTHY"], JSON.stringify(summary.modes));
      } finally {
        await stack.dispose();
      }
    }
    t.diagnostic(JSON.stringify(seen));
  });
});
