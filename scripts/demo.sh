#!/usr/bin/env bash
# The main job on a fresh machine, in one command: install what is missing
# (scripts/setup.sh), build the edge (cached) and the compiler, then
#     understudy dev policies/recommendations.toml --demo
# which bakes the policy, starts the simulated model origin and the edge in workerd on
# 127.0.0.1, shows one healthy answer and one degraded answer (the origin told to hang)
# with their headers, and exits (0 when the first is live and the second a disclosed
# fallback).
#
# With arguments, they are passed to `understudy dev` instead, e.g.
#     scripts/demo.sh policies/semantic-search.toml            # stay up; Ctrl-C stops
#     scripts/demo.sh policies/recommendations.toml --seed seed.json
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/setup.sh
. scripts/setup.sh
scripts/build-edge.sh
cargo build -p understudy --locked --quiet
if [[ $# -eq 0 ]]; then
    # The sample inventory snapshot in policies/ carries a fixed date, and the compiler
    # (rightly) refuses stubs validated against a snapshot older than 24 h. So that the demo
    # works on any day, it runs on a copy whose snapshot is re-dated to an hour ago — the
    # same thing the end-to-end tests do (tests/harness.mjs, preparePolicy). Your own
    # policies are validated as they are.
    demo_dir="$root/.understudy/demo"
    rm -rf "$demo_dir" && mkdir -p "$demo_dir"
    node --input-type=module -e '
        import { preparePolicy } from "./tests/harness.mjs";
        const p = await preparePolicy("recommendations", process.argv[1]);
        console.error(`demo: policies/recommendations.toml, its catalog and its inventory snapshot (re-dated to an hour ago) copied to ${p}`);
    ' "$demo_dir"
    set -- "$demo_dir/recommendations.toml" --demo
fi
exec target/debug/understudy dev "$@"
