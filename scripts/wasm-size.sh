#!/usr/bin/env bash
# Where the Worker's .wasm bytes go: the module built as the Worker's is (release profile,
# wasm32), but with its symbols kept (CARGO_PROFILE_RELEASE_STRIP=false) and wasm-bindgen's
# --keep-debug, so that twiggy can name every function; then each function's size summed by
# the crate its (demangled) path starts with. Generic code is counted where its path starts:
# `core::ptr::drop_in_place<understudy_core::…>` is `core`'s. The code section of this build
# is within about 1% of the shipped module's (docs/size.md).
#
#   scripts/wasm-size.sh [TOP]      # TOP: how many of the largest functions to list (20)
#
# Needs the pinned wasm-bindgen (scripts/setup.sh) and twiggy (installed here if missing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/setup.sh >/dev/null
TWIGGY_VERSION=0.8.0
if ! command -v twiggy >/dev/null || [[ "$(twiggy --version)" != *"$TWIGGY_VERSION"* ]]; then
  cargo install twiggy --version "$TWIGGY_VERSION" --locked
fi
out="${TMPDIR:-/tmp}/understudy-wasm-size"
mkdir -p "$out"
CARGO_PROFILE_RELEASE_STRIP=false cargo build -q -p understudy-edge --release \
  --target wasm32-unknown-unknown --target-dir "$out/target"
"$WASM_BINDGEN_BIN" --keep-debug --target bundler --out-dir "$out/bindgen" \
  "$out/target/wasm32-unknown-unknown/release/understudy_edge.wasm"
twiggy top -n 1000000 --format csv "$out/bindgen/understudy_edge_bg.wasm" > "$out/top.csv"
python3 - "$out/top.csv" "${1:-20}" <<'PY'
import collections, csv, re, sys
rows = list(csv.DictReader(open(sys.argv[1])))
top = int(sys.argv[2])
section = re.compile(r'^(custom section|"|data segment|type\[|import |export |elem|table|global|memory|wasm magic)')
code, count, funcs = collections.Counter(), collections.Counter(), []
for r in rows:
    name, size = r["Name"], int(r["ShallowSize"])
    if section.match(name) or "subsection" in name:
        continue
    path = re.sub(r"^[<&*]+|^(impl |dyn |mut |const )+", "", name)
    path = re.sub(r"^[<&*]+|^(impl |dyn |mut |const )+", "", path)
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(\[[0-9a-f]+\])?::", path)
    crate = m.group(1) if m else "(no path: JS imports' shims, exports)"
    code[crate] += size
    count[crate] += 1
    funcs.append((size, name))
total = sum(code.values())
print(f"code: {total} bytes in {sum(count.values())} functions")
print(f"{'crate':40} {'bytes':>8} {'share':>6} {'functions':>9}")
for crate, size in code.most_common():
    if size * 1000 < total:
        break
    print(f"{crate:40} {size:>8} {100 * size / total:>5.1f}% {count[crate]:>9}")
rest = [c for c, s in code.items() if s * 1000 < total]
print(f"{'(' + str(len(rest)) + ' more, each under 0.1%)':40} {sum(code[c] for c in rest):>8}")
print(f"\nthe {top} largest functions:")
for size, name in sorted(funcs, reverse=True)[:top]:
    print(f"{size:>8}  {re.sub(r'::h[0-9a-f]{16}$', '', name)[:110]}")
PY
