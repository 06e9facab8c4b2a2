#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# artemis-tests.sh - hugepool-artemis's tests (java/artemis/src/test: JUnit 5 through Maven Surefire)
# against BUILD's daemon, hugepoolctl, JNI library and jars, on the default JDK: the journal's load
# against Artemis's own JournalImpl (SameAsJournalImplTest), its reclaim (ReclaimTest), a broker
# embedded in the test JVM (EmbeddedBrokerTest) and a standalone Artemis 2.40.0 broker made with
# `artemis create` (StandaloneBrokerTest), whose distribution Maven unpacks into the build
# directory once. One to two minutes with a warm ~/.m2 on 2 loaded CPUs; MAVEN_OPTS reaches Maven
# (-Dmaven.repo.local=DIR for another local repository). Prints one closing line, "artemis: N
# passed, N failed, N skipped". Run by tests/run-tests.sh (make check, plain build only), or alone
# after `make artemis`.
# Usage: tests/artemis-tests.sh BUILD_DIR
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
mvn=${MVN:-mvn}
reports="$build/java/artemis/surefire-reports"
rm -rf "$reports"
out=$(cd "$top/java/artemis" && "$mvn" -B -Dstyle.color=never test -DbuildDir="$build/java/artemis" \
	-Dhugepool.build="$build" 2>&1)
rc=$?
p=0 f=0 s=0
for x in "$reports"/TEST-*.xml; do
	[ -f "$x" ] || continue
	t=$(sed -n 's/.*<testsuite [^>]*tests="\([0-9]*\)".*/\1/p' "$x" | head -1)
	e=$(sed -n 's/.*<testsuite [^>]*errors="\([0-9]*\)".*/\1/p' "$x" | head -1)
	u=$(sed -n 's/.*<testsuite [^>]*failures="\([0-9]*\)".*/\1/p' "$x" | head -1)
	k=$(sed -n 's/.*<testsuite [^>]*skipped="\([0-9]*\)".*/\1/p' "$x" | head -1)
	f=$((f + e + u)) s=$((s + k)) p=$((p + t - e - u - k))
done
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1 # Maven failed before or around the tests
printf '%-34s %3d passed %3d failed %3d skipped\n' "artemis" "$p" "$f" "$s"
[ "$f" -eq 0 ] || echo "$out" | grep -v '^\[INFO\] \(Download\|Running\)' | tail -80
echo "artemis: $p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
