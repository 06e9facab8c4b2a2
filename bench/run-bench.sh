#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-bench.sh - run hugepool's benchmarks: bench_prefault (the daemon's boot pre-fault of
# $HP_BENCH_GIB GiB, default 4, against a JVM-style serial allocate-and-zero loop and against
# the memory bandwidth ceiling) and bench_acquire (a client getting that much memory from a
# real hugepoold against allocating and zeroing it itself). Every figure is printed beside its
# baseline from the same run, with the ratio; nothing is asserted. As root it reserves the
# 2 MiB hugepages the run needs and restores the previous count on exit; as a normal user the
# hugetlb figures are skipped unless enough are already free, and it says why. Always exits 0.
# Usage: bench/run-bench.sh BUILD_DIR
set -u
build=${1:-build}
gib=${HP_BENCH_GIB:-4}
case $gib in '' | *[!0-9]*) gib=4 ;; esac
export HP_BENCH_GIB=$gib
need=$((gib * 512 + 32))   # 2 MiB pages for one pool of $gib GiB, plus headroom
hp=/sys/kernel/mm/hugepages/hugepages-2048kB
restore=""

cleanup() {
	if [ -n "$restore" ]; then
		echo "$restore" > "$hp/nr_hugepages" 2>/dev/null || true
		echo "bench: 2 MiB hugepages restored to $restore (nr_hugepages now $(cat "$hp/nr_hugepages"))"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_pages() {
	# free and not promised to an existing mapping: what the benches can take
	echo $(($(cat "$hp/free_hugepages") - $(cat "$hp/resv_hugepages")))
}

cpu_model=$(awk -F': *' '/^model name/ {m = $2} /^cpu family/ {f = $2} /^model\t/ {n = $2}
	/^$/ {exit} END {printf "%s (family %s model %s)", m, f, n}' /proc/cpuinfo)
echo "hugepool benchmarks, $(date '+%Y-%m-%d %H:%M:%S %Z')"
echo "kernel $(uname -r), CPU ${cpu_model:-unknown} x $(nproc), RAM $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "build dir $build, HP_BENCH_GIB=$gib"

# tests/run-tests.sh changes nr_hugepages too: one of us at a time
if [ "$(id -u)" -eq 0 ] && command -v flock >/dev/null; then
	exec 9>/tmp/hugepool-hugepages.lock
	flock 9
fi

if [ ! -d "$hp" ]; then
	echo "bench: no 2 MiB hugepage support in this kernel ($hp missing): hugetlb figures are skipped"
else
	free=$(free_pages)
	total=$(cat "$hp/nr_hugepages")
	if [ "$free" -ge "$need" ]; then
		echo "bench: $free 2 MiB hugepages free, $need wanted: enough, nr_hugepages left at $total"
	elif [ "$(id -u)" -ne 0 ]; then
		echo "bench: hugetlb figures are skipped: only $free 2 MiB hugepages free, $need wanted," \
		     "and only root may reserve more (run as root, or: echo $((total + need - free)) | sudo tee $hp/nr_hugepages)"
	else
		restore=$total
		echo $((total + need - free)) > "$hp/nr_hugepages"
		echo "bench: reserved 2 MiB hugepages for the run: nr_hugepages $total -> $(cat "$hp/nr_hugepages")" \
		     "($(free_pages) free, $need wanted; restored at exit)"
	fi
fi

for b in bench_prefault bench_acquire bench_journal bench_merge; do
	echo
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
