#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-bench.sh - run hugepool's benchmarks: bench_prefault (the daemon's boot pre-fault of
# $HP_BENCH_GIB GiB, default 4, against a JVM-style serial allocate-and-zero loop and against
# the memory bandwidth ceiling), bench_acquire (a client getting that much memory from a
# real hugepoold against allocating and zeroing it itself; then 8 x 1 GiB on 1 GiB, 2 MiB and
# 4 KiB pages, the acquire and random 8-byte updates over them side by side, the 1 GiB pages
# and the extra 2 MiB ones reserved by the bench itself, as root, only while their part runs),
# bench_restart (a restart under clients holding the whole pool: warm through the fd store and
# by re-execution against cold), bench_pause (the restart pause one looping client sees, with 1
# and 1,000 others connected: by re-execution, the baseline, through the fd store and by
# take-over, with the daemon's own parts of it), bench_journal, bench_journal_default.sh (the default journal
# against each explicit backend, issue 46's cells), bench_merge, bench_heap (a cold process building a hash table of
# $HP_BENCH_HEAP_GIB GiB, default 1, on the hugepage heap against glibc malloc and jemalloc) and
# bench_spill (spill streams of 6 KiB, 200 KiB and 4 MiB runs against a classic temp file per
# run, with the syscalls of each counted under ptrace), bench_metrics (a scrape of a daemon with
# 10,000 leases and 16 journals, hugepoolctl metrics --http, against hugepoolctl status --json,
# and a client's round trips while it runs), bench_java.sh (the Java binding: a
# JVM's buffers from hugepoold against allocateDirect, a fresh JVM's first calls beside the C
# client's (bench_first_calls), durable appends against Artemis's journal and against a C
# writer), bench_druid.sh (the Druid extension: a merge pool of 8 x 1 GiB ready against
# Druid's own serial and parallel allocation, and a historical's boot stock against the
# extension) and bench_artemis.sh (an Artemis broker on hugepool-artemis against the same broker
# on its ASYNCIO and NIO journals, under Artemis's own load generator). Every figure is printed
# beside its baseline from the same run, with the ratio; nothing is asserted. As root it reserves
# the 2 MiB hugepages the run needs and restores the previous count on exit; as a normal user the
# hugetlb figures are skipped unless enough are already free, and it says why. Always exits 0.
# Usage: bench/run-bench.sh BUILD_DIR [BENCH...]   (all of them unless named, e.g. bench_heap)
set -u
build=${1:-build}
shift
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(bench_prefault bench_acquire bench_restart bench_pause bench_journal bench_journal_default bench_merge bench_heap bench_spill
	bench_metrics bench_java bench_druid bench_artemis)
gib=${HP_BENCH_GIB:-4}
case $gib in '' | *[!0-9]*) gib=4 ;; esac
export HP_BENCH_GIB=$gib
heap_gib=${HP_BENCH_HEAP_GIB:-1}
case $heap_gib in '' | *[!0-9]*) heap_gib=1 ;; esac
export HP_BENCH_HEAP_GIB=$heap_gib
need=$((gib * 512 + 32))   # 2 MiB pages for one pool of $gib GiB, plus headroom
heap_need=$((heap_gib * 768 + 32))   # bench_heap's pool: 1.5 x its table
[ "$heap_need" -le "$need" ] || need=$heap_need
. "$(dirname "$0")/../scripts/hugepages.sh"
trap hugepages_restore EXIT
trap 'exit 130' INT TERM

cpu_model=$(awk -F': *' '/^model name/ {m = $2} /^cpu family/ {f = $2} /^model\t/ {n = $2}
	/^$/ {exit} END {printf "%s (family %s model %s)", m, f, n}' /proc/cpuinfo)
echo "hugepool benchmarks, $(date '+%Y-%m-%d %H:%M:%S %Z')"
echo "kernel $(uname -r), CPU ${cpu_model:-unknown} x $(nproc), RAM $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "build dir $build, HP_BENCH_GIB=$gib, HP_BENCH_HEAP_GIB=$heap_gib"

hugepages_reserve bench "$need" || echo "bench: hugetlb figures are skipped"

for b in "${benches[@]}"; do
	echo
	if [ -x "$(dirname "$0")/$b.sh" ]; then # a script: the Java benchmarks
		start=$(date +%s)
		"$(dirname "$0")/$b.sh" "$build"
		echo "bench: $b took $(($(date +%s) - start)) s"
		continue
	fi
	if [ ! -x "$build/bench/$b" ]; then
		echo "bench: $build/bench/$b is missing (make bench builds it)"
		continue
	fi
	start=$(date +%s)
	HP_BUILD="$build" "$build/bench/$b"
	rc=$?
	[ "$rc" -eq 0 ] || echo "bench: $b exited with status $rc"
	echo "bench: $b took $(($(date +%s) - start)) s"
done
exit 0
