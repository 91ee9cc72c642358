// Load from a process of its own (scripts/load.mjs: keep-alive connections, a fresh user and
// bearer token per request) against a stack of tests/harness.mjs, and what the edge's status
// endpoint says of its breaker afterwards. Used by tests/load.test.mjs and
// tests/load-open.test.mjs.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";

import { ROOT, devSecret } from "./harness.mjs";

const LOAD = join(ROOT, "scripts", "load.mjs");

/** Runs scripts/load.mjs against `url` as a separate process; its JSON summary. */
export function load(url, args) {
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
export async function breakerSeen(stack) {
  const r = await stack.fetch("/__understudy/status", { headers: { authorization: `Bearer ${devSecret("ADMIN_TOKEN")}` } });
  assert.equal(r.status, 200, r.text);
  const c = r.json?.counters ?? {};
  return {
    transitions: r.json?.breaker?.transitions ?? [],
    timeouts: { counted: c.timeouts_counted, convicted: c.timeouts_convicted, late_answers: c.late_answers, unrecorded: c.unrecorded },
  };
}
