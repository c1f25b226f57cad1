#!/usr/bin/env bash
# URLTaskManager's own instructions per request under callgrind (issue 50): a GET through the
# manager (HTTPRetryPolicy, every resilience policy off; and with the three policies on) over a
# transport that answers at once, against that transport called directly. The least of 5 runs.
# Usage: Benchmarks/http-instruction-counts.sh [ITERATIONS] [BENCHMARKS_DIR] [WORKLOADS...]
#   To compare with a tree from before the policies (it has no `manager-policies`):
#   git worktree add /work/ci3-old ebcf3ce && cp -r Sources/HTTPInstructionCounts http-instruction-counts.sh \
#     /work/ci3-old/Benchmarks/ (plus the target in its Package.swift), then
#   SWIFT_FLAGS="-Xswiftc -DBEFORE_RESILIENCE" ./http-instruction-counts.sh 10000 /work/ci3-old/Benchmarks transport manager
# The `ahc…` workloads send over AsyncHTTPClient to `HTTPPressure serve`, started here in a
# process of its own (callgrind counts the client only):
#   ./http-instruction-counts.sh 1000 . ahc ahc-manager ahc-manager-limit
set -euo pipefail
n=${1:-10000}
here=$(cd "$(dirname "$0")" && pwd)
dir=${2:-$here}
shift $(( $# > 2 ? 2 : $# ))
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(transport manager manager-policies)
cd "$dir"
# shellcheck source=callgrind-count.sh
source "$here/callgrind-count.sh"
callgrind_prepare HTTPInstructionCounts
if [[ " ${workloads[*]} " == *" ahc"* ]]; then
    swift build -c release --product HTTPPressure >/dev/null
    serve_log=$(mktemp)
    .build/release/HTTPPressure serve >"$serve_log" &
    server=$!
    trap 'kill $server 2>/dev/null; rm -f "$binary" "$serve_log"' EXIT
    for _ in $(seq 100); do [ -s "$serve_log" ] && break; sleep 0.1; done
    TASKKIT_BENCH_URL=$(head -1 "$serve_log")
    export TASKKIT_BENCH_URL
fi
printf '%-20s %s\n' workload "instructions/request (n=$n, least of 5 runs) in $(pwd)"
for workload in "${workloads[@]}"; do
    best=""
    for _ in 1 2 3 4 5; do
        base=$(count "$workload" 0)
        total=$(count "$workload" "$n")
        value=$(( (total - base) / n ))
        if [ -z "$best" ] || [ "$value" -lt "$best" ]; then best=$value; fi
    done
    printf '%-20s %d\n' "$workload" "$best"
done
