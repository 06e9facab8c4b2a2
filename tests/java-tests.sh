#!/usr/bin/env bash
# java-tests.sh - the Java binding's tests (java/src/test: JUnit 5 through Maven Surefire, each
# test class with a hugepoold of its own) against BUILD's daemon, hugepoolctl and JNI library:
# on the default JDK, then again on every other JDK of 21 or later in /usr/lib/jvm (Surefire's
# forked JVM; Maven itself runs on the default). Prints one closing line,
# "java: N passed, N failed, N skipped". Run by tests/run-tests.sh (make check), or alone:
# tests/java-tests.sh build (after make java).
# Usage: tests/java-tests.sh BUILD_DIR
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib/surefire.sh"
build=$(cd "${1:-build}" && pwd)
mvn=${MVN:-mvn}
passed=0 failed=0 skipped=0

# the JVMs to run on: the default java, then each other installed JDK of 21 or later
jvms=("$(readlink -f "$(command -v java)")")
for j in /usr/lib/jvm/*/bin/java; do
	[ -x "$j" ] || continue
	j=$(readlink -f "$j")
	v=$("$j" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
	[ "${v%%.*}" -ge 21 ] 2>/dev/null || continue
	[[ " ${jvms[*]} " == *" $j "* ]] || jvms+=("$j")
done

for jvm in "${jvms[@]}"; do
	v=$("$jvm" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
	reports="$build/java/target/surefire-reports"
	rm -rf "$reports"
	out=$(cd "$top/java" && "$mvn" -B -Dstyle.color=never test -Djvm="$jvm" -DbuildDir="$build/java/target" \
		-Dhugepool.build="$build" 2>&1)
	rc=$?
	surefire_count "$reports" "$rc"
	printf '%-34s %3d passed %3d failed %3d skipped\n' "java (Java $v)" "$p" "$f" "$s"
	[ "$f" -eq 0 ] || echo "$out" | grep -v '^\[INFO\] \(Download\|Running\)' | tail -80
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
done
echo "java: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
