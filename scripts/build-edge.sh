#!/usr/bin/env bash
# Builds the edge Worker (edge/worker) to wasm with worker-build, into edge/worker/build:
#     index.js        the wasm-bindgen glue and worker-build's entrypoint shim, bundled
#     index_bg.wasm   the module, with no bake yet (`understudy build` splices the bake in)
#     worker/shim.mjs a re-export of index.js kept by worker-build for older configs
#
# Cached: the build is skipped when nothing that goes into it changed — the edge sources,
# the workspace manifests and lockfile, the Rust toolchain and the tool versions. That
# fingerprint is kept in edge/worker/build/.fingerprint. `--force` rebuilds anyway.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
force=false
[[ "${1:-}" == "--force" ]] && force=true

if [[ -z "${WASM_BINDGEN_BIN:-}" || -z "${ESBUILD_BIN:-}" || -z "${WORKER_BUILD_BIN:-}" ]]; then
    # shellcheck source=scripts/setup.sh
    . "$root/scripts/setup.sh"
fi

out="$root/edge/worker/build"
crate_dir="$root/edge/worker"
# `--bare` builds the floor `understudy bench` measures against instead (edge/bare, a
# pass-through Worker) into edge/bare/build, with the same tools and the same caching.
# `--bare-obliged`: the same crate with `--features obliged` (a token check, a log line and
# the disclosure headers on top, written the direct workers-rs way: `understudy bench` runs it
# beside the floor and the edge) into edge/bare/build-obliged.
variant=""
extra=()
if [[ "${1:-}" == "--bare" || "${2:-}" == "--bare" ]]; then
    out="$root/edge/bare/build"
    crate_dir="$root/edge/bare"
    [[ "${1:-}" == "--force" || "${2:-}" == "--force" ]] && force=true
fi
if [[ "${1:-}" == "--bare-obliged" || "${2:-}" == "--bare-obliged" ]]; then
    out="$root/edge/bare/build-obliged"
    crate_dir="$root/edge/bare"
    variant="obliged"
    extra=(--out-dir build-obliged . --features obliged)
    [[ "${1:-}" == "--force" || "${2:-}" == "--force" ]] && force=true
fi
fingerprint() {
    cd "$root"
    {
        echo "${crate_dir#"$root"/} $variant"
        find edge -path edge/worker/build -prune -o -path edge/bare/build -prune -o -path edge/bare/build-obliged -prune -o -type f -print | LC_ALL=C sort | xargs sha256sum
        sha256sum Cargo.toml Cargo.lock
        rustc --version
        "$WORKER_BUILD_BIN" --version
        "$WASM_BINDGEN_BIN" --version
        "$ESBUILD_BIN" --version
    } | sha256sum | cut -d' ' -f1
}

# One build at a time (tests and `understudy build` may both ask for it).
mkdir -p "$root/target"
exec 9>"$root/target/.build-edge.lock"
command -v flock >/dev/null && flock 9

want="$(fingerprint)"
if ! $force && [[ -f "$out/.fingerprint" && "$(cat "$out/.fingerprint")" == "$want" && -f "$out/index_bg.wasm" && -f "$out/index.js" ]]; then
    echo "build-edge: ${out#"$root"/} is up to date" >&2
    exit 0
fi

echo "build-edge: building ${crate_dir#"$root"/} with worker-build --release" >&2
start=$(date +%s)
(cd "$crate_dir" && "$WORKER_BUILD_BIN" --release "${extra[@]}" >&2)
[[ -f "$out/index_bg.wasm" && -f "$out/index.js" ]] \
    || { echo "build-edge: error: worker-build did not produce $out/index_bg.wasm and $out/index.js" >&2; exit 1; }
# The `name` section wasm-bindgen leaves is read by no runtime (scripts/strip-names.mjs).
node "$root/scripts/strip-names.mjs" "$out/index_bg.wasm"
printf '%s\n' "$want" >"$out/.fingerprint"
echo "build-edge: done in $(($(date +%s) - start)) s: $(wc -c <"$out/index_bg.wasm") bytes of wasm" >&2
