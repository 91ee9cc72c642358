#!/usr/bin/env bash
# The end-to-end tests (tests/*.test.mjs: workerd through Miniflare, loopback only), in two
# lanes run side by side, then the drills' replays of this run (tests/judged.mjs).
#
# Why two lanes. Run one after another the files take ~8 minutes, and most of it is waiting:
# drills in real time. The machine has two cores:
#   - the real-time lane runs, one after another and never two at once, the files whose
#     proofs are judged on latency in real time, or that load the host themselves:
#       1. tests/bench.test.mjs (closed loops of 64 connections) beside
#          tests/load-open.test.mjs (the breaker open under load: judged by counts, and more
#          load only makes it harder; the bench's figures there are not asserted), then
#          tests/drill.test.mjs (the differential drills, a request a second, beside the
#          witness's two drills — built to hold whatever the host does — and then seed 000's
#          recovery drill);
#       2. tests/rollout.test.mjs and tests/runbook.test.mjs (rollout drills at 200 req/s,
#          each judged on the new version's SLO against the old one's in the same windows);
#       3. tests/replay.test.mjs (seed 000 drilled three times, time scale 0.1) and
#          tests/load.test.mjs (load from a separate process; a healthy origin must never
#          open the breaker);
#       4. tests/fleet.test.mjs (8 isolates drilled, probes held to a 40 ms bar; the p99 with
#          the coordinator failing) — last, by when the other lane is done;
#     the other lane's files are light (a few requests a second, or none): a drill beside
#     them keeps its bars;
#     beside one another they stall each other: with the rollout drill and the bench in the
#     other lane, a good release was rolled back, and a healthy origin opened the breaker
#     and the coordinator's faults broke their p99 in the load test; drills in two lanes
#     were tried (277–302 s in three runs on a quiet host): on a clean clone the fleet drill,
#     beside the witness test's two drills and the load, went red on RECOVER_WITHIN — probes
#     50 ms over their 40 ms bar with no stall long enough for the witness to excuse — so a
#     red there would say nothing about the edge;
#   - the other lane runs every other file, one after another (node --test's order: by
#     name), beside it: builds, registry and CLI tests, the JS driver, the events drill
#     (bounds of seconds), the resilience and edge tests (their clocks scaled for a loaded
#     host), the coordinator's faults judged by state (tests/coordinator.test.mjs) and the
#     rollout front's split and low-traffic hold (tests/rollout-holds.test.mjs, 20 req/s).
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

# The real-time lane, in its order (see above): a step of two files runs them side by side.
realtime=("tests/bench.test.mjs tests/load-open.test.mjs" tests/drill.test.mjs tests/rollout.test.mjs tests/runbook.test.mjs tests/replay.test.mjs tests/load.test.mjs tests/fleet.test.mjs)
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
