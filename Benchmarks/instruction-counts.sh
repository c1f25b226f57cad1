#!/usr/bin/env bash
# Instructions per iteration of the seed's CoFuture workload, for CoFuture and its peers,
# counted by callgrind (repeatable on a shared machine, unlike wall time).
# Usage: Benchmarks/instruction-counts.sh [ITERATIONS]   (default 10000)
set -euo pipefail
cd "$(dirname "$0")"
n=${1:-10000}
swift build -c release --product InstructionCounts >/dev/null
# valgrind cannot read the DWARF the toolchain emits, so count on a stripped copy.
binary=$(mktemp)
trap 'rm -f "$binary"' EXIT
cp .build/release/InstructionCounts "$binary"
strip --strip-debug "$binary"
chmod +x "$binary"
count() {
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$binary" "$1" "$2" >/dev/null 2>&1
    awk '/^summary:/ { print $2 }' "$out"
    rm -f "$out"
}
printf '%-12s %s\n' peer "instructions/iteration (n=$n)"
for peer in cofuture nio opencombine; do
    base=$(count "$peer" 0)
    total=$(count "$peer" "$n")
    printf '%-12s %d\n' "$peer" $(( (total - base) / n ))
done
