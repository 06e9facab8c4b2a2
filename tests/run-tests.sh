#!/usr/bin/env bash
# Run hugepool's test suite: every unit test once, every integration test twice (hugepages as
# reserved, "prefer", and again with hugepages = off), the Java binding's tests once, the man
# pages' test (tests/man-pages.sh) once. As root it reserves the hugepages the
# suite needs for the run and gives them back afterwards; as a normal user it runs without them
# (the daemon falls back) and says so. Prints one closing line: "N passed, N failed, N skipped".
# Usage: tests/run-tests.sh BUILD_DIR
set -u
build=${1:-build}
need_pages=64   # 2 MiB pages: the largest test pool plus the fresh pages of cross-uid handover
passed=0 failed=0 skipped=0
failures=()
. "$(dirname "$0")/../scripts/hugepages.sh"
trap hugepages_restore EXIT

# run BINARY [ENV...]: run one cmocka test binary, add its counts
run() {
	local bin=$1 label=$2 out rc p f s t0=$SECONDS
	shift 2
	# 9>&-: the hugepages lock stays this shell's; a test (or its daemon) left running after a
	# killed run must not hold it and block the next run
	out=$(env "$@" HP_BUILD="$build" timeout 600 "$bin" 2>&1 9>&-)
	rc=$?
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
		run "$t" "$name"
	elif [ "${hugepage_modes[$name]:-}" = off ]; then
		run "$t" "$name" HP_TEST_HUGEPAGES=off
	else
		run "$t" "$name (hugepages=prefer)" HP_TEST_HUGEPAGES=prefer
		run "$t" "$name (hugepages=off)" HP_TEST_HUGEPAGES=off
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
	# hugepool-artemis (tests/artemis-tests.sh): its journal and a standalone broker, once
	[ -e "$build/java/artemis/hugepool-artemis-0.1.0.jar" ] && run_script artemis tests/artemis-tests.sh "$build"
fi
# the man pages (tests/man-pages.sh), once: every public function has its page, every page lints
run_script man tests/man-pages.sh
[ ${#failures[@]} -eq 0 ] || echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
