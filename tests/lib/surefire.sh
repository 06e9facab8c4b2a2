# SPDX-License-Identifier: MIT
# surefire.sh - sourced by the scripts that run a Maven project's JUnit tests (java-tests.sh,
# artemis-tests.sh): surefire_count REPORTS RC sums Maven Surefire's reports (REPORTS/TEST-*.xml)
# into p (passed), f (failed: errors and failures) and s (skipped); a Maven run that failed (RC
# not 0) with no failed test counts as one failure, since it failed before or around the tests.
# surefire_jvms sets jvms to the JVMs the tests run on (Surefire's forked JVM, -Djvm; Maven itself
# runs on the default): the default java, then each other JDK of 21 or later in /usr/lib/jvm.
# jvm_version JAVA prints its java.specification.version. surefire_each_jvm NAME PROJECT OUT BUILD
# runs `mvn test` in PROJECT on each of them (its build directory OUT, hugepool's BUILD), a line
# each and a closing "NAME: N passed, N failed, N skipped", and fails if a test did.
# shellcheck shell=bash
jvm_version() {
	"$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'
}

surefire_jvms() {
	local j v
	jvms=("$(readlink -f "$(command -v java)")")
	for j in /usr/lib/jvm/*/bin/java; do
		[ -x "$j" ] || continue
		j=$(readlink -f "$j")
		v=$(jvm_version "$j")
		[ "${v%%.*}" -ge 21 ] 2>/dev/null || continue
		[[ " ${jvms[*]} " == *" $j "* ]] || jvms+=("$j")
	done
}

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

surefire_each_jvm() {
	local name=$1 project=$2 out=$3 build=$4 jvm v log rc passed=0 failed=0 skipped=0
	surefire_jvms
	for jvm in "${jvms[@]}"; do
		v=$(jvm_version "$jvm")
		rm -rf "$out/surefire-reports"
		log=$(cd "$project" && "${MVN:-mvn}" -B -Dstyle.color=never test -Djvm="$jvm" -DbuildDir="$out" \
			-Dhugepool.build="$build" 2>&1)
		rc=$?
		surefire_count "$out/surefire-reports" "$rc"
		printf '%-34s %3d passed %3d failed %3d skipped\n' "$name (Java $v)" "$p" "$f" "$s"
		[ "$f" -eq 0 ] || echo "$log" | grep -v '^\[INFO\] \(Download\|Running\)' | tail -80
		passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	done
	echo "$name: $passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
}
