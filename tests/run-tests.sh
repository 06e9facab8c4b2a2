#!/usr/bin/env bash
# Run hugepool's test suite: every unit test once, every integration test twice (hugepages as
# reserved, "prefer", and again with hugepages = off; HP_TEST_HUGEPAGES_MODES="prefer" or "off"
# runs one of them), and once each: the Java binding's tests, the Druid extension's
# (tests/druid-tests.sh), the man pages' (tests/man-pages.sh) and the file map's
# (tests/file-map.sh). As root it reserves the hugepages the suite needs for the run and gives
# them back afterwards; as a normal user it runs without them (the daemon falls back) and says
# so. Prints one closing line: "N passed, N failed, N skipped".
# Usage: tests/run-tests.sh BUILD_DIR
set -u
build=${1:-build}
need_pages=64   # 2 MiB pages: the largest test pool plus the fresh pages of cross-uid handover
passed=0 failed=0 skipped=0
failures=()
. "$(dirname "$0")/../scripts/hugepages.sh"
trap hugepages_restore EXIT

# tally LABEL OUTPUT RC T0: add the counts of one cmocka test binary's output (RC its exit status,
# T0 when it started), print its line, and what it printed about a failure
tally() {
	local label=$1 out=$2 rc=$3 t0=$4 p f s
	# a binary may run several cmocka groups: add up their closing lines
	p=$(awk '/^\[  PASSED  \] [0-9]+ test/ {n += $4} END {print n + 0}' <<<"$out")
	f=$(awk '/^\[  FAILED  \] [0-9]+ test/ {n += $4} END {print n + 0}' <<<"$out")
	s=$(awk '/^\[  SKIPPED \] [0-9]+ test/ {n += $4} END {print n + 0}' <<<"$out")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1   # crashed, hung or sanitizer error outside a test case
	fi
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	printf '%-34s %3d passed %3d failed %3d skipped %4d s\n' "$label" "$p" "$f" "$s" $((SECONDS - t0))
	if [ "$f" -ne 0 ]; then
		failures+=("$label")
		echo "$out" | grep -v '^\[ \(RUN\|      OK\) ' | tail -60
	fi
}

# run BINARY LABEL [ENV...]: run one cmocka test binary, add its counts
run() {
	local bin=$1 label=$2 out rc t0=$SECONDS
	shift 2
	# 9>&-: the hugepages lock stays this shell's; a test (or its daemon) left running after a
	# killed run must not hold it and block the next run
	out=$(env "$@" HP_BUILD="$build" timeout 600 "$bin" 2>&1 9>&-)
	rc=$?
	tally "$label" "$out" "$rc" "$t0"
}

# run_shards BINARY LABEL VAR [ENV...]: a binary whose work splits into shards (VAR=I/N runs
# shard I of N): a shard per CPU, all at once, each counted as a binary of its own
run_shards() {
	local bin=$1 label=$2 var=$3 n i t0=$SECONDS dir
	shift 3
	n=$(nproc 2>/dev/null || echo 1)
	[ "$n" -le 4 ] || n=4
	dir=$(mktemp -d)
	for ((i = 0; i < n; i++)); do
		(
			env "$@" "$var=$i/$n" HP_BUILD="$build" timeout 600 "$bin" >"$dir/$i" 2>&1
			echo $? >"$dir/$i.rc"
		) 9>&- &
	done
	wait
	for ((i = 0; i < n; i++)); do
		tally "$label (shard $((i + 1))/$n)" "$(cat "$dir/$i")" "$(cat "$dir/$i.rc" 2>/dev/null || echo 1)" "$t0"
	done
	rm -rf "$dir"
}

# run_script LABEL COMMAND...: a test script that ends with "LABEL: N passed, N failed, N
# skipped" (its own lines before it are shown); add its counts
run_script() {
	local label=$1 out line p f s
	shift
	out=$("$@" 2>&1 9>&-)
	line=$(grep -E "^$label: [0-9]+ passed, [0-9]+ failed" <<<"$out" | tail -1)
	echo "$out" | grep -v "^$label: [0-9]"
	p=$(sed -nE 's/^[a-z]+: ([0-9]+) passed.*/\1/p' <<<"$line")
	f=$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")
	s=$(sed -nE 's/.* ([0-9]+) skipped.*/\1/p' <<<"$line")
	[ -n "$line" ] || { p=0 f=1 s=0; }
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	[ "$f" -eq 0 ] || failures+=("$label")
}

# unit tests whose work splits into shards run at once, one per CPU (the variable that picks one)
declare -A sharded=([test_crash_points]=HP_CRASH_SHARD)

# the modes the other integration tests run in, each in turn: HP_TEST_HUGEPAGES_MODES picks some
# (check-all runs each mode once more under one of the sanitizers: the suite is long)
modes=${HP_TEST_HUGEPAGES_MODES:-prefer off}

# integration tests that do not depend on hugepages: run once, with hugepages = off (the lying
# daemon is no hugepoold at all)
declare -A hugepage_modes=([test_spill]="off" [test_lying_daemon]="off" [test_metrics]="off")

# as root: reserve what the suite needs (the hugetlb path is exercised only then)
hugepages_reserve tests "$need_pages" || echo "tests: running without hugepages: the daemon falls back and says so"
for t in "$build"/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	if [ ! -f "tests/integration/$name.c" ]; then
		# a binary whose source is gone (renamed, split) is left from an older tree: not a test
		if [ ! -f "tests/unit/$name.c" ] && [ ! -f "tests/fuzz/fuzz_${name#test_fuzz_}.c" ]; then
			printf '%-34s not run: no source in tests/ (left by an older tree; make clean)\n' "$name"
			continue
		fi
		if [ "${sharded[$name]:-}" ]; then
			run_shards "$t" "$name" "${sharded[$name]}"
		else
			run "$t" "$name"
		fi
	elif [ "${hugepage_modes[$name]:-}" = off ]; then
		run "$t" "$name" HP_TEST_HUGEPAGES=off
	else
		for mode in $modes; do
			run "$t" "$name (hugepages=$mode)" HP_TEST_HUGEPAGES="$mode"
		done
	fi
done
# the Java binding's tests (tests/java-tests.sh), once, with hugepages as reserved: make check
# says in HP_JAVA_SKIP why they cannot run here (no JDK or Maven, a sanitizer build); run alone,
# this script runs them when the binding is built
java_skip=${HP_JAVA_SKIP-}
[ -n "${HP_JAVA_SKIP+set}" ] || [ -e "$build/java/libhugepool_jni.so" ] || java_skip="not built (make java)"
if [ -n "$java_skip" ]; then
	printf '%-34s skipped: %s\n' "java" "$java_skip"
	skipped=$((skipped + 1))
else
	run_script java tests/java-tests.sh "$build"
	# hugepool-artemis (tests/artemis-tests.sh): its journal and a standalone broker, on each JDK as
	# the binding's, with its time, as Druid's: the CI budget's largest Java stages
	if [ -e "$build/java/artemis/hugepool-artemis-0.1.0.jar" ]; then
		t0=$SECONDS
		run_script artemis tests/artemis-tests.sh "$build"
		printf '%-34s %4d s\n' "artemis (Artemis 2.40 broker)" $((SECONDS - t0))
	fi
fi
# the Druid extension's tests (tests/druid-tests.sh), once, where the binding's run: a real Druid
# service with the extension (make druid builds it beside the binding)
if [ -n "$java_skip" ]; then
	printf '%-34s skipped: %s\n' "druid" "$java_skip"
	skipped=$((skipped + 1))
elif [ ! -e "$build/java/druid/druid-hugepool/druid-hugepool-0.1.0.jar" ]; then
	printf '%-34s skipped: %s\n' "druid" "not built (make druid)"
	skipped=$((skipped + 1))
else
	t0=$SECONDS
	run_script druid tests/druid-tests.sh "$build"
	printf '%-34s %4d s\n' "druid (Druid 33 historical)" $((SECONDS - t0))
fi
# the man pages (tests/man-pages.sh), once: every public function has its page, every page lints
run_script man tests/man-pages.sh
# docs/ARCHITECTURE.md's file map against the tree (tests/file-map.sh), once
run_script map tests/file-map.sh
[ ${#failures[@]} -eq 0 ] || echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
