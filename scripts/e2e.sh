#!/usr/bin/env bash
# The end-to-end tests (tests/*.test.mjs: workerd through Miniflare, loopback only), in two
# lanes run side by side, then the drills' replays of this run (tests/judged.mjs).
#
# Why two lanes, and which file goes where. One after another the files take ~10 minutes,
# and most of it is waiting: drills in real time, a request a second. The machine has two
# cores, so the files run in two lanes side by side, each lane's files one after another:
#   - lane 1: the files of builds, registry and CLI tests, the JS driver, the events drill
#     (bounds of seconds) and the resilience and edge tests (their clocks scaled for a
#     loaded host) — every file not named below — then the fleet's drills and coordinator
#     faults (tests/fleet.test.mjs) and the rollout drill (tests/rollout.test.mjs);
#   - lane 2: the bench's short form (closed loops of 64 connections; its figures are not
#     judged), the drills (tests/drill.test.mjs, judged with the host's witness), the load
#     from a separate process (tests/load.test.mjs), the runbooks (tests/runbook.test.mjs:
#     rollout drills, one checked line by line against the transcript in docs/rollout.md) and
#     the replay's proofs (tests/replay.test.mjs: seed 000 drilled at 100 requests a second,
#     three times).
# A drill beside the other lane can meet a stall of the host: its witness sees it, and a run
# whose failures the stalls excuse is inconclusive and played again within the budget below
# (tests/judged.mjs); a failure the edge is blamed for fails at once.
# Files share no port (every server takes port 0) and no lock (each test has its own
# registry and scratch directories; the edge is built before this runs). A new test file
# runs in lane 1, first, unless it is named below.
#
#     scripts/e2e.sh            # the build (scripts/build-edge.sh, cargo build) must be done
# Environment: UNDERSTUDY_REPLAY_BUDGET (default 4) replays of inconclusive drills per run.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

tail1=(tests/fleet.test.mjs tests/rollout.test.mjs)
lane2=(tests/bench.test.mjs tests/drill.test.mjs tests/load.test.mjs tests/runbook.test.mjs tests/replay.test.mjs)
lane1=()
for f in tests/*.test.mjs; do
    [[ " ${tail1[*]} ${lane2[*]} " == *" $f "* ]] || lane1+=("$f")
done
lane1+=("${tail1[@]}")

export UNDERSTUDY_REPLAY_LEDGER="$root/target/e2e-replays.jsonl"
mkdir -p "$root/target"
rm -f "$UNDERSTUDY_REPLAY_LEDGER"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
# A test is failed after 15 minutes; a lane's output is printed when the lane is done.
lane() { node --test --test-force-exit --test-timeout=900000 "$@"; }
t0=$(date +%s)
lane "${lane1[@]}" >"$logs/lane1" 2>&1 &
l1=$!
lane "${lane2[@]}" >"$logs/lane2" 2>&1 &
l2=$!
wait "$l1"; l1_rc=$?
echo "=== end-to-end, lane 1 (${#lane1[@]} files, the last ${tail1[*]}; done at $(($(date +%s) - t0)) s): exit $l1_rc"
cat "$logs/lane1"
wait "$l2"; l2_rc=$?
echo "=== end-to-end, lane 2 (${lane2[*]}; done at $(($(date +%s) - t0)) s): exit $l2_rc"
cat "$logs/lane2"
node scripts/replays.mjs "$UNDERSTUDY_REPLAY_LEDGER"
echo "=== end-to-end: $(($(date +%s) - t0)) s"
[[ $l1_rc -eq 0 && $l2_rc -eq 0 ]]
