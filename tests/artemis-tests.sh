#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# artemis-tests.sh - hugepool-artemis's tests (java/artemis/src/test: JUnit 5 through Maven Surefire)
# against BUILD's daemon, hugepoolctl, JNI library and jars, on the default JDK and then on every
# other JDK of 21 or later in /usr/lib/jvm, as the binding's (java-tests.sh): the journal's load
# against Artemis's own JournalImpl (SameAsJournalImplTest), its reclaim (ReclaimTest), a broker
# embedded in the test JVM (EmbeddedBrokerTest) and a standalone Artemis 2.40.0 broker made with
# `artemis create` (StandaloneBrokerTest), whose distribution Maven unpacks into the build
# directory once. One to two minutes a JDK with a warm ~/.m2 on 2 loaded CPUs; MAVEN_OPTS reaches
# Maven (-Dmaven.repo.local=DIR for another local repository). Prints one closing line, "artemis:
# N passed, N failed, N skipped". Run by tests/run-tests.sh (make check, plain build only), or
# alone after `make artemis`.
# Usage: tests/artemis-tests.sh BUILD_DIR
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/tests/lib/surefire.sh"
build=$(cd "${1:-build}" && pwd)
surefire_each_jvm artemis "$top/java/artemis" "$build/java/artemis" "$build"
