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
surefire_each_jvm java "$top/java" "$build/java/target" "$build"
