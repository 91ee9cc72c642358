// Issue 23, from the checks run from outside the project: load from a process of its own
// (scripts/load.mjs: 16 keep-alive connections, a fresh user and bearer token per request)
// against the built edge in workerd and a healthy simulated origin (25 ms). A handful of
// timeouts in a fresh isolate's first seconds opened the breaker (the window's p95 over the
// bar: 4 of 12 runs). It must never open. Short form in the suite (3 runs of 6 s, a fresh
// isolate each); UNDERSTUDY_LONG=1 runs 10 runs of 12 s, as the issue asks. The open path
// under load is tests/load-open.test.mjs.

import { test, describe } from "node:test";
import assert from "node:assert/strict";

import { requireEdge, startStack } from "./harness.mjs";
import { breakerSeen, load } from "./load-kit.mjs";

requireEdge();

const LONG = process.env.UNDERSTUDY_LONG === "1";

describe("the edge under load from a separate process, a healthy origin (issue 23)", () => {
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
