// Prints the suite's replay ledger (tests/judged.mjs): how many drills were inconclusive in
// this suite run, each with the stalls of the host that made it so, against the budget.
//     node scripts/replays.mjs LEDGER [BUDGET]
import { existsSync, readFileSync } from "node:fs";

const [file, budgetArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: node scripts/replays.mjs LEDGER [BUDGET]");
  process.exit(2);
}
const budget = Number(budgetArg ?? process.env.UNDERSTUDY_REPLAY_BUDGET ?? 4);
const entries = existsSync(file)
  ? readFileSync(file, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
  : [];
const replayed = entries.filter((e) => e.replayed).length;
console.log(`Replays: ${entries.length} inconclusive drill run(s) this suite run, ${replayed} played again (budget ${budget}).`);
for (const e of entries) {
  const w = e.witness ? `; witness: ${e.witness.stalls} stalls, ${e.witness.stalled_ms} ms in all, longest ${e.witness.longest_stall_ms} ms` : "";
  console.log(`  ${e.file} — ${e.test}: ${e.inconclusive.join(", ")}${w}`);
  console.log(`    longest stalls: ${e.longest_stalls.join(", ") || "none listed"}${e.replayed ? "" : " (not played again: budget spent)"}`);
}
