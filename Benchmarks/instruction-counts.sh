#!/usr/bin/env bash
# Instructions per iteration, counted by callgrind (repeatable on a shared machine, unlike wall
# time): the seed's CoFuture workload for CoFuture and its peers; TaskStore's `addTask` + await
# against a bare `Task` with the same operation; TaskManager's `value(of:)` round trip (without
# and with one pass-through interceptor) against `addTask` + `next()` on a task group, and `add(task:completion:)` through one pass-through
# interceptor against `addTask` on a task group (all tasks at once, per task); a MonoTask and a
# KeyedMonoTask cache hit; and a batch of 100 callers merged into one MonoTask execution, against
# the hand-written actor and the batch's floor (children waiting for one gate), per caller; and a
# fan-out of 1,000 keys through a KeyedMonoTask with a batch loader, the hand-written DataLoader
# (also with callers that can leave when cancelled) and a KeyedMonoTask with a loader of one key,
# per key.
# Usage: Benchmarks/instruction-counts.sh [ITERATIONS]   (default 10000)
set -euo pipefail
cd "$(dirname "$0")"
n=${1:-10000}
# shellcheck source=callgrind-count.sh
source ./callgrind-count.sh
callgrind_prepare InstructionCounts
# Instructions per iteration: a run of n iterations minus a run of none (process start-up).
# The least of three runs of `workload` with `runs` runs of `per` units each, per unit.
least_of_3() {
    local best="" base total value
    for _ in 1 2 3; do
        base=$(count "$1" 0)
        total=$(count "$1" "$2")
        value=$(( (total - base) / ($2 * $3) ))
        if [ -z "$best" ] || [ "$value" -lt "$best" ]; then best=$value; fi
    done
    echo "$best"
}
per_iteration() {
    local base total
    base=$(count "$1" 0)
    total=$(count "$1" "$n")
    echo $(( (total - base) / n ))
}
printf '%-12s %s\n' peer "instructions/iteration (n=$n)"
for peer in cofuture nio opencombine; do
    printf '%-12s %d\n' "$peer" "$(per_iteration "$peer")"
done
# The TaskStore workloads hand work between threads, and a run in which a worker thread has to
# be woken more often counts up to ~15% more: report the least of five runs.
echo
printf '%-32s %s\n' workload "instructions/round trip (n=$n, least of 5 runs)"
for workload in taskstore-bare taskstore taskstore-flag-bare taskstore-read \
    taskstore-concurrent-bare taskstore-concurrent taskstore-actor-bare taskstore-actor \
    taskgroup-roundtrip taskmanager-value taskmanager-value-intercepted taskgroup-throughput taskmanager-throughput \
    monotask-hit keyedmonotask-hit locked-dictionary-hit; do
    best=""
    for _ in 1 2 3 4 5; do
        value=$(per_iteration "$workload")
        if [ -z "$best" ] || [ "$value" -lt "$best" ]; then best=$value; fi
    done
    printf '%-32s %d\n' "$workload" "$best"
done
# A merged batch runs 100 callers; n/100 batches, reported per caller.
echo
printf '%-32s %s\n' workload "instructions/caller (n/100=$((n / 100)) batches of 100, least of 3 runs)"
batches=$(( n / 100 > 0 ? n / 100 : 1 ))
for workload in gate-merged actor-merged monotask-merged keyedmonotask-merged; do
    printf '%-32s %d\n' "$workload" "$(least_of_3 "$workload" "$batches" 100)"
done
# A fan-out round asks for 1,000 distinct keys of a new cache (issue 36); n/1000 rounds (at
# least 1), reported per key. Includes the backend's fixed work per call (20,000 multiply-adds).
echo
rounds=$(( n / 1000 > 0 ? n / 1000 : 1 ))
printf '%-32s %s\n' workload "instructions/key ($rounds rounds of 1,000 keys, least of 3 runs)"
for workload in keyedmonotask-fanout-batched dataloader-fanout dataloader-fanout-cancellable keyedmonotask-fanout-single; do
    printf '%-32s %d\n' "$workload" "$(least_of_3 "$workload" "$rounds" 1000)"
done
