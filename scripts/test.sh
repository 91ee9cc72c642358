#!/usr/bin/env bash
# THE test command: installs what is missing (scripts/setup.sh), then runs every check CI
# runs, in order of cost, stopping at the first failure:
#   1. cargo fmt --check
#   2. cargo clippy, natively for the workspace and for wasm32 for the Worker, -D warnings
#   3. cargo test --workspace (the decision core and the compiler, natively)
#   4. the edge build (scripts/build-edge.sh, and its --bare and --bare-obliged floors for the
#      bench; cached) and the compiler binary
#   5. the end-to-end tests: scripts/e2e.sh (node --test over tests/ in two lanes; workerd
#      through Miniflare, loopback only), then the drills' replays of this run (inconclusive
#      runs, with the host's stalls)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
t0=$(date +%s)
# Each step says how much disk is left where the build writes (a full disk fails a build
# half-way with an error about whatever it was writing).
free_disk() { df -Ph "$root" 2>/dev/null | awk 'NR == 2 { print $4 " free on " $6 }'; }
step() { printf '\n==> %s (at %ss; %s)\n' "$*" "$(($(date +%s) - t0))" "$(free_disk)" >&2; }

# CI builds a fresh clone once: incremental compilation's caches would only cost disk.
if [[ -n "${CI:-}" ]]; then export CARGO_INCREMENTAL=0; fi

step "setup"
# shellcheck source=scripts/setup.sh
. scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy (native workspace, then the Worker for wasm32)"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p understudy-edge --target wasm32-unknown-unknown --locked -- -D warnings
cargo clippy -p understudy-bare --features obliged --target wasm32-unknown-unknown --locked -- -D warnings

step "cargo test --workspace"
cargo test --workspace --locked

step "edge build (the edge, then the bare Workers the bench measures it against)"
scripts/build-edge.sh
scripts/build-edge.sh --bare
scripts/build-edge.sh --bare-obliged
cargo build -p understudy --locked

step "end-to-end tests (scripts/e2e.sh: two lanes side by side; a test is failed after 15 minutes)"
scripts/e2e.sh

step "all passed in $(($(date +%s) - t0)) s"
