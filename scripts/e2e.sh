#!/usr/bin/env bash
# The end-to-end tests (tests/*.test.mjs: workerd through Miniflare, loopback only), in two
# lanes run side by side, then the drills' replays of this run (tests/judged.mjs).
#
# Why two lanes. Run one after another the files take ~6.5 minutes, and most of it is waiting:
# drills in real time, a request a second. The machine has two cores:
#   - the real-time lane runs the files whose proofs are drills or load in real time at
#     a high rate, or that load the host themselves, one after another, never two at once:
#     the drills (judged with the host's witness), the fleet's coordinator faults (a p99),
#     the load from a separate process (the breaker never opens on a healthy origin), the
#     rollout drill (200 req/s), the bench's short form (closed loops of 64 connections),
#     the runbooks (tests/runbook.test.mjs: three rollout drills, one of them checked line by
#     line against the transcript in docs/rollout.md) and the replay's proofs
#     (tests/replay.test.mjs: seed 000 drilled at 100 requests a second, three times) —
#     beside one another they stall each other: with the rollout drill and the bench in the
#     other lane, a good release was rolled back, and a healthy origin opened the breaker
#     and the coordinator's faults broke their p99 in the load test;
#     drills in two lanes were tried (277–302 s in three runs on a quiet host): on a clean clone
#     the fleet drill, beside the witness test's two drills and the load, went red on
#     RECOVER_WITHIN — probes 50 ms over their 40 ms bar with no stall long enough for the
#     witness to excuse — so a red there would say nothing about the edge;
#   - the other lane runs every other file, one after another, beside it: builds, registry
#     and CLI tests, the JS driver, the events drill (bounds of seconds), the resilience and
#     edge tests (their clocks scaled for a loaded host).
# Files share no port (every server takes port 0) and no lock (each test has its own
# registry and scratch directories; the edge is built before this runs). A new test file
# runs in the other lane unless it is named below.
#
#     scripts/e2e.sh            # the build (scripts/build-edge.sh, cargo build) must be done
# Environment: UNDERSTUDY_REPLAY_BUDGET (default 4) replays of inconclusive drills per run.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

realtime=(tests/drill.test.mjs tests/fleet.test.mjs tests/load.test.mjs tests/rollout.test.mjs tests/bench.test.mjs tests/runbook.test.mjs tests/replay.test.mjs)
other=()
for f in tests/*.test.mjs; do
    [[ " ${realtime[*]} " == *" $f "* ]] || other+=("$f")
done

export UNDERSTUDY_REPLAY_LEDGER="$root/target/e2e-replays.jsonl"
mkdir -p "$root/target"
rm -f "$UNDERSTUDY_REPLAY_LEDGER"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
# A test is failed after 15 minutes; a lane's output is printed when the lane is done.
lane() { node --test --test-force-exit --test-timeout=900000 "$@"; }
t0=$(date +%s)
lane "${realtime[@]}" >"$logs/realtime" 2>&1 &
rt=$!
lane "${other[@]}" >"$logs/other" 2>&1 &
ot=$!
wait "$ot"; other_rc=$?
echo "=== end-to-end, other lane (${#other[@]} files, done at $(($(date +%s) - t0)) s): exit $other_rc"
cat "$logs/other"
wait "$rt"; rt_rc=$?
echo "=== end-to-end, real-time lane (${realtime[*]}, done at $(($(date +%s) - t0)) s): exit $rt_rc"
cat "$logs/realtime"
node scripts/replays.mjs "$UNDERSTUDY_REPLAY_LEDGER"
echo "=== end-to-end: $(($(date +%s) - t0)) s"
[[ $other_rc -eq 0 && $rt_rc -eq 0 ]]
