#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# druid-tests.sh - the Druid extension druid-hugepool (java/druid, hugepool-druid(7)) in a real
# Apache Druid 33 historical (org.apache.druid.cli.Main server historical, from Maven Central
# through java/druid/pom.xml, cached in ~/.m2) with a real hugepoold of BUILD, and a ZooKeeper
# from its own jar, all on loopback ports and a private socket:
#  - the service comes up with the extension, its log says where its buffers came from,
#    hugepoolctl leases shows its pid holding numThreads + numMergeBuffers buffers, and Druid made
#    no merge buffer of its own;
#  - a groupBy over segments written here by Druid's own writer (java/druid/src/test), whose
#    groups do not fit a merge buffer: refused without spilling, answered with spilling to disk;
#  - SIGKILL of the service gives the buffers back; a restarted service leases them again;
#  - the same query on a stock historical (no extension: Druid's own buffers) answers the same bytes;
#  - druid.hugepool.required=false without a daemon: the service starts on Druid's own buffers and
#    says so once;
#  - every error an operator meets fails the start with a message naming the cause: no daemon, an
#    unknown class, a class of another size than druid.processing.buffer.sizeBytes, too few
#    buffers, a per-uid limit.
# Every wait is for a log line, a process's exit or the daemon's state, with a deadline that only
# tells a hang from an answer. Needs curl and jq (./dev.sh installs them) and ss; without one the
# tests are skipped, saying which. Prints one closing line, "druid: N passed, N failed, N skipped".
# Run by tests/run-tests.sh (make check), or alone after make druid: tests/druid-tests.sh build
# Usage: tests/druid-tests.sh BUILD_DIR
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
mvn=${MVN:-mvn}
java=${JAVA:-java}
ext=$build/java/druid/druid-hugepool
jni=$build/java/libhugepool_jni.so
ctl=$build/hugepoolctl
deadline=300 # seconds: a start or a query that takes longer has hung
rows=40000   # per segment, two segments: ~60,000 groups, far more than a 2 MiB merge buffer holds
passed=0 failed=0 skipped=0
work=$(mktemp -d /var/tmp/hugepool-druid-test.XXXXXX)
started=() # pids of what this script started, ended by pid at exit

cleanup() {
	local p
	for p in "${started[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${started[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# check NAME COMMAND...: one test; its output is shown when it fails. Each line ends with the
# seconds since the line before (the service starts and queries between them)
last=$SECONDS
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		passed=$((passed + 1))
		printf '  ok    %-86s %3d s\n' "$name" $((SECONDS - last))
	else
		failed=$((failed + 1))
		printf '  FAIL  %-86s %3d s\n' "$name" $((SECONDS - last))
		[ -z "$out" ] || sed 's/^/        /' <<<"$out" | tail -20
	fi
	last=$SECONDS
}
finish() {
	echo "druid: $passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
	exit
}
fatal() {
	failed=$((failed + 1))
	printf '  FAIL  %s\n' "$1"
	[ $# -lt 2 ] || tail -30 "$2" | sed 's/^/        /'
	finish
}

[ -e "$ext/druid-hugepool-0.1.0.jar" ] || fatal "the extension is not built (make druid)"
for t in curl jq ss; do
	command -v "$t" >/dev/null || { echo "druid: no $t (./dev.sh installs curl and jq): skipped"; skipped=1; finish; }
done

# Druid's test class path: druid-services and what it needs, the helpers of java/druid/src/test;
# without the binding's jar, which the service must find in the extension's directory
(cd "$top/java/druid" && "$mvn" -B -q -Pservice test-compile dependency:build-classpath -Dmdep.includeScope=test \
	-Dmdep.outputFile="$work/cp" -DbuildDir="$build/java/druid/target" \
	-Dhugepool.jar="$build/java/target/hugepool-0.1.0.jar") >"$work/mvn.log" 2>&1 ||
	fatal "Maven: the test class path (java/druid/pom.xml)" "$work/mvn.log"
cp="$build/java/druid/target/test-classes:$(tr ':' '\n' <"$work/cp" | grep -v '/hugepool-0\.1\.0\.jar$' | paste -sd:)"
# the flags Druid's own start script gives Java 17 (its bin/run-java): without them segments do
# not map (an IllegalAccessError the bootstrap swallows)
jvm=(--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED
	--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
	--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED
	--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED
	-Xmx512m -XX:MaxDirectMemorySize=64m -XX:+UseSerialGC "-Dhugepool.jni.library=$jni"
	"-Dlog4j.configurationFile=$work/log4j2.xml" -Djava.io.tmpdir="$work/tmp")
mkdir -p "$work/tmp" "$work/spill" "$work/zk"
cat >"$work/log4j2.xml" <<'EOF'
<Configuration status="WARN">
  <Appenders><Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="%d{ISO8601} %p [%t] %c - %m%n"/></Console></Appenders>
  <Loggers><Root level="info"><AppenderRef ref="out"/></Root></Loggers>
</Configuration>
EOF

# a free loopback port below the kernel's ephemeral range (32768 and up), where no outgoing
# connection takes it between this pick and the service's bind: none listens there now
port() {
	local p
	while p=$((20000 + RANDOM % 12000)); [ -n "$(ss -Hltn "sport = :$p")" ]; do :; done
	echo "$p"
}
# alive PID: PID runs (an exited child not yet waited for is a zombie: not alive)
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s#Z}" = "$s" ]; }
# await LOG PATTERN PID: 0 once LOG has a line matching PATTERN; 1 if PID exited first; 2 at the deadline
await() {
	local end=$((SECONDS + deadline))
	while [ $SECONDS -lt $end ]; do
		grep -aq -- "$2" "$1" 2>/dev/null && return 0
		if ! alive "$3"; then
			grep -aq -- "$2" "$1" 2>/dev/null && return 0
			return 1
		fi
		sleep 0.2
	done
	return 2
}

# hugepoold NAME EXTRA_CONF: a daemon on $work/NAME.sock, returned once it listens
hugepoold() {
	local conf=$work/$1.conf
	printf 'socket = %s\nhugepages = prefer\nspill_directory = %s\n%b' "$work/$1.sock" "$work/spill" "$2" >"$conf"
	printf '[class druid-processing]\nsize = 2M\ncount = 2\n[class druid-merge]\nsize = 2M\ncount = 2\n' >>"$conf"
	printf '[class odd]\nsize = 4M\ncount = 2\n[class few]\nsize = 2M\ncount = 1\n' >>"$conf"
	"$build/hugepoold" -c "$conf" >"$work/$1.log" 2>&1 &
	started+=($!)
	await "$work/$1.log" 'Cold start\|Warm start' $! || fatal "hugepoold $1 starts" "$work/$1.log"
}
hugepoold hugepoold ''
hugepoold limited 'max_bytes_per_uid = 4M\n'

zkport=$(port)
printf 'dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n' "$work/zk" "$zkport" >"$work/zoo.cfg"
"$java" -cp "$cp" -Xmx128m -XX:TieredStopAtLevel=1 "-Dlog4j.configurationFile=$work/log4j2.xml" \
	org.apache.zookeeper.server.ZooKeeperServerMain "$work/zoo.cfg" >"$work/zk.log" 2>&1 &
zkpid=$!
started+=($zkpid)
"$java" "${jvm[@]}" -XX:TieredStopAtLevel=1 -cp "$cp" org.hugepool.druid.test.SegmentWriter "$work/cache" 2 "$rows" \
	>"$work/segments.log" 2>&1 || fatal "Druid's writer makes the segments" "$work/segments.log"
await "$work/zk.log" 'binding to port' $zkpid || fatal "ZooKeeper starts on port $zkport" "$work/zk.log"

httpport=$(port)
cat >"$work/common.properties" <<EOF
druid.extensions.directory=$(dirname "$ext")
druid.zk.service.host=127.0.0.1:$zkport
druid.host=127.0.0.1
druid.bindOnHost=true
druid.plaintextPort=$httpport
druid.service=druid/historical
druid.processing.numThreads=2
druid.processing.numMergeBuffers=2
druid.processing.buffer.sizeBytes=2097152
druid.processing.tmpDir=$work/tmp
druid.query.groupBy.maxOnDiskStorage=1000000000
druid.segmentCache.locations=[{"path":"$work/cache","maxSize":"1g"}]
druid.server.maxSize=1000000000
druid.server.http.numThreads=8
druid.emitter=logging
druid.emitter.logging.logLevel=warn
druid.lookup.enableLookupSyncOnStartup=false
druid.startup.logging.logProperties=false
druid.hugepool.socket=$work/hugepoold.sock
EOF

# historical NAME [PROPERTY=VALUE...]: start a historical with the common properties and these
# (later lines win), its log in $work/NAME.log; its pid in $hpid. With quick=1 in the
# environment, the JIT's first tier only: a start that serves no query is done sooner
historical() {
	local name=$1 tier=()
	shift
	mkdir -p "$work/$name"
	{ cat "$work/common.properties"; printf '%s\n' "$@"; } >"$work/$name/common.runtime.properties"
	[ -z "${quick:-}" ] || tier=(-XX:TieredStopAtLevel=1)
	"$java" "${jvm[@]}" "${tier[@]}" -cp "$work/$name:$cp" org.apache.druid.cli.Main server historical >"$work/$name.log" 2>&1 &
	hpid=$!
	started+=($hpid)
}
up() { await "$work/$1.log" 'org.eclipse.jetty.server.Server - Started' "$hpid"; }
stop() { kill "$hpid" 2>/dev/null; wait "$hpid" 2>/dev/null; }
# leases_of PID: the leases hugepoold shows for PID, "CLASS COUNT" per class
leases_of() { "$ctl" -s "$work/hugepoold.sock" leases | awk -v p="$1" '$1 ~ /^0x/ && $3 == p {n[$2]++} END {for (c in n) print c, n[c]}' | sort; }
expect_leases() { local got; got=$(leases_of "$1"); [ "$got" = "$2" ] || { echo "hugepoold shows for pid $1: ${got:-no lease}, expected $2"; false; }; }
# no_leases_of PID: true once the daemon holds none for PID (it sees the connection close)
no_leases_of() {
	local end=$((SECONDS + deadline))
	while [ $SECONDS -lt $end ]; do
		[ -z "$(leases_of "$1")" ] && return 0
		sleep 0.1
	done
	echo "pid $1 still holds: $(leases_of "$1")"
	false
}

# query NAME MAXDISK: every key's rows and values over both segments into $work/NAME.json, spilling
# allowed up to MAXDISK bytes (the server's maxOnDiskStorage bounds it), or with 0 not at all
query() {
	curl -sS -o "$work/$1.json" -w '%{http_code}' --max-time "$deadline" -H 'Content-Type: application/json' \
		-d '{"queryType":"groupBy","dataSource":"hp","intervals":["2026-01-01/2026-02-01"],"granularity":"all",
		"dimensions":["key"],"aggregations":[{"type":"longSum","name":"rows","fieldName":"count"},
		{"type":"longSum","name":"value","fieldName":"value"}],"context":{"maxOnDiskStorage":'"$2"'}}' \
		"http://127.0.0.1:$httpport/druid/v2/"
}
answered() { local code; code=$(query "$1" 1000000000) && [ "$code" = 200 ] || { echo "HTTP $code: $(head -c 600 "$work/$1.json")"; false; }; }
groups_of() { jq -r '"\(length) \(map(.event.rows) | add)"' "$1"; }
refused_without_spill() {
	local code; code=$(query nospill 0)
	[ "$code" = 400 ] && grep -q 'Not enough merge buffer memory' "$work/nospill.json" ||
		{ echo "HTTP $code: $(head -c 600 "$work/nospill.json")"; false; }
}
allocated_by_druid() { grep -ac "OffheapBufferGenerator - Allocating new $2 buffer" "$work/$1.log"; }

echo "druid: Druid 33.0.0 historical on Java $("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.version = //p'), hugepoold with $(sed -n 's/.*info: Created \(.*\)/\1/p' "$work/hugepoold.log" | head -1)"

# --- the service on the extension's buffers ------------------------------------------------------
historical ext 'druid.extensions.loadList=["druid-hugepool"]'
up ext || fatal "historical with druid-hugepool starts" "$work/ext.log"
check "historical with druid-hugepool starts; its log says where the buffers came from" \
	grep -a 'druid-hugepool: 2 processing buffers of class\[druid-processing\] and 2 merge buffers of class\[druid-merge\], \[2,097,152\] bytes each, leased from hugepoold' "$work/ext.log"
check "hugepoolctl leases: the service holds numThreads + numMergeBuffers buffers" \
	expect_leases "$hpid" $'druid-merge 2\ndruid-processing 2'
check "Druid allocated no merge or processing buffer of its own" \
	test "$(allocated_by_druid ext 'result merging')$(allocated_by_druid ext 'intermediate processing')" = 00
check "groupBy whose groups outgrow a merge buffer: refused without spilling" refused_without_spill
check "groupBy with spilling to disk answers" answered ext
check "groupBy answered every group of both segments" test "$(groups_of "$work/ext.json")" = "$((rows * 3 / 2)) $((rows * 2))"
# the wait with stderr to /dev/null: bash reports a child killed by a signal there
{ kill -KILL "$hpid"; wait "$hpid"; } 2>/dev/null
check "SIGKILL of the service gives its buffers back" no_leases_of "$hpid"

quick=1 historical restarted 'druid.extensions.loadList=["druid-hugepool"]'
await "$work/restarted.log" 'druid-hugepool: .* leased from hugepoold' "$hpid" ||
	fatal "the restarted historical leases its buffers" "$work/restarted.log"
check "a restarted service leases its buffers again" expect_leases "$hpid" $'druid-merge 2\ndruid-processing 2'
sed -n 's/.*\(leased from hugepoold at .* in [0-9.]* ms\).*/  restart: \1/p' "$work/restarted.log"
stop
check "a stopped service gives its buffers back" no_leases_of "$hpid"

# --- stock Druid ------------------------------------------------------------------------------------
historical stock 'druid.extensions.loadList=[]'
up stock || fatal "stock historical starts" "$work/stock.log"
check "stock historical allocates its own merge buffers" test "$(allocated_by_druid stock 'result merging')" = 2
check "stock historical answers" answered stock
check "the extension's answer equals stock Druid's, byte for byte" cmp "$work/ext.json" "$work/stock.json"
stop

# --- the fallback, and the operator's errors: each fails the start, naming the cause ------------
# Six starts side by side: each error fails as its lifecycle starts, before it binds a port; the
# fallback is waited for until Druid made its merge buffers (its pools are made as it starts)
quick=1 historical fallback 'druid.extensions.loadList=["druid-hugepool"]' "druid.hugepool.socket=$work/none.sock" \
	druid.hugepool.required=false
fbpid=$hpid
declare -A failing
start_failing() {
	local name=$1
	shift
	quick=1 historical "$name" 'druid.extensions.loadList=["druid-hugepool"]' "$@"
	failing[$name]=$hpid
}
start_failing nodaemon "druid.hugepool.socket=$work/none.sock"
start_failing unknown druid.hugepool.mergeClass=nope
start_failing size druid.hugepool.processingClass=odd
start_failing few druid.hugepool.mergeClass=few
start_failing limit "druid.hugepool.socket=$work/limited.sock"
hpid=$fbpid
await "$work/fallback.log" 'Allocating new result merging buffer\[1\]' "$hpid" ||
	fatal "required=false without a daemon: the service starts on Druid's own merge buffers" "$work/fallback.log"
check "required=false without a daemon: the service starts on Druid's own buffers, said once" \
	test "$(grep -ac 'no hugepoold listens at .*druid.hugepool.required=false, so Druid allocates its own' "$work/fallback.log")" = 1
stop
# failed NAME PATTERN: that start failed, and its log has a line of the extension matching PATTERN
failed() {
	local name=$1 pattern=$2 rc
	hpid=${failing[$name]}
	await "$work/$name.log" 'Started ServerConnector' "$hpid"
	rc=$?
	if [ $rc -eq 0 ]; then stop; echo "the service started"; return 1; fi
	[ $rc -eq 1 ] || { stop; echo "no exit within $deadline s"; return 1; }
	wait "$hpid"
	rc=$?
	[ $rc -ne 0 ] || { echo "exit status 0"; return 1; }
	grep -a 'druid-hugepool: ' "$work/$name.log" | grep -a -m1 -- "$pattern" || {
		grep -a -m3 'druid-hugepool\|Exception' "$work/$name.log"
		false
	}
}
check "no daemon: the start fails, naming the socket" failed nodaemon \
	"no hugepoold listens at \[$work/none.sock\] (druid.hugepool.socket)"
check "unknown class: the start fails, naming it and the daemon's classes" failed unknown \
	'has no buffer class \[nope\] (druid.hugepool.mergeClass); its classes: druid-processing'
check "a class of another size: the start fails, naming both sizes" failed size \
	'buffer class \[odd\] (druid.hugepool.processingClass) has buffers of \[4,194,304\] bytes, but druid.processing.buffer.sizeBytes is \[2,097,152\]'
check "too few buffers: the start fails, naming both counts" failed few \
	'buffer class \[few\] (druid.hugepool.mergeClass) has 1 buffers, but the service needs 2'
check "a per-uid limit: the start fails, naming the limit" failed limit \
	'hugepoold refused .* buffers of class .*max_bytes_per_uid'
finish
