#!/usr/bin/env bash
# The end-to-end tests (tests/*.test.mjs: workerd through Miniflare, loopback only), in two
# lanes run side by side, then the drills' replays of this run (tests/judged.mjs).
#
# Why two lanes. Run one after another the files take ~8 minutes, and most of it is waiting:
# drills in real time. The machine has two cores:
#   - the real-time lane runs, one step after another, the files whose proofs are judged on
#     latency in real time, or that load the host themselves, each step beside the other
#     lane's light files:
#       1. tests/bench.test.mjs (closed loops of 64 connections) beside
#          tests/load-open.test.mjs (the breaker open under load), then beside
#          tests/witness.test.mjs (the witness's proofs) — judged by structure and counts, or
#          built to hold whatever the host does (the bench's figures here are not asserted);
#       2. tests/drill.test.mjs (the differential drills, a request a second, and seed 000's
#          recovery drill beside them while they wait);
#       3. one at a time: tests/load.test.mjs (a healthy origin under load must never open the
#          breaker), tests/replay.test.mjs (seed 000 drilled three times, time scale 0.1),
#          tests/fleet.test.mjs (8 isolates drilled, probes held to a 40 ms bar; the p99 with
#          the coordinator failing against isolate scope's measured beside it), then
#          tests/rollout.test.mjs and tests/runbook.test.mjs (rollout drills at 200 req/s) —
#          last, by when the other lane is done: beside the coordinator's tests an old
#          version's own breaker opened on deadline misses (every answer of it degraded) and a
#          good release was rolled back on its p95, and beside wrangler and the events drill a
#          good release held on unsettled figures until it rolled back;
#     the other lane's files are light (a few requests a second, or none): a drill beside
#     them keeps its bars;
#     the drills held to their bars stall each other side by side: with the rollout drill and
#     the bench in the other lane, a good release was rolled back, and a healthy origin
#     opened the breaker and the coordinator's faults broke their p99 in the load test;
#     two rollout drills side by side had every answer of an old version degraded; drills in
#     two lanes were tried (277–302 s in three runs on a quiet host): on a clean clone the
#     fleet drill, beside the witness test's two drills and the load, went red on RECOVER_WITHIN — probes
#     50 ms over their 40 ms bar with no stall long enough for the witness to excuse — so a
#     red there would say nothing about the edge;
#   - the other lane runs every other file, one after another (node --test's order: by
#     name), beside it: builds, registry and CLI tests, the coordinator's faults judged by
#     state (tests/coordinator.test.mjs), the JS driver, the events drill (bounds of
#     seconds), the resilience and edge tests (their clocks scaled for a loaded host) and the
#     rollout front's split and low-traffic hold (tests/rollout-holds.test.mjs,
#     20 req/s).
# Files share no port (every server takes port 0) and no lock (each test has its own
# registry and scratch directories; the edge is built before this runs). A new test file
# runs in the other lane unless it is named below.
#
#     scripts/e2e.sh            # the builds (scripts/build-edge.sh and its --bare and
#                               # --bare-obliged, cargo build) must be done
# Environment: UNDERSTUDY_REPLAY_BUDGET (default 4) replays of inconclusive drills per run.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# The real-time lane, in its order (see above): a step of several files runs two at a time, in
# the order of their names.
realtime=("tests/bench.test.mjs tests/load-open.test.mjs tests/witness.test.mjs" tests/drill.test.mjs tests/load.test.mjs tests/replay.test.mjs tests/fleet.test.mjs tests/rollout.test.mjs tests/runbook.test.mjs)
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
# node --test runs the files it is given in the order of their names: the real-time lane
# runs one file at a time, in its own order, and stops at nothing (every file runs).
inorder() {
    local rc=0 step
    for step in "$@"; do
        # shellcheck disable=SC2086  # a step names one file or two, split on purpose
        lane --test-concurrency=2 $step || rc=1
    done
    return $rc
}
inorder "${realtime[@]}" >"$logs/realtime" 2>&1 &
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
