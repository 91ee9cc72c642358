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
    set -- policies/recommendations.toml --demo
fi
exec target/debug/understudy dev "$@"
