#!/usr/bin/env bash
# Benchmark of the bake (prints figures; not a timed test):
#   - the nightly re-bake of a 50,000-SKU catalog + inventory into an existing build
#     (`understudy bake`), median of RUNS runs, against a full `understudy build` of the
#     same policy and catalog (validation + bake into the prebuilt edge);
#   - module size, raw (the platform's limit: 64 MiB uncompressed on every plan) and
#     gzipped (gzip -6, an opt-in start-up budget), for 1 (baseline), 100, 10,000, 50,000 and
#     200,000 SKUs;
#   - bake time (wall and CPU) and peak memory for 10k, 50k and 200k SKUs, against
#     the catalog's size on disk (goal: 200k in under 1 s, peak under 4x the catalog), and
#     publishing 10,000 category lists (10 SKUs each) against the 200k inventory (goal: < 1 s);
#   - first-request (cold isolate) time in workerd (Miniflare) per size, median of RUNS.
#
# Usage: scripts/bench-bake.sh   (RUNS=5 by default; COLD=0 skips workerd; EDGE_COMPILE=1
#        also times a cold compile of the Worker, which is what a re-bake avoids)
# Uses the release build of the compiler (cargo build --release -p understudy) and the
# prebuilt edge (scripts/build-edge.sh, cached). Everything happens in a temp directory.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${RUNS:-5}"
COLD="${COLD:-1}"
cd "$root"

echo "bench-bake: building the compiler (release) and checking the prebuilt edge" >&2
cargo build --release -p understudy --quiet
[[ -f edge/worker/build/index_bg.wasm ]] || scripts/build-edge.sh
bin="$root/target/release/understudy"
edge="$root/edge/worker/build"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/understudy-bench-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# Catalogs shaped like policies/recommendations.catalog.json, inventories all valid.
node --input-type=module - "$tmp" "$now" 1 100 10000 50000 200000 <<'JS'
import { writeFileSync } from "node:fs";
const [dir, now, ...sizes] = process.argv.slice(2);
const cats = ["audio", "kitchen", "bags", "computing", "home", "outdoor", "toys", "books"];
const words = ["wireless", "waterproof", "portable", "ergonomic", "compact", "smart", "classic", "pro",
  "headphones", "speaker", "backpack", "keyboard", "kettle", "lamp", "tent", "novel", "blender", "mouse"];
const taken = new Date(Date.parse(now) - 3_600_000).toISOString().replace(/\.\d{3}Z$/, "Z");
for (const n of sizes.map(Number)) {
  const items = [], skus = [];
  for (let i = 0; i < n; i++) {
    const sku = `SKU-${100000 + i}`;
    const title = `${words[i % 9]} ${words[9 + (i * 7) % 9]} ${i}`;
    items.push({ sku, title, category: cats[i % cats.length], price: { amount: 10 + (i % 90) + 0.99, currency: "USD" }, url: `/p/${sku.toLowerCase()}` });
    skus.push({ sku, status: "active", stock: 60 + (i % 500) });
  }
  writeFileSync(`${dir}/catalog-${n}.json`, JSON.stringify({ items }, null, 1));
  writeFileSync(`${dir}/inventory-${n}.json`, JSON.stringify({ taken_at: taken, skus }, null, 1));
}
// 10,000 category lists of 10 SKUs each, drawn from the 200,000-SKU inventory.
const rows = ["category_id,sku,title"];
for (let c = 0; c < 10000; c++) {
  for (let k = 0; k < 10; k++) {
    const i = (c * 17 + k * 1931) % 200000;
    rows.push(`cat-${String(c).padStart(5, "0")},SKU-${100000 + i},top seller ${i}`);
  }
}
writeFileSync(`${dir}/lists-10000.csv`, rows.join("\n") + "\n");
JS

# One directory per size with the same policy text (so the policy hash, and the bake of a
# re-bake and of a full build, are the same): n-SIZE/{recommendations.toml,catalog.json,inventory.json}.
for n in 1 100 10000 50000 200000; do
  mkdir -p "$tmp/n-$n"
  mv "$tmp/catalog-$n.json" "$tmp/n-$n/catalog.json"
  mv "$tmp/inventory-$n.json" "$tmp/n-$n/inventory.json"
  sed -e 's|^stubs = .*|stubs = "catalog.json"|' -e 's|^inventory = .*|inventory = "inventory.json"|' \
    policies/recommendations.toml >"$tmp/n-$n/recommendations.toml"
done

ms() { echo $(( $(date +%s%N) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Full builds (validation + bake into the prebuilt edge), one per size; sizes from manifest.
printf '\n%-8s %14s %14s %10s %12s  %s\n' "SKUs" "module raw" "gzipped" "bake" "catalog json" "share of the 64 MiB limit"
for n in 1 100 10000 50000 200000; do
  "$bin" build "$tmp/n-$n/recommendations.toml" --out "$tmp/dist-$n" --edge "$edge" --now "$now" >/dev/null
  gz=$(gzip -6 -c "$tmp/dist-$n/index_bg.wasm" | wc -c)
  node -e '
    const m = require(process.argv[1] + "/manifest.json").module;
    const fs = require("fs");
    const cat = fs.statSync(process.argv[2]).size;
    const mib = (b) => (b / 1048576).toFixed(2) + " MiB";
    const share = ((100 * m.bytes) / (64 * 1048576)).toFixed(0) + " %";
    console.log(`${process.argv[3].padEnd(8)} ${mib(m.bytes).padStart(14)} ${mib(Number(process.argv[4])).padStart(14)} ${mib(m.bake_bytes).padStart(10)} ${mib(cat).padStart(12)}  ${share}`);
  ' "$tmp/dist-$n" "$tmp/n-$n/catalog.json" "$n" "$gz"
done
edge_raw=$(wc -c <"$edge/index_bg.wasm"); edge_gz=$(gzip -6 -c "$edge/index_bg.wasm" | wc -c)
echo "prebuilt edge without a bake: $edge_raw bytes raw, $edge_gz gzipped"

# Re-bake of 50,000 SKUs into yesterday's 100-SKU build vs a full build of the same.
# Wall time, and CPU time (user + sys, from /usr/bin/time) which a busy machine inflates less.
timed() { # timed WALL_ARRAY CPU_ARRAY cmd...
  local -n wall_=$1 cpu_=$2; shift 2
  local t0; t0=$(ms)
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -f "%U %S" -o "$tmp/time" "$@" >/dev/null
    cpu_+=("$(awk '{printf "%d", ($1 + $2) * 1000}' "$tmp/time")")
  else
    "$@" >/dev/null
    cpu_+=(0)
  fi
  wall_+=($(( $(ms) - t0 )))
}
rebake=(); rebake_cpu=(); full=(); full_cpu=()
for _ in $(seq "$RUNS"); do
  timed rebake rebake_cpu "$bin" bake --from "$tmp/dist-100" --catalog "$tmp/n-50000/catalog.json" \
    --inventory "$tmp/n-50000/inventory.json" --out "$tmp/rebaked" --now "$now"
  timed full full_cpu "$bin" build "$tmp/n-50000/recommendations.toml" --out "$tmp/full" --edge "$edge" --now "$now"
done
cmp -s "$tmp/rebaked/index_bg.wasm" "$tmp/full/index_bg.wasm" && same="byte-identical" || same="DIFFERENT"
rb=$(printf '%s\n' "${rebake[@]}" | median); fb=$(printf '%s\n' "${full[@]}" | median)
echo
rc=$(printf '%s\n' "${rebake_cpu[@]}" | median); fc=$(printf '%s\n' "${full_cpu[@]}" | median)
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?') on $(nproc) core(s)"
echo "re-bake 50,000 SKUs (understudy bake): median ${rb} ms wall of ${RUNS} runs [${rebake[*]}], ${rc} ms CPU (target < 1000 ms)"
echo "full build, same inputs (understudy build, prebuilt edge): median ${fb} ms wall [${full[*]}], ${fc} ms CPU"
echo "ratio re-bake / full build: $(awk -v a="$rb" -v b="$fb" 'BEGIN {printf "%.2f", a / b}'); modules ${same}"
# Issue 12: bake and publish, wall, CPU and peak memory (max RSS, /usr/bin/time).
echo
echo "bake (understudy bake --from a 100-SKU build --out DIR), median wall of ${RUNS}; CPU and peak memory of that run:"
peak() { # peak LABEL BYTES_ON_DISK cmd... : median wall, its CPU and max RSS
  local label=$1 disk=$2; shift 2
  local rows=()
  for _ in $(seq "$RUNS"); do
    local t0; t0=$(ms)
    /usr/bin/time -f "%U %S %M" -o "$tmp/time" "$@" >/dev/null
    rows+=("$(( $(ms) - t0 )) $(awk '{printf "%d %d", ($1 + $2) * 1000, $3}' "$tmp/time")")
  done
  printf '%s\n' "${rows[@]}" | sort -n | awk -v label="$label" -v disk="$disk" -v runs="$RUNS" '
    {a[NR] = $0} END {
      split(a[int((NR + 1) / 2)], m, " ");
      printf "  %-34s %6d ms wall, %6d ms CPU, peak %5.0f MiB = %.1fx the catalog (%.1f MiB on disk)\n",
        label, m[1], m[2], m[3] / 1024, (m[3] * 1024) / disk, disk / 1048576 }'
}
if [[ -x /usr/bin/time ]]; then
  for n in 10000 50000 200000; do
    peak "bake ${n} SKUs" "$(wc -c <"$tmp/n-$n/catalog.json")" \
      "$bin" bake --from "$tmp/dist-100" --catalog "$tmp/n-$n/catalog.json" \
      --inventory "$tmp/n-$n/inventory.json" --out "$tmp/rebaked-$n" --now "$now"
  done
  echo "  (goal: 200,000 SKUs under 1000 ms, peak under 4x the catalog; UNDERSTUDY_TIMINGS=1 shows each phase)"
  peak "publish 10,000 lists (100,000 SKUs)" "$(wc -c <"$tmp/lists-10000.csv")" \
    "$bin" publish "$tmp/n-200000/recommendations.toml" --tier category --lists "$tmp/lists-10000.csv" \
    --inventory "$tmp/n-200000/inventory.json" --out "$tmp/published.json" --now "$now"
  echo "  (goal: publishing 10,000 category lists under 1000 ms; \"catalog\" is the lists file there)"
else
  echo "  (skipped: /usr/bin/time is not installed)"
fi

if [[ "${EDGE_COMPILE:-0}" == "1" ]]; then
  # What a re-bake avoids: compiling the Worker. Into an empty target directory of its own,
  # so the shared edge/worker/build and target/ are untouched.
  t0=$(ms)
  CARGO_TARGET_DIR="$tmp/edge-target" cargo build --release --locked --quiet \
    --target wasm32-unknown-unknown -p understudy-edge
  ec=$(( $(ms) - t0 ))
  echo "cold compile of the Worker (cargo build --release --target wasm32-unknown-unknown, empty target dir): ${ec} ms"
  echo "ratio re-bake / (Worker compile + build): $(awk -v a="$rb" -v b="$((ec + fb))" 'BEGIN {printf "%.4f", a / b}')"
else
  echo "(a build without the prebuilt edge first compiles the Worker, scripts/build-edge.sh; EDGE_COMPILE=1 times it)"
fi

if [[ "$COLD" == "1" ]]; then
  echo
  echo "first request in workerd (Miniflare), cold isolate, median of ${RUNS}:"
  node --input-type=module - "$tmp" "$RUNS" 1 100 10000 50000 <<'JS'
import { startEdge } from "./scripts/edge-server.mjs";
const [dir, runs, ...sizes] = process.argv.slice(2);
const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor((a.length - 1) / 2)];
for (const n of sizes) {
  const first = [], second = [], boot = [];
  for (let i = 0; i < Number(runs); i++) {
    const t0 = performance.now();
    const edge = await startEdge({ dist: `${dir}/dist-${n}` });
    const t1 = performance.now();
    try {
      for (const arr of [first, second]) {
        const s = performance.now();
        const r = await fetch(`${edge.url}/v1/recommendations?category=audio`, { signal: AbortSignal.timeout(30_000) });
        await r.text();
        arr.push(performance.now() - s);
      }
    } finally {
      await edge.dispose();
    }
    boot.push(t1 - t0);
  }
  console.log(`  ${String(n).padEnd(6)} SKUs: first request ${median(first).toFixed(1)} ms, second ${median(second).toFixed(1)} ms (runtime start-up ${median(boot).toFixed(0)} ms)`);
}
JS
fi
