// Runs one drill N times, optionally under K busy loops (processes that spin a core each),
// and counts what the verdicts came to: green (exit 0), red (1: the edge blamed), inconclusive
// (3: stalls of the host explain every broken check). The figures of docs/scenarios.md,
// "Verdicts that say why", come from here.
//
//     node scripts/drill-runs.mjs --runs 20 --busy 2 [--late-timer MS] [--understudy BIN] [--keep DIR] -- POLICY --scenario FILE [drill flags]
//
// --late-timer MS plays the drill against a test copy of the built edge whose engine's timer
// fires MS late (tests/judged.mjs, lateTimerEdge): the defect a verdict must blame.
// Prints one line per run (exit, the broken or inconclusive checks, the witness's summary)
// and a last line of JSON: { runs, busy, green, red, inconclusive, other, load_before,
// load_after } (the 1, 5 and 15 minute load averages, as `uptime` prints them).
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const sep = process.argv.indexOf("--");
if (sep < 0) {
  console.error("usage: node scripts/drill-runs.mjs --runs N [--busy K] [--understudy BIN] -- POLICY --scenario FILE [drill flags]");
  process.exit(2);
}
const { values } = parseArgs({
  args: process.argv.slice(2, sep),
  options: {
    runs: { type: "string", default: "20" },
    busy: { type: "string", default: "0" },
    understudy: { type: "string", default: join(root, "target", "debug", "understudy") },
    // Keep the report (drill.json, timeline.svg) of every run that is not green, as DIR/run-N.
    keep: { type: "string" },
    "late-timer": { type: "string" },
  },
});
const drillArgs = process.argv.slice(sep + 1);
let late = null;
if (values["late-timer"] !== undefined) {
  const ms = Number(values["late-timer"]);
  if (!(ms >= 1 && ms <= 10_000)) {
    console.error("--late-timer 1..10000 (ms)");
    process.exit(2);
  }
  const { lateTimerEdge } = await import("../tests/judged.mjs");
  late = await lateTimerEdge(ms);
  drillArgs.push("--edge", late.dir);
}
const runs = Number(values.runs);
const busy = Number(values.busy);
if (!(runs >= 1 && runs <= 1000) || !(busy >= 0 && busy <= 16)) {
  console.error("--runs 1..1000, --busy 0..16");
  process.exit(2);
}

const loadBefore = loadavg().map((x) => Math.round(x * 100) / 100);
// Each busy loop spins until this process ends (and at most six hours).
const loops = Array.from({ length: busy }, () =>
  spawn(process.execPath, ["-e", "const end = Date.now() + 6 * 3600e3; while (Date.now() < end) {}"], { stdio: "ignore" }),
);
const stop = () => loops.forEach((l) => l.kill("SIGKILL"));
process.on("exit", stop);
let current = null;
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.on(sig, () => {
    current?.kill("SIGINT");
    process.exit(130);
  });
}

/** One drill, as a child this process can stop: { status, stderr }. */
function run(args) {
  return new Promise((done) => {
    current = spawn(values.understudy, args, { cwd: root, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    current.stderr.on("data", (d) => (stderr = (stderr + d).slice(-4000)));
    const killer = setTimeout(() => current.kill("SIGKILL"), 600_000);
    current.once("exit", (status) => {
      clearTimeout(killer);
      current = null;
      done({ status, stderr });
    });
  });
}

const tally = { green: 0, red: 0, inconclusive: 0, other: 0 };
for (let i = 1; i <= runs; i++) {
  const dir = mkdtempSync(join(tmpdir(), "understudy-drill-runs-"));
  const r = await run(["drill", ...drillArgs, "--report", dir]);
  let json = null;
  if (existsSync(join(dir, "drill.json"))) json = JSON.parse(readFileSync(join(dir, "drill.json"), "utf8"));
  const kind = { 0: "green", 1: "red", 3: "inconclusive" }[r.status] ?? "other";
  if (values.keep && kind !== "green") {
    mkdirSync(values.keep, { recursive: true });
    cpSync(dir, join(values.keep, `run-${i}`), { recursive: true });
  }
  rmSync(dir, { recursive: true, force: true });
  tally[kind] += 1;
  const v = (json?.verdicts ?? []).filter((x) => x.judgement === "failed" || x.judgement === "inconclusive");
  const why = v.map((x) => `${x.judgement === "failed" ? "FAIL" : "??"} ${x.name} (${x.blamed_count ?? 0} blamed, ${x.excused_count ?? 0} excused)`);
  const blamed = v.flatMap((x) => (x.blamed ?? []).slice(0, 2).map((o) => o.what));
  const w = json?.witness?.summary;
  console.log(
    `run ${i}: exit ${r.status} ${kind}${why.length ? ` — ${why.join(", ")}` : ""}` +
      (blamed.length ? `; blamed: ${blamed.join("; ")}` : "") +
      (w ? `; witness: ${w.stalls} stalls, ${w.stalled_ms} ms, longest ${w.longest_stall_ms} ms` : "") +
      (kind === "other" ? `; ${r.stderr.slice(-300)}` : ""),
  );
}
stop();
await late?.cleanup();
const loadAfter = loadavg().map((x) => Math.round(x * 100) / 100);
const drill = drillArgs.join(" ").replace(late?.dir ?? "\0", "LATE_TIMER_EDGE");
console.log(JSON.stringify({ runs, busy, late_timer_ms: late ? Number(values["late-timer"]) : null, ...tally, load_before: loadBefore, load_after: loadAfter, drill }));
