// The runtime's output as scripts/edge-server.mjs keeps it (runtimeOutput): raw blocks of
// whole lines, split only when asked — a reader that falls behind blocks workerd, whose
// stdout is a pipe (docs/history/2026-12-bench.md, "The model-hung tail"). No runtime needed: the
// streams here are plain PassThroughs standing in for workerd's stdout and stderr.

import { test } from "node:test";
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { setImmediate as tick } from "node:timers/promises";

import { runtimeOutput } from "../scripts/edge-server.mjs";

function attach() {
  const out = runtimeOutput(false);
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  out.handleRuntimeStdio(stdout, stderr);
  return { out, stdout, stderr };
}

test("a line split across chunks is one line, and only once its newline came", async () => {
  const { out, stdout } = attach();
  stdout.write('{"correlation_id":"c-1","outc');
  await tick();
  assert.deepEqual(out.logs(), [], "half a line is not a line yet");
  stdout.write('ome":"live"}\n{"correlation_id":"c-2"');
  await tick();
  assert.deepEqual(out.logs(true), [{ correlation_id: "c-1", outcome: "live" }]);
  stdout.write(',"outcome":"fallback"}\nplain text\n');
  await tick();
  assert.deepEqual(out.logs(), ['{"correlation_id":"c-1","outcome":"live"}', '{"correlation_id":"c-2","outcome":"fallback"}', "plain text"]);
  assert.deepEqual(
    out.logs(true).map((l) => l.correlation_id),
    ["c-1", "c-2"],
    "logs(true) parses the JSON lines and skips the rest",
  );
});

test("stdout and stderr are kept apart line by line, and only the last 2,000 lines are given", async () => {
  const { out, stdout, stderr } = attach();
  stderr.write("workerd: a warn");
  for (let i = 0; i < 2_100; i++) stdout.write(`{"n":${i}}\n`);
  stderr.write("ing\n");
  await tick();
  const lines = out.logs();
  assert.equal(lines.length, 2_000);
  assert.ok(lines.includes("workerd: a warning"), "stderr's line is whole, not cut by stdout's");
  assert.equal(lines.at(-2), '{"n":2099}');
  assert.deepEqual(out.logs(true).at(-1), { n: 2099 });
  assert.ok(!lines.includes('{"n":99}'), "the oldest lines are gone");
});
