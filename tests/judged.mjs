// [T-WITNESS] Drills as the suite judges them (docs/adr/013-a-witness-of-the-host.md).
//
// `understudy drill` exits 0 when every invariant held, 1 when one broke and the edge is to
// blame (the answers it blames are named), and 3 when every broken invariant is inconclusive:
// stalls of the host, seen by the drill's witness, explain the answers that broke it. A red run
// is never played again. An inconclusive run is, within a budget of replays per suite run
// shared by every test file: each replay is written to the ledger (one JSON line, with the
// stalls that made the run inconclusive), and `scripts/test.sh` prints the ledger at the end.
// When the budget is spent, an inconclusive run fails its test and says so: a host that stalls
// that often cannot judge the edge.
//
// Environment:
//   UNDERSTUDY_REPLAY_LEDGER  the ledger file (default: one per `node --test` run, in the
//                             system's temporary directory, named after the runner's PID)
//   UNDERSTUDY_REPLAY_BUDGET  replays allowed per suite run (default 4)

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { cp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";

import { EDGE_DIR, ROOT, UNDERSTUDY, tempDir } from "./harness.mjs";

/** `drill`'s exit code for a run that is neither green nor red. */
export const INCONCLUSIVE = 3;
export const REPLAY_LEDGER = process.env.UNDERSTUDY_REPLAY_LEDGER ?? join(tmpdir(), `understudy-replays-${process.ppid}.jsonl`);
export const REPLAY_BUDGET = Number(process.env.UNDERSTUDY_REPLAY_BUDGET ?? 4);

/** The ledger's entries so far (every test file of the suite run appends to it). */
export function ledger(file = REPLAY_LEDGER) {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** The compiler, asynchronously (drills may run side by side). { status, stdout, stderr }. */
export function understudyAsync(args, { timeoutMs = 300_000 } = {}) {
  return new Promise((resolve, reject) => {
    if (!existsSync(UNDERSTUDY)) {
      reject(new Error(`${UNDERSTUDY} does not exist; run \`cargo build -p understudy\` (scripts/test.sh does)`));
      return;
    }
    const child = spawn(UNDERSTUDY, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", reject);
    child.once("exit", (status, signal) => {
      clearTimeout(killer);
      resolve({ status: signal ? `killed by ${signal} after ${timeoutMs} ms` : status, stdout, stderr });
    });
  });
}

/**
 * `understudy drill POLICY --scenario SCENARIO --report DIR --edge EDGE ...extra`, its report
 * read back: { status, stdout, stderr, json (drill.json or null), svg }.
 */
export async function drill(policy, scenario, extra = [], { timeoutMs = 240_000, edge = EDGE_DIR } = {}) {
  const tmp = await tempDir("understudy-drill-");
  try {
    const report = join(tmp.dir, "report");
    const args = ["drill", policy, "--scenario", scenario, "--report", report, "--edge", edge, ...extra];
    const r = await understudyAsync(args, { timeoutMs });
    const json = existsSync(join(report, "drill.json")) ? JSON.parse(await readFile(join(report, "drill.json"), "utf8")) : null;
    const svg = existsSync(join(report, "timeline.svg")) ? await readFile(join(report, "timeline.svg"), "utf8") : null;
    return { ...r, json, svg };
  } finally {
    await tmp.cleanup();
  }
}

/** A drill's verdicts: `drill`'s invariants, or `drill --rollout`'s checks. */
const verdicts = (d) => d.json?.verdicts ?? d.json?.checks ?? [];

/** A run's broken and inconclusive verdicts, one line each, with what they blame or excuse. */
export function why(d) {
  const lines = [];
  for (const v of verdicts(d)) {
    if (v.judgement === "failed") lines.push(`FAIL ${v.name}: ${v.detail}; blamed: ${(v.blamed ?? []).map((o) => o.what).join("; ")}`);
    if (v.judgement === "inconclusive") lines.push(`INCONCLUSIVE ${v.name}: ${(v.excused ?? []).length} excused, first by ${JSON.stringify(v.excused?.[0]?.stalls ?? [])}`);
  }
  const w = d.json?.witness?.summary;
  if (w) lines.push(`witness: ${w.late_wakes} late wakes (worst ${w.worst_late_ms} ms), ${w.stalls} stalls, ${w.stalled_ms} ms in all (longest ${w.longest_stall_ms} ms)`);
  return lines.length ? lines.join("\n") : d.stderr.slice(-800);
}

/**
 * Plays `play()` (a drill) until it is judged: green or red is returned at once — a red run
 * is never played again; an inconclusive one is recorded in the ledger and played again
 * while the suite's replay budget lasts. `what` names the test in the ledger.
 */
export async function judged(t, what, play) {
  for (;;) {
    const d = await play();
    if (d.status !== INCONCLUSIVE) return d;
    spendReplay(t, what, d);
  }
}

/**
 * Records that the inconclusive drill `d` (exit 3) makes `what` play again, in the ledger, and
 * fails the test when this suite run's replay budget is spent.
 */
export function spendReplay(t, what, d) {
  const used = ledger().filter((e) => e.replayed).length;
  const stalls = (d.json?.witness?.stalls ?? [])
    .slice()
    .sort((a, b) => b.to_ms - b.from_ms - (a.to_ms - a.from_ms))
    .slice(0, 5)
    .map((s) => `${Math.round(s.from_ms)}–${Math.round(s.to_ms)} ms (${s.seen_by.join(", ")})`);
  const entry = {
    file: basename(process.argv[1] ?? ""),
    test: what,
    at: new Date().toISOString(),
    inconclusive: verdicts(d).filter((v) => v.judgement === "inconclusive").map((v) => `${v.name} (${v.excused_count} excused)`),
    longest_stalls: stalls,
    witness: d.json?.witness?.summary ?? null,
    replayed: used < REPLAY_BUDGET,
  };
  appendFileSync(REPLAY_LEDGER, `${JSON.stringify(entry)}\n`);
  t.diagnostic(`inconclusive: ${entry.inconclusive.join(", ")}; longest stalls ${stalls.join(", ")}`);
  assert.ok(
    entry.replayed,
    `${what}: inconclusive, and this suite run's ${REPLAY_BUDGET} replays are spent (${REPLAY_LEDGER}): the host stalls too often to judge the edge\n${why(d)}`,
  );
  t.diagnostic(`played again: replay ${used + 1} of ${REPLAY_BUDGET} this suite run`);
}

/**
 * A test build of the edge with a timing defect: a copy of the prebuilt edge (`EDGE_DIR`)
 * whose driver arms the engine's timer `lateMs` late (the deadline's race, the tiers' read
 * timeouts: every wake-up the engine asks for). Returns { dir, cleanup }. Fails when the
 * driver's timer is not found exactly once (the build changed: this proof must be updated,
 * not silently run on a healthy edge).
 */
export async function lateTimerEdge(lateMs) {
  const tmp = await tempDir("understudy-late-timer-edge-");
  const dir = join(tmp.dir, "build");
  await cp(EDGE_DIR, dir, { recursive: true });
  const file = join(dir, "index.js");
  const text = await readFile(file, "utf8");
  // io.js's `f.timer = at(wake, () => report(f, TIMER, 0, 0))`, minified: the engine's
  // timer armed through the driver's `at` primitive, its instant moved `lateMs` later.
  const timer = /(\w+\.timer=\w+\()(\w+)(,\(\)=>\w+\(\w+,4,0,0\)\))/g;
  const found = text.match(timer) ?? [];
  assert.equal(found.length, 1, `the engine's timer in ${EDGE_DIR}/index.js: ${found.length} matches of ${timer}`);
  await writeFile(file, text.replace(timer, (_, head, wake, rest) => `${head}${wake}+${lateMs}${rest}`));
  return { dir, cleanup: tmp.cleanup };
}
