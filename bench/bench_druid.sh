#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_druid.sh - the Druid extension's benchmarks (run by run-bench.sh, make bench), each figure
# beside its baseline from the same run, with the ratio; nothing is asserted:
#  - a merge pool of N x 1 GiB ready (built, a write per 4 KiB page), Druid's
#    DefaultBlockingPoolConstructorBenchmark shape (MergePoolReady, java/druid/src/test): Druid
#    33's DefaultBlockingPool over OffheapBufferGenerator serially, and in parallel on a temporary
#    ForkJoinPool as Druid's PR 19025 does, against the extension's pool over hugepoold's leases
#    (2 MiB hugetlb pages when enough are free or, as root, reserved: regular memory otherwise,
#    said so). N is HP_BENCH_DRUID_GIB (default 8; then 16 where the memory allows), lowered to
#    what the machine's available memory holds, said so: the direct baseline and the daemon's
#    pool are never resident together;
#  - a Druid historical from JVM start to its processing pools ready and to serving, stock
#    against the extension with the same buffers (2 processing + 2 merge buffers of 1 GiB),
#    alternating, HP_BENCH_DRUID_BOOTS rounds each (default 2): the difference between the two
#    is the pools' time.
# Every daemon and service is waited for by its log line, never a fixed time. Druid comes from
# Maven Central through java/druid/pom.xml, once (~/.m2).
# Usage: bench/bench_druid.sh BUILD_DIR
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
java=${JAVA:-java}
ext=$build/java/druid/druid-hugepool
jni=$build/java/libhugepool_jni.so
gib_wanted=${HP_BENCH_DRUID_GIB:-8}
case $gib_wanted in '' | *[!0-9]*) gib_wanted=8 ;; esac
boots=${HP_BENCH_DRUID_BOOTS:-2}
case $boots in '' | *[!0-9]*) boots=2 ;; esac
rounds=${HP_BENCH_DRUID_ROUNDS:-3}
case $rounds in '' | *[!0-9]*) rounds=3 ;; esac
if [ ! -e "$ext/druid-hugepool-0.1.0.jar" ]; then
	echo "bench_druid: the Druid extension is not built (make druid: a JDK and Maven)"
	exit 0
fi
. "$top/scripts/hugepages.sh"
work=$(mktemp -d /var/tmp/hugepool-bench-druid.XXXXXX)
started=()
cleanup() {
	local p
	for p in "${started[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${started[@]}"; do wait "$p" 2>/dev/null; done
	hugepages_restore >/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

if ! (cd "$top/java/druid" && ${MVN:-mvn} -B -q -Pservice test-compile dependency:build-classpath -Dmdep.includeScope=test \
	-Dmdep.outputFile="$work/cp" -DbuildDir="$build/java/druid/target" -Dhugepool.jar="$build/java/target/hugepool-0.1.0.jar") \
	>"$work/mvn.log" 2>&1; then
	tail -5 "$work/mvn.log"
	echo "bench_druid: Maven could not resolve Druid (java/druid/pom.xml): the Druid benchmarks are skipped"
	exit 0
fi
deps=$(tr ':' '\n' <"$work/cp" | grep -v '/hugepool-0\.1\.0\.jar$' | paste -sd:)
# Druid's start script's flags for Java 17 (bin/run-java)
jvm=(--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED
	--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
	--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED
	--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED
	"-Dhugepool.jni.library=$jni" "-Dlog4j.configurationFile=$work/log4j2.xml" -Djava.io.tmpdir="$work")
cat >"$work/log4j2.xml" <<'EOF'
<Configuration status="WARN">
  <Appenders><Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss.SSS} %p [%t] %c - %m%n"/></Console></Appenders>
  <Loggers><Root level="info"><AppenderRef ref="out"/></Root></Loggers>
</Configuration>
EOF

alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s#Z}" = "$s" ]; }
# await LOG PATTERN PID: 0 once LOG has a line matching PATTERN, 1 if PID exited first
await() {
	while ! grep -aq -- "$2" "$1" 2>/dev/null; do
		alive "$3" || { grep -aq -- "$2" "$1" 2>/dev/null; return; }
		sleep 0.05
	done
}
# start_daemon NAME CLASSES: hugepoold on $work/NAME.sock with CLASSES (lines of hugepoold.conf)
start_daemon() {
	printf 'socket = %s\nhugepages = %s\nspill_directory = %s\nmax_acquire_wait = 60s\n%b' \
		"$work/$1.sock" "$huge" "$work" "$2" >"$work/$1.conf"
	"$build/hugepoold" -c "$work/$1.conf" >"$work/$1.log" 2>&1 &
	dpid=$!
	started+=($dpid)
	await "$work/$1.log" 'Cold start\|Warm start' $dpid || { cat "$work/$1.log"; return 1; }
}
stop_daemon() { kill "$dpid"; wait "$dpid" 2>/dev/null; }
# hugetlb GIB: 2 MiB hugetlb pages for GIB GiB free (reserving them as root); sets huge and pages
hugetlb() {
	local need=$(($1 * 512 + 16))
	if [ "$(hugepages_free)" -ge "$need" ] || hugepages_reserve bench_druid "$need" $lock >/dev/null; then
		huge=require pages="2 MiB hugetlb pages"
	else
		huge=off pages="regular shared memory (4 KiB pages: not $need free 2 MiB hugepages)"
	fi
}
# run-bench.sh holds the hugepages lock on the fd 9 this script inherits: taking the lock anew
# would wait for the caller forever, so under it reserve without; alone, take it as any run does
lock=""
[ "$(readlink /proc/$$/fd/9 2>/dev/null)" != /tmp/hugepool-hugepages.lock ] || lock=nolock
avail_gib() { awk '/^MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0fx", a / b; else printf "-" }'; }
best() { sort -g | head -1; }

echo "bench_druid: Druid 33.0.0 on Java $("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.version = //p'), $(nproc) cores"

# --- the merge pool ready -------------------------------------------------------------------------
pool_bench() {
	local n=$1 size=1073741824 c
	local -a s p h
	# the direct baseline holds N GiB at once, and so does the daemon's pool later: each must fit
	# beside what the machine has available (less the hugepages run-bench.sh already reserved)
	java_cp="$build/java/druid/target/test-classes:$deps"
	"$java" "${jvm[@]}" -Xmx1g -XX:MaxDirectMemorySize=$((n + 1))g -cp "$java_cp" \
		org.hugepool.druid.bench.MergePoolReady direct "$n" "$size" "$rounds" >"$work/direct.out" 2>"$work/direct.err" ||
		{ tail -5 "$work/direct.err"; echo "bench_druid: the direct pools of $n GiB failed"; return 1; }
	hugetlb "$n"
	start_daemon pool "[class bench-merge]\nsize = 1G\ncount = $n\n" ||
		{ echo "bench_druid: hugepoold did not start with $n GiB (log above)"; return 1; }
	"$java" "${jvm[@]}" -Xmx1g -cp "$ext/druid-hugepool-0.1.0.jar:$ext/hugepool-0.1.0.jar:$java_cp" \
		org.hugepool.druid.bench.MergePoolReady hugepool "$work/pool.sock" bench-merge "$n" "$size" "$rounds" \
		>"$work/hugepool.out" 2>"$work/hugepool.err" ||
		{ tail -5 "$work/hugepool.err"; echo "bench_druid: the leased pool of $n GiB failed"; stop_daemon; return 1; }
	stop_daemon
	hugepages_restore >/dev/null
	# column 3: built (Druid's benchmark's figure); column 4: built and a write per 4 KiB
	for c in 3 4; do
		s[c]=$(awk -v c=$c '$1 == "serial" {print $c}' "$work/direct.out" | best)
		p[c]=$(awk -v c=$c '$1 == "parallel" {print $c}' "$work/direct.out" | best)
		h[c]=$(awk -v c=$c '$1 == "hugepool" {print $c}' "$work/hugepool.out" | best)
	done
	echo
	echo "A merge pool of $n x 1 GiB, best of $rounds; hugepoold on $pages"
	printf '  %-62s %12s %14s\n' "" "built (ms)" "+ write/4 KiB"
	printf '  %-62s %12s %14s\n' "Druid 33: DefaultBlockingPool + OffheapBufferGenerator, serial" "${s[3]}" "${s[4]}"
	printf '  %-62s %12s %14s\n' "PR 19025: the same on a temporary ForkJoinPool ($(nproc) threads)" "${p[3]}" "${p[4]}"
	printf '  %-62s %12s %14s\n' "druid-hugepool: one acquire, DefaultBlockingPool over it" "${h[3]}" "${h[4]}"
	printf '  %-62s %12s %14s\n' "serial / druid-hugepool" "$(ratio "${s[3]}" "${h[3]}")" "$(ratio "${s[4]}" "${h[4]}")"
	printf '  %-62s %12s %14s\n' "parallel / druid-hugepool" "$(ratio "${p[3]}" "${h[3]}")" "$(ratio "${p[4]}" "${h[4]}")"
	printf '  rounds, built/written ms: serial %s; parallel %s; hugepool %s\n' \
		"$(awk '$1 == "serial" {printf "%s/%s ", $3, $4}' "$work/direct.out")" \
		"$(awk '$1 == "parallel" {printf "%s/%s ", $3, $4}' "$work/direct.out")" \
		"$(awk '$1 == "hugepool" {printf "%s/%s ", $3, $4}' "$work/hugepool.out")"
}
sizes=("$gib_wanted")
[ "$gib_wanted" -ge 16 ] || sizes+=(16)
for n in "${sizes[@]}"; do
	fit=$(($(avail_gib) - 3))
	if [ "$fit" -lt "$n" ] && [ "$n" != "$gib_wanted" ]; then
		echo; echo "bench_druid: $n x 1 GiB skipped: $(avail_gib) GiB available, $n + 3 wanted"
		break
	fi
	if [ "$fit" -lt "$n" ]; then
		echo; echo "bench_druid: $n x 1 GiB lowered to $fit x 1 GiB: $(avail_gib) GiB available, $n + 3 wanted"
		n=$fit
		[ "$n" -ge 1 ] || break
	fi
	pool_bench "$n" || break
done

# --- a historical's boot, stock against the extension ----------------------------------------------
threads=2 merge=2
[ "$(avail_gib)" -ge $((threads + merge + 3)) ] || {
	echo; echo "bench_druid: the boot benchmark is skipped: $(avail_gib) GiB available, $((threads + merge + 3)) wanted"
	exit 0
}
# a free loopback port below the kernel's ephemeral range (32768 and up), where no outgoing
# connection takes it between this pick and the service's bind: none listens there now
port() {
	local p
	while p=$((20000 + RANDOM % 12000)); [ -n "$(ss -Hltn "sport = :$p")" ]; do :; done
	echo "$p"
}
zkport=$(port)
mkdir -p "$work/zk"
printf 'dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n' "$work/zk" "$zkport" >"$work/zoo.cfg"
"$java" -cp "$deps" -Xmx128m "-Dlog4j.configurationFile=$work/log4j2.xml" \
	org.apache.zookeeper.server.ZooKeeperServerMain "$work/zoo.cfg" >"$work/zk.log" 2>&1 &
zkpid=$!
started+=($zkpid)
await "$work/zk.log" 'binding to port' $zkpid || { tail -5 "$work/zk.log"; echo "bench_druid: ZooKeeper did not start"; exit 0; }
hugetlb $((threads + merge))
start_daemon boot "[class druid-processing]\nsize = 1G\ncount = $threads\n[class druid-merge]\nsize = 1G\ncount = $merge\n" ||
	{ echo "bench_druid: hugepoold did not start for the boot (log above)"; exit 0; }
httpport=$(port)
# stamp LINE: a log line's time, in ms since the epoch; ms_of LOG PATTERN: LOG's last line matching PATTERN's
stamp() { date -d "$(cut -c1-23 <<<"$1")" +%s%3N; }
ms_of() { stamp "$(grep -a -- "$2" "$1" | tail -1)"; }
# boot NAME LOADLIST: a historical from JVM start to serving; prints "POOLS_MS SERVING_MS"
boot() {
	local name=$1 t0 pid ready
	mkdir -p "$work/$name"
	cat >"$work/$name/common.runtime.properties" <<EOF
druid.extensions.directory=$(dirname "$ext")
druid.extensions.loadList=$2
druid.zk.service.host=127.0.0.1:$zkport
druid.host=127.0.0.1
druid.bindOnHost=true
druid.plaintextPort=$httpport
druid.service=druid/historical
druid.processing.numThreads=$threads
druid.processing.numMergeBuffers=$merge
druid.processing.buffer.sizeBytes=1073741824
druid.segmentCache.locations=[{"path":"$work/cache","maxSize":"1g"}]
druid.server.maxSize=1000000000
druid.emitter=noop
druid.lookup.enableLookupSyncOnStartup=false
druid.startup.logging.logProperties=false
druid.hugepool.socket=$work/boot.sock
EOF
	t0=$(date +%s%3N)
	"$java" "${jvm[@]}" -Xmx512m -XX:MaxDirectMemorySize=$((threads + merge + 2))g \
		-cp "$work/$name:$build/java/druid/target/test-classes:$deps" org.apache.druid.cli.Main server historical \
		>"$work/$name.log" 2>&1 &
	pid=$!
	started+=($pid)
	await "$work/$name.log" 'org.eclipse.jetty.server.Server - Started' $pid ||
		{ tail -5 "$work/$name.log"; kill $pid; wait $pid; return 1; }
	# pools ready: the extension's line once its leases are taken; Druid's, the line after its
	# last allocation (logged before the buffer is made)
	if grep -aq 'druid-hugepool: .* leased from hugepoold' "$work/$name.log"; then
		ready=$(ms_of "$work/$name.log" 'druid-hugepool: .* leased from hugepoold')
	else
		ready=$(stamp "$(grep -a -A1 'OffheapBufferGenerator - Allocating new' "$work/$name.log" | tail -1)")
	fi
	echo "$((ready - t0)) $(($(ms_of "$work/$name.log" 'org.eclipse.jetty.server.Server - Started') - t0))"
	kill $pid
	wait $pid 2>/dev/null
}
: >"$work/boots"
for r in $(seq "$boots"); do
	echo "stock $(boot "stock$r" '[]')" >>"$work/boots" || break
	echo "ext $(boot "ext$r" '["druid-hugepool"]')" >>"$work/boots" || break
done
stop_daemon
sp=$(awk '$1 == "stock" {print $2}' "$work/boots" | best) ss=$(awk '$1 == "stock" {print $3}' "$work/boots" | best)
ep=$(awk '$1 == "ext" {print $2}' "$work/boots" | best) es=$(awk '$1 == "ext" {print $3}' "$work/boots" | best)
# the pools' own time: Druid's, from its first allocation to the line after its last; the
# extension's, as its line says (connect, status, two acquires)
span=$(for f in "$work"/stock*.log; do
	echo $(($(stamp "$(grep -a -A1 'OffheapBufferGenerator - Allocating new' "$f" | tail -1)") -
		$(stamp "$(grep -a -m1 'OffheapBufferGenerator - Allocating new' "$f")")))
done | best)
lease=$(cat "$work"/ext*.log | sed -n 's/.*druid-hugepool: .* leased from hugepoold at .* in \([0-9.]*\) ms.*/\1/p' | best)
echo
echo "A historical from JVM start, $threads processing + $merge merge buffers of 1 GiB, best of $boots alternating; hugepoold on $pages"
printf '  %-38s %9s ms to pools ready %9s ms to serving %9s ms in the pools\n' "stock Druid (allocateDirect, serial)" "$sp" "$ss" "$span"
printf '  %-38s %9s ms to pools ready %9s ms to serving %9s ms in the pools\n' "druid-hugepool (leases)" "$ep" "$es" "$lease"
printf '  %-38s %9s ms %26s ms %24s\n' "stock - druid-hugepool" "$((sp - ep))" "$((ss - es))" \
	"$(awk -v a="$span" -v b="$lease" 'BEGIN { printf "%.0f ms, %.0fx", a - b, a / b }')"
printf '  rounds (pools ready, serving ms): %s\n' "$(tr '\n' ';' <"$work/boots")"
exit 0
