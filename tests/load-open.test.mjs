// Issue 23, from the checks run from outside the project: load from a process of its own
// (scripts/load.mjs: 16 keep-alive connections, a fresh user and bearer token per request)
// against the built edge in workerd and the simulated origin, the breaker open and the
// category tier's key cold every second. The old edge let requests await another request's
// KV read — a cross-request promise, whose wake-up workerd lost under load — and the runtime
// cancelled them as hung: bare 500s with none of our headers (78 in 4 runs of 40 s). Every
// answer must carry our envelope now. Judged by counts: more load on the host only makes
// it harder, so scripts/e2e.sh runs it beside the bench. Short form in the suite (10 s:
// about 15,000 answers alone, 8,000 beside the bench); UNDERSTUDY_LONG=1 runs 40 s, as the issue asks.
//
// The connections (issue 38, point 6): one run in nine of 32 keep-alive connections at
// ~1,200 req/s for 15 s, the model hung, once saw 17 ECONNRESET of 17,952 requests. Every
// run here asserts no transport error and that the edge closed no connection (the client
// opened exactly its --conns); UNDERSTUDY_LONG=1 also runs that load shape 5 times.

import { test, describe } from "node:test";
import assert from "node:assert/strict";

import { requireEdge, startStack } from "./harness.mjs";
import { load } from "./load-kit.mjs";

requireEdge();

const LONG = process.env.UNDERSTUDY_LONG === "1";

describe("the edge under load from a separate process, the breaker open (issue 23)", () => {
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
      assertConnectionsKept(summary, 16);
      t.diagnostic(JSON.stringify({ sent: summary.sent, unenveloped: summary.unenveloped, status: summary.status, modes: summary.modes, sockets: summary.sockets_opened }));
      void anomalies;
    } finally {
      await stack.dispose();
    }
  });
});

/** No transport error, and no connection closed by the edge: the client opened `conns`. */
function assertConnectionsKept(summary, conns) {
  assert.deepEqual(summary.errors, {}, `transport errors, each with its socket's story: ${JSON.stringify(summary.transport_errors)}`);
  assert.equal(summary.sockets_opened, conns, `the client opened ${summary.sockets_opened} connections for ${conns}: the edge closed some`);
}

if (LONG) {
  describe("32 keep-alive connections, the model hung, 15 s (issue 38, point 6)", () => {
    test("5 runs: no connection reset or closed", { timeout: 600_000 }, async (t) => {
      for (let run = 1; run <= 5; run++) {
        const stack = await startStack("recommendations");
        try {
          await stack.origin.setFault({ kind: "hang" });
          const { summary } = await load(stack.edge.url, ["--conns", "32", "--duration-s", "15", "--max", "60000", "--cat-mode", "rotate"]);
          t.diagnostic(`run ${run}: ${summary.sent} answers (${summary.rps} req/s), ${summary.sockets_opened} connections, errors ${JSON.stringify(summary.errors)}`);
          assertConnectionsKept(summary, 32);
          assert.deepEqual(Object.keys(summary.status), ["200"], JSON.stringify(summary.status));
        } finally {
          await stack.dispose();
        }
      }
    });
  });
}
