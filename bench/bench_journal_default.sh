#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_journal_default.sh - the default journal (backend = auto) against each explicit backend
# (io_uring, libaio, sync), as issue 46 measures it: bench_journal with a journal per backend in
# one daemon, W in {8, 64} writers x S in {100, 1000, 4000} bytes, in the page cache and then with
# O_DIRECT. Each run appends HP_BENCH_WARMUP_SECONDS (1) unmeasured before its
# HP_BENCH_CELL_SECONDS (2), the journals take turns in a Williams order over
# HP_BENCH_DEFAULT_REPEAT rounds (16, 20 minutes a mode; 4 for a quick look), and each cell says auto
# against the best other backend picked on one half of the rounds and measured on the other, a
# figure that favours neither side; each mode ends with that figure's geometric mean over the
# cells and its lowest cell. Run by bench/run-bench.sh (make bench), or alone:
#   bench/bench_journal_default.sh BUILD_DIR
set -u
build=$(cd "${1:-build}" && pwd)
# 16 rounds, not 8: each half's median is of 8 paired rounds, and one code's figure against itself
# spreads a third less (docs/MEASURED.md, "Issue 46's grid at 16 rounds")
repeat=${HP_BENCH_DEFAULT_REPEAT:-16}
for direct in 0 1; do
	echo "bench_journal_default: the default against each backend, $([ "$direct" = 1 ] && echo O_DIRECT || echo page cache)," \
	     "$repeat rounds"
	HP_BUILD="$build" HP_BENCH_ONLY=ours HP_BENCH_NO_STATUS=1 HP_BENCH_BACKEND=auto,io_uring,libaio,sync \
		HP_BENCH_WRITERS=8,64 HP_BENCH_SIZES=100,1000,4000 HP_BENCH_REPEAT="$repeat" \
		HP_BENCH_CELL_SECONDS="${HP_BENCH_CELL_SECONDS:-2}" HP_BENCH_WARMUP_SECONDS="${HP_BENCH_WARMUP_SECONDS:-1}" \
		HP_BENCH_DIRECT="$direct" "$build/bench/bench_journal" |
		grep -E '^ +[0-9]+ +[0-9]+ \||^ +(auto|io_uring|libaio|sync) |against the best other|^auto against'
done
