#!/usr/bin/env bash
# check-all.sh - everything `make check-all` runs, with one closing line for all of it:
# the suite (tests/run-tests.sh) under ASan+UBSan and under TSan (their integration tests in
# one hugepages mode each: prefer under ASan, off under TSan) while Maven builds the Java parts
# in the background, then with the normal build (there with every crash point of the journal's
# crash-point harness, HP_CRASH_POINTS=all, and the Java parts' tests); a clang
# build with -Werror (tests compiled, not run again); a gcc -Werror build; the install test; the
# Debian packages installed and run under a real systemd in a container (tests/container-test.sh,
# which exits 77, counted as skipped, where it cannot run: not root, no container).
# Each stage prints its own "N passed, N failed" line; the last line adds them up. What a fresh
# machine downloads (Maven's ~/.m2, the container's Debian tree) is fetched in the background
# while the first stages run.
set -u
cd "$(dirname "$0")/.."
make=${MAKE:-make}
passed=0 failed=0 skipped=0
stages_failed=() times=()

# stage NAME COMMAND...: run it, add the counts of its closing line (a stage with none counts
# as one test: passed if it exited 0)
stage() {
	local name=$1 out rc line p f s t0=$SECONDS
	shift
	echo "=== $name"
	out=$("$@" 2>&1)
	rc=$?
	times+=("$name: $((SECONDS - t0)) s")
	if [ "$rc" -eq 0 ]; then
		echo "$out" | tail -n 12
	else
		echo "$out" | tail -n 400 # a failure: what the runner printed about it, not just the counts
	fi
	line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -1)
	if [ -n "$line" ]; then
		p=$(sed -E 's/.*\b([0-9]+) passed.*/\1/' <<<"$line")
		f=$(sed -E 's/.*\b([0-9]+) failed.*/\1/' <<<"$line")
		s=$(sed -nE 's/.*\b([0-9]+) skipped.*/\1/p' <<<"$line")
	else
		p=$((rc == 0)) f=$((rc != 0)) s=0
	fi
	[ "$rc" -eq 77 ] && rc=0 # skipped: its closing line says so
	[ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ] && f=1
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
	[ "$rc" -eq 0 ] || stages_failed+=("$name")
}

# The Java parts (the binding and the engines' modules) are built by Maven, which on a fresh
# machine first downloads some 400 MB into ~/.m2 (Druid's services 230, Artemis's broker and
# tests 100). That build runs in the background while the sanitizer suites run (they have no
# Java, and no other Maven runs meanwhile); the plain suite, which tests the Java parts, waits
# for it. Where it cannot build (no JDK), the suite says why.
java_log=$(mktemp)
$make java-all >"$java_log" 2>&1 &
java_build=$!
t_java=$SECONDS
# the container stage's Debian tree, likewise downloaded once (debootstrap), kept in a cache:
# built meanwhile too (its lock makes the stage wait for it if it is not done by then)
tests/container-test.sh --tree-only >/dev/null 2>&1 &
# the integration tests run in both hugepages modes in the suite, and in one under each
# sanitizer (hugetlb under ASan, regular memory under TSan): each mode's code is sanitized once
stage "suite under ASan+UBSan" env HP_TEST_HUGEPAGES_MODES=prefer $make check SANITIZE=address,undefined
stage "suite under TSan" env HP_TEST_HUGEPAGES_MODES=off $make check SANITIZE=thread
if wait "$java_build"; then
	times+=("the Java parts, built in the background: $((SECONDS - t_java)) s before the suite needed them")
else
	echo "=== the Java parts' build in the background failed (the suite builds them again and says why):"
	tail -n 20 "$java_log"
fi
rm -f "$java_log"
stage "suite" env HP_CRASH_POINTS=all $make check
stage "clang -Werror build" $make BUILD=build-clang CC=clang WERROR=-Werror all tests
stage "gcc -Werror build" $make BUILD=build-werror WERROR=-Werror all tests
stage "install" tests/install-test.sh
stage "Debian packages under systemd (container)" tests/container-test.sh
# each stage's time: the whole must stay well within CI's budget (README, Tests)
printf 'time: %s\n' "${times[@]}" "all stages: $SECONDS s"
[ ${#stages_failed[@]} -eq 0 ] || echo "failed stages: ${stages_failed[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
