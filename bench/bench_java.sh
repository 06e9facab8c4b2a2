#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_java.sh - the Java binding's benchmarks (run by run-bench.sh, make bench), each figure
# beside its baseline from the same JVM run (java/bench/src/main/java/org/hugepool/bench):
#  - BuffersReady: a JVM getting HP_BENCH_GIB GiB (default 4; the issue's figure is 8) of 1 GiB
#    buffers ready from hugepoold (acquire + a write per page) against
#    ByteBuffer.allocateDirect of 1 GiB buffers + the same writes, serial and on a ForkJoinPool
#    (Druid's processing buffers before and after its PR 19025); 2 MiB hugetlb pages when enough
#    are free (run-bench.sh reserves them as root), regular shared memory otherwise, said so;
#  - FirstCalls: each call's first time in a fresh JVM (connect, acquire of the same N x 1 GiB,
#    release, a journal writer's open, its first append and the wait for it) beside the C
#    client's in a fresh process (bench_first_calls) on the same daemon, and a fresh JVM's
#    buffers ready (connect + acquire) against a fresh JVM's parallel allocateDirect of the same
#    bytes, each with the time of a write per page after it; HP_BENCH_JAVA_FRESH rounds
#    (default 5) of the three processes in turn, medians; 1 GiB hugetlb pages when N are free,
#    else 2 MiB ones when enough are free, else regular shared memory, said so;
#  - DurableAppends: W threads x S-byte records, append-and-wait, against ActiveMQ Artemis's own
#    journal (NIO and ASYNCIO, the buffer timeout `artemis create` picks), and against a C
#    writer's appends/s in the same cell (bench_journal's "ours", run just before, the same
#    journal configuration): what the JNI crossing costs. Default: W in {1, 8, 64} x 1000 B, 1 s
#    a cell, once; HP_BENCH_JAVA_FULL=1: W in {1, 8, 64} x S in {100, 1000, 10000}, 2 s a cell,
#    best of 3 (HP_BENCH_JAVA_WRITERS, _SIZES, _SECONDS, _REPEAT pick others).
# Each daemon runs on a private socket; the script waits for its start line (logged once it
# listens), never a fixed time. Artemis comes from Maven Central through java/bench/pom.xml, once.
# Usage: bench/bench_java.sh BUILD_DIR
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
jar=$build/java/target/hugepool-0.1.0.jar
jni=$build/java/libhugepool_jni.so
java=${JAVA:-java}
if [ ! -e "$jar" ] || [ ! -e "$jni" ]; then
	echo "bench_java: the Java binding is not built (make java: a JDK and Maven)"
	exit 0
fi
gib=${HP_BENCH_GIB:-4}
if [ -n "${HP_BENCH_JAVA_FULL:-}" ]; then
	writers=${HP_BENCH_JAVA_WRITERS:-1,8,64} sizes=${HP_BENCH_JAVA_SIZES:-100,1000,10000}
	seconds=${HP_BENCH_JAVA_SECONDS:-2} repeat=${HP_BENCH_JAVA_REPEAT:-3}
else
	writers=${HP_BENCH_JAVA_WRITERS:-1,8,64} sizes=${HP_BENCH_JAVA_SIZES:-1000}
	seconds=${HP_BENCH_JAVA_SECONDS:-1} repeat=${HP_BENCH_JAVA_REPEAT:-1}
fi
work=$(mktemp -d /var/tmp/hugepool-bench-java.XXXXXX)
dpid=""
cleanup() { [ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# the benchmarks, compiled against the binding's jar and Artemis (fetched once into ~/.m2)
if ! (cd "$top/java/bench" && ${MVN:-mvn} -B -q dependency:build-classpath -Dmdep.outputFile="$work/cp") >"$work/mvn.log" 2>&1; then
	tail -5 "$work/mvn.log"
	echo "bench_java: Maven could not resolve Artemis (java/bench/pom.xml): the Java benchmarks are skipped"
	exit 0
fi
cp="$jar:$(cat "$work/cp")"
javac -nowarn -XDsuppressNotes -d "$work/classes" -cp "$cp" "$top"/java/bench/src/main/java/org/hugepool/bench/*.java 2>&1 |
	grep -v 'internal proprietary API\|^ *\^\|Unsafe\|warning' || true
# in a jar, as a program's classes are: the JDK's jar reading is then ready before main, and a
# fresh JVM's first connect pays for the binding's jar, not for the first jar the JVM opens
(cd "$work/classes" && jar cf "$work/bench.jar" .)
# ASYNCIO's libaio glue is a native library inside activemq-artemis-native's jar; an Artemis
# installation has it on java.library.path (bin/lib/linux-x86_64), and so does this run
native_jar=$(tr ':' '\n' <"$work/cp" | grep -m1 activemq-artemis-native)
mkdir -p "$work/native"
[ -z "$native_jar" ] || (cd "$work/native" && jar xf "$native_jar" lib/linux-x86_64 2>/dev/null)
run_java() {
	"$java" --enable-native-access=ALL-UNNAMED -Dhugepool.jni.library="$jni" \
		-Djava.library.path="$work/native/lib/linux-x86_64" -cp "$work/bench.jar:$cp" "$@"
}

# start_daemon NAME CONF: run hugepoold on CONF, return once it logged its start line
start_daemon() {
	local line
	coproc DAEMON { exec "$build/hugepoold" -c "$2" 2>&1; }
	dpid=$DAEMON_PID
	while IFS= read -r line <&"${DAEMON[0]}"; do
		echo "$line" >>"$work/$1.log"
		case $line in *"Cold start"* | *"Warm start"*) break ;; esac
	done
	kill -0 "$dpid" 2>/dev/null || { cat "$work/$1.log"; dpid=""; return 1; }
	# the rest of its output, read on so that it never blocks writing (a coproc's fds are not
	# inherited by a background job: a copy of the fd is)
	exec {out}<&"${DAEMON[0]}"
	cat <&"$out" >>"$work/$1.log" &
	exec {out}<&-
}
stop_daemon() { kill "$dpid"; wait "$dpid" 2>/dev/null; dpid=""; }

# free_pages KB: hugepages of that size free and not reserved by someone else
free_pages() {
	local d=/sys/kernel/mm/hugepages/hugepages-${1}kB
	echo $(($(cat "$d/free_hugepages" 2>/dev/null || echo 0) - $(cat "$d/resv_hugepages" 2>/dev/null || echo 0)))
}
if [ "$(free_pages 1048576)" -ge "$gib" ]; then
	huge="require\npage_size = 1G" page=$((1 << 30)) pages="1 GiB hugetlb pages"
elif [ "$(free_pages 2048)" -ge $((gib * 512)) ]; then
	huge="require\npage_size = 2M" page=$((2 << 20)) pages="2 MiB hugetlb pages"
else
	huge=off page=4096 pages="regular shared memory (4 KiB pages: not $((gib * 512)) free hugepages)"
fi
# median NAME FILE: the median of NAME=ns over FILE's lines, in ms
median() {
	tr ' ' '\n' <"$2" | sed -n "s/^$1=//p" | sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) / 1e6 }'
}

# first_calls: the fresh-process rounds on the buffers daemon (see the header), then the tables
first_calls() {
	local rounds=${HP_BENCH_JAVA_FRESH:-5} r name j c x
	for ((r = 0; r < rounds; r++)); do
		"$build/bench/bench_first_calls" "$work/buffers.sock" gib "$gib" "$page" first >>"$work/first.c" ||
			{ echo "bench_java: bench_first_calls failed"; return; }
		run_java org.hugepool.bench.FirstCalls ours "$work/buffers.sock" gib "$gib" "$page" first >>"$work/first.java" ||
			{ echo "bench_java: FirstCalls failed"; return; }
		run_java -XX:MaxDirectMemorySize=$((gib + 1))g org.hugepool.bench.FirstCalls alloc "$gib" >>"$work/first.alloc" ||
			{ echo "bench_java: FirstCalls alloc failed"; return; }
	done
	echo
	echo "First calls in a fresh process, medians of $rounds rounds (a fresh JVM; the C client in a fresh process; same daemon, $pages)"
	echo "| call | Java, fresh JVM | C client, fresh process | Java / C |"
	echo "|---|---|---|---|"
	for name in connect acquire release journal_open append append_wait; do
		j=$(median $name "$work/first.java") c=$(median $name "$work/first.c")
		x=$(awk -v j="$j" -v c="$c" 'BEGIN { if (c > 0) printf "%.1fx", j / c; else print "-" }')
		case $name in acquire) name="acquire $gib x 1 GiB" ;; journal_open) name="journal writer open" ;;
			append) name="first append" ;; append_wait) name="its wait (durable)" ;; esac
		echo "| $name | $j ms | $c ms | $x |"
	done
	local jc ja jt at aa
	jc=$(median connect "$work/first.java") ja=$(median acquire "$work/first.java") jt=$(median touch "$work/first.java")
	aa=$(median alloc "$work/first.alloc") at=$(median touch "$work/first.alloc")
	echo
	echo "$gib GiB of buffers ready in a fresh JVM: hugepoold (connect + acquire) against a parallel allocateDirect (ForkJoinPool, one thread a CPU), medians of $rounds rounds"
	echo "| | from hugepoold | parallel allocateDirect | allocateDirect / hugepoold |"
	echo "|---|---|---|---|"
	awk -v jc="$jc" -v ja="$ja" -v jt="$jt" -v aa="$aa" -v at="$at" -v ps="$((page >> 10))" 'BEGIN {
		h = jc + ja; printf "| ready | %.2f ms | %.0f ms | **%.0fx** |\n", h, aa, aa / h
		printf "| then a write per page (%d KiB; 4 KiB) | %.2f ms | %.1f ms | |\n", ps, jt, at
		printf "| ready and written | %.2f ms | %.0f ms | **%.0fx** |\n", h + jt, aa + at, (aa + at) / (h + jt) }'
}

echo "bench_java: Java $("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.version = //p'), binding $jar"
echo
echo "A JVM getting $gib GiB of buffers ready: hugepoold's pool on $pages"
printf 'socket = %s/buffers.sock\nhugepages = %b\nspill_directory = %s/spill\n[class gib]\nsize = 1G\ncount = %s\n[journal first]\ndirectory = %s/first\nsegment_size = 1M\n' \
	"$work" "$huge" "$work" "$gib" "$work" >"$work/buffers.conf"
if start_daemon buffers "$work/buffers.conf"; then
	run_java -XX:MaxDirectMemorySize=$((gib + 1))g org.hugepool.bench.BuffersReady "$work/buffers.sock" gib "$gib" 3
	first_calls
	stop_daemon
else
	echo "bench_java: hugepoold did not start for $gib GiB (log above)"
fi

echo
echo "Durable appends from Java (writers $writers, records $sizes B, $seconds s a cell, best of $repeat)"
c_props=()
out=$(HP_BUILD="$build" HP_BENCH_ONLY=ours HP_BENCH_NO_STATUS=1 HP_BENCH_WRITERS="$writers" HP_BENCH_SIZES="$sizes" \
	HP_BENCH_CELL_SECONDS="$seconds" HP_BENCH_REPEAT="$repeat" "$build/bench/bench_journal" 2>&1)
while read -r w s ours; do
	c_props+=("-Dc.$w.$s=$ours")
done < <(awk '$3 == "|" && $1 ~ /^[0-9]+$/ { print $1, $2, $4 }' <<<"$out")
[ ${#c_props[@]} -gt 0 ] || echo "bench_java: no C figures from bench_journal: $(tail -3 <<<"$out")"
printf 'socket = %s/journal.sock\nhugepages = off\nspill_directory = %s/spill\nmax_connections_per_uid = 0\nmax_journal_writers_per_uid = 0\n[journal bench]\ndirectory = %s/journal\nsegment_size = 64M\nsegments = 8\nwhen_full = recycle\nring_size = 256K\n' \
	"$work" "$work" "$work" >"$work/journal.conf"
if start_daemon journal "$work/journal.conf"; then
	mkdir -p "$work/artemis"
	run_java "${c_props[@]}" org.hugepool.bench.DurableAppends "$work/journal.sock" bench "$work/artemis" "$writers" "$sizes" "$seconds" "$repeat"
	stop_daemon
else
	echo "bench_java: hugepoold did not start for the journal (log above)"
fi
exit 0
