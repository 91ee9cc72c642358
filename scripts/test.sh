#!/usr/bin/env bash
# THE test command: installs what is missing (scripts/setup.sh), then runs every check CI
# runs, in order of cost, stopping at the first failure:
#   1. cargo fmt --check
#   2. cargo clippy, natively for the workspace and for wasm32 for the Worker, -D warnings
#   3. cargo test --workspace (the decision core and the compiler, natively)
#   4. the edge build (scripts/build-edge.sh; cached) and the compiler binary
#   5. the end-to-end tests: node --test tests/ (workerd through Miniflare, loopback only),
#      then the drills' replays of this run (inconclusive runs, with the host's stalls)
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

step "edge build"
scripts/build-edge.sh
cargo build -p understudy --locked

step "end-to-end tests (node --test tests/; a test is failed after 15 minutes)"
# Drills replay only inconclusive runs (exit 3), within a budget per suite run; the ledger of
# replays is printed at the end, whatever the outcome (tests/judged.mjs).
export UNDERSTUDY_REPLAY_LEDGER="$root/target/e2e-replays.jsonl"
rm -f "$UNDERSTUDY_REPLAY_LEDGER"
e2e=0
node --test --test-force-exit --test-timeout=900000 tests/ || e2e=$?
node scripts/replays.mjs "$UNDERSTUDY_REPLAY_LEDGER"
[[ $e2e -eq 0 ]] || exit "$e2e"

step "all passed in $(($(date +%s) - t0)) s"
