# SPDX-License-Identifier: MIT
# surefire.sh - sourced by the scripts that run a Maven project's JUnit tests (java-tests.sh,
# artemis-tests.sh): surefire_count REPORTS RC sums Maven Surefire's reports (REPORTS/TEST-*.xml)
# into p (passed), f (failed: errors and failures) and s (skipped); a Maven run that failed (RC
# not 0) with no failed test counts as one failure, since it failed before or around the tests.
# shellcheck shell=bash
surefire_count() {
	local x t e u k
	p=0 f=0 s=0
	for x in "$1"/TEST-*.xml; do
		[ -f "$x" ] || continue
		t=$(sed -n 's/.*<testsuite [^>]*tests="\([0-9]*\)".*/\1/p' "$x" | head -1)
		e=$(sed -n 's/.*<testsuite [^>]*errors="\([0-9]*\)".*/\1/p' "$x" | head -1)
		u=$(sed -n 's/.*<testsuite [^>]*failures="\([0-9]*\)".*/\1/p' "$x" | head -1)
		k=$(sed -n 's/.*<testsuite [^>]*skipped="\([0-9]*\)".*/\1/p' "$x" | head -1)
		f=$((f + e + u)) s=$((s + k)) p=$((p + t - e - u - k))
	done
	[ "$2" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	return 0
}
