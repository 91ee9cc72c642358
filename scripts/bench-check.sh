#!/usr/bin/env bash
# Benchmark for issue 10 (prints figures; not a timed test): `understudy check` on a policy
# whose catalog is 1 MB of minified JSON on one line, with 1,000 duplicate SKUs. Before
# issue 10 every duplicate was its own diagnostic quoting the whole line (hundreds of MB of
# output, tens of seconds); now the duplicates are one diagnostic (20 listed) quoting a
# short excerpt.
#
# Usage: scripts/bench-check.sh [BIN]   (RUNS=3 by default)
#   BIN  the compiler to measure; default: the release build of this checkout
#        (cargo build --release -p understudy). Pass an older build to compare.
# Prints, per run: wall time, exit code, bytes written to stdout and stderr, peak memory.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${RUNS:-3}"
cd "$root"

bin="${1:-}"
if [[ -z "$bin" ]]; then
  echo "bench-check: building the compiler (release)" >&2
  cargo build --release -p understudy --quiet
  bin="$root/target/release/understudy"
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/understudy-bench-check-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# 2,000 distinct SKUs, then 1,000 of them again: ~1 MB on a single line.
node - "$tmp" <<'EOF'
const fs = require("node:fs");
const dir = process.argv[2];
const pad = "x".repeat(240);
const item = (n) => ({ sku: `SKU-${String(n).padStart(5, "0")}`, title: `item ${n} wireless headphones`, category: "audio", description: pad });
const items = [];
for (let n = 0; n < 2000; n++) items.push(item(n));
for (let n = 0; n < 1000; n++) items.push(item(n * 2));
fs.writeFileSync(`${dir}/catalog.json`, JSON.stringify({ items }));
const taken = new Date(Date.UTC(2026, 10, 30, 1, 0, 0)).toISOString().replace(/\.\d{3}Z$/, "Z");
const skus = [];
for (let n = 0; n < 2000; n++) skus.push({ sku: `SKU-${String(n).padStart(5, "0")}`, status: "active", stock: 100 });
fs.writeFileSync(`${dir}/inventory.json`, JSON.stringify({ taken_at: taken, skus }));
EOF
sed -e 's#"\.\./catalog.json"#"catalog.json"#; s#"\.\./good-inventory.json"#"inventory.json"#' \
    -e 's#"good-inventory.json"#"inventory.json"#' \
    compiler/tests/fixtures/base.toml > "$tmp/policy.toml"

printf 'catalog: %s bytes on %s line(s)\n' "$(wc -c < "$tmp/catalog.json")" "$(($(wc -l < "$tmp/catalog.json") + 1))"
for run in $(seq 1 "$RUNS"); do
  set +e
  /usr/bin/time -f '%e %M' -o "$tmp/time" \
    "$bin" check "$tmp/policy.toml" --now 2026-11-30T12:00:00Z >"$tmp/out" 2>"$tmp/err"
  code=$?
  set -e
  # GNU time writes "Command exited with non-zero status N" first when the exit is not 0.
  read -r secs kb < <(tail -n 1 "$tmp/time")
  printf 'run %s: %s s, exit %s, stdout %s bytes, stderr %s bytes, peak memory %s MB\n' \
    "$run" "$secs" "$code" "$(wc -c < "$tmp/out")" "$(wc -c < "$tmp/err")" "$((kb / 1024))"
done
echo "--- the output of the last run, first 40 lines:"
head -40 "$tmp/out"
