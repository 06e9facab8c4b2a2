#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_artemis.sh - an ActiveMQ Artemis 2.40.0 broker on hugepool's journals against the same
# broker on its own (run by run-bench.sh, make bench). Four brokers made by the distribution's
# `artemis create` (the one tests/artemis-tests.sh unpacks into BUILD/java/artemis/dist): one
# switched to hugepool as hugepool-artemis(7) says, its journals on a hugepoold of its own (page
# cache, backend auto); one on Artemis's ASYNCIO journal and one on its NIO journal, each with the
# journal-buffer-timeout `artemis create` tunes on this disk for it; and one with persistence off
# (`--disable-persistence`: no journal at all), the most any journal could let the same broker do on
# this machine, printed beside as the ceiling of the ratios. All four page past the same
# global-max-size, the backlog the hugepool broker's message journal is sized for. The load is
# Artemis's own generator, `artemis perf client`: P producers with persistent S-byte messages, each
# with one send in flight (a confirmation window, so that a send completes when the broker made it
# durable), and a consumer, so that queues stay short as a broker's do; D seconds measured after a
# warm-up. In each cell the four brokers take turns, the order rotating from cell to cell and round
# to round; with several rounds a broker's median run counts. Prints each broker's durable sends/s
# and send latency p50/p99 (the generator's HDR histogram), and hugepool's against the better
# Artemis journal's (the one with more sends/s) as ratios, with the round-by-round spread, and the
# ceiling's; the CPU each broker (its JIT compiler aside) and the hugepool broker's daemon spent per
# send in the same runs (/proc/PID/stat: where a send's time goes when the two CPUs are the limit),
# the hugepool broker's message journal's records per sync and syncs per send (`hugepoolctl journal
# stat`), and each Artemis broker's syncs per send (its fdatasync and fsync calls, which perf counts
# where it may); and the whole machine's CPU time per send in the measured seconds, every process's
# and the kernel's, with the share of its CPUs busy (/proc/stat: on CPUs all busy, sends/s go as its
# inverse, which bounds the ratio any journal can reach). Nothing is asserted. Each broker runs 15 s
# of load unmeasured first, for its JIT. Default: P in {1, 8, 64} x S in {100, 1000, 10000}, 5 s
# after 6 s, one round (the JIT warm-up, not a second round, is what keeps the first broker of a
# cell from running half-compiled; the 6 s, what keeps the load generator's own: a new JVM each run,
# its C2 compiler takes 0.4-0.7 of a CPU for its first 6 s of load and 0.0-0.1 after): 13 minutes
# a round on 2 idle CPUs (three rounds, 40), far more on loaded ones (one cell alone took 5 minutes
# at a load of 25); set HP_BENCH_ARTEMIS_PRODUCERS, _SIZES, _SECONDS, _WARMUP, _ROUNDS,
# _JIT_SECONDS for others, and HP_BENCH_ARTEMIS_BROKERS (hugepool,asyncio,nio,none) to run some of
# the brokers only (a change's A/B runs; a broker left out prints "-", one that ran and failed
# "failed").
# Usage: bench/bench_artemis.sh BUILD_DIR
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
jar=$build/java/target/hugepool-0.1.0.jar
jni=$build/java/libhugepool_jni.so
plugin=$build/java/artemis/hugepool-artemis-0.1.0.jar
home=$build/java/artemis/dist/apache-artemis-2.40.0
if [ ! -e "$jar" ] || [ ! -e "$jni" ] || [ ! -e "$plugin" ]; then
	echo "bench_artemis: hugepool-artemis is not built (make artemis: a JDK and Maven)"
	exit 0
fi
producers=${HP_BENCH_ARTEMIS_PRODUCERS:-1,8,64} sizes=${HP_BENCH_ARTEMIS_SIZES:-100,1000,10000}
seconds=${HP_BENCH_ARTEMIS_SECONDS:-5} warmup=${HP_BENCH_ARTEMIS_WARMUP:-6} rounds=${HP_BENCH_ARTEMIS_ROUNDS:-1}
work=$(mktemp -d /var/tmp/hugepool-bench-artemis.XXXXXX)
pids=()
cleanup() {
	local p i
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	# a broker stuck in a journal operation may not stop on SIGTERM: 30 s, then SIGKILL
	for ((i = 0; i < 300; i++)); do
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && break; done
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# the broker distribution, from Maven Central into ~/.m2 once, unpacked as the tests unpack it
if [ ! -x "$home/bin/artemis" ] &&
	! (cd "$top/java/artemis" && ${MVN:-mvn} -B -q dependency:unpack@artemis-distribution -DbuildDir="$build/java/artemis" \
		-Dhugepool.build="$build") >"$work/mvn.log" 2>&1; then
	tail -5 "$work/mvn.log"
	echo "bench_artemis: Maven could not fetch the Artemis 2.40.0 distribution: skipped"
	exit 0
fi

# await LOG PID WHAT...: return once LOG has a line with one of WHAT (tail -F follows it through
# inotify: no fixed wait) and PID still runs; otherwise show LOG's end. 300 s tell a hang.
await() {
	local log=$1 pid=$2 fd tp rc=1
	shift 2
	exec {fd}< <(exec timeout 300 tail -n +1 -F "$log" 2>/dev/null)
	tp=$!
	grep -m1 -F "$(printf '%s\n' "$@")" <&"$fd" >/dev/null && kill -0 "$pid" 2>/dev/null && rc=0
	kill "$tp" 2>/dev/null
	exec {fd}<&-
	[ "$rc" -eq 0 ] || tail -20 "$log"
	return "$rc"
}

# the daemon of the hugepool broker's journals
cat >"$work/hugepoold.conf" <<EOF
socket = $work/hugepoold.sock
hugepages = off
spill_directory = $work/spill
[journal artemis-messages]
directory = $work/artemis-messages
segment_size = 64M
segments = 32
when_full = block
[journal artemis-bindings]
directory = $work/artemis-bindings
segment_size = 4M
segments = 4
when_full = block
EOF
"$build/hugepoold" -c "$work/hugepoold.conf" >"$work/hugepoold.log" 2>&1 &
pids+=($!)
await "$work/hugepoold.log" "${pids[-1]}" "Cold start" "Warm start" || { echo "bench_artemis: hugepoold did not start"; exit 0; }

# create NAME PORT ARGS...: `artemis create` an instance for the bench, its output in NAME.create
create() {
	local name=$1 port=$2
	shift 2
	"$home/bin/artemis" create --silent --force --no-web --allow-anonymous --user a --password a --no-amqp-acceptor \
		--no-hornetq-acceptor --no-mqtt-acceptor --no-stomp-acceptor --host 127.0.0.1 --default-port "$port" "$@" \
		"$work/$name" >"$work/$name.create" 2>&1
}
echo "bench_artemis: making four brokers (artemis create tunes the journal-buffer-timeout of ASYNCIO and NIO)"
create hugepool 61716 --no-autotune && create asyncio 61717 --aio && create nio 61718 --nio &&
	create none 61719 --disable-persistence ||
	{ tail -5 "$work"/*.create; echo "bench_artemis: artemis create failed"; exit 0; }
# every broker pages past the same backlog: 256 MiB, what the hugepool broker's 2 GiB message
# journal holds as hugepool-artemis(7) sizes it. Artemis's default is half the heap, 1 GiB: the
# 64 x 10 KB cell leaves a backlog in its queue for the next round, and in a grid at 512 MiB the
# journal filled at 134 MB unacknowledged, before the reclaim that would have freed it, and the
# broker waited for ever. (At 128 MiB every broker paged in that cell, at 6-7k sends/s.)
for b in hugepool asyncio nio none; do
	sed -i 's|</core>|<global-max-size>256M</global-max-size></core>|' "$work/$b/etc/broker.xml"
done
# the operator's change (hugepool-artemis(7)): the jars in lib/, the plugin in broker.xml, the JNI library
cp "$jar" "$work/hugepool/lib/hugepool.jar"
cp "$plugin" "$work/hugepool/lib/hugepool-artemis.jar"
sed -i "s|</core>|<broker-plugins><broker-plugin class-name=\"org.hugepool.artemis.HugepoolJournals\"><property key=\"socket\" value=\"$work/hugepoold.sock\"/></broker-plugin></broker-plugins></core>|" \
	"$work/hugepool/etc/broker.xml"
printf '\nJAVA_ARGS="$JAVA_ARGS -Dhugepool.jni.library=%s"\n' "$jni" >>"$work/hugepool/etc/artemis.profile"
timeout_of() { sed -n 's|.*<journal-buffer-timeout>\([0-9]*\)</journal-buffer-timeout>.*|\1|p' "$work/$1/etc/broker.xml"; }
echo "bench_artemis: journal-buffer-timeout ASYNCIO $(timeout_of asyncio) ns, NIO $(timeout_of nio) ns"

IFS=, read -r -a brokers <<<"${HP_BENCH_ARTEMIS_BROKERS:-hugepool,asyncio,nio,none}"
declare -A port=([hugepool]=61716 [asyncio]=61717 [nio]=61718 [none]=61719) bpid
dpid=${pids[0]}
for b in "${brokers[@]}"; do
	"$work/$b/bin/artemis" run >"$work/$b.log" 2>&1 &
	pids+=($!) bpid[$b]=$!
	await "$work/$b.log" "${pids[-1]}" AMQ221007 AMQ224000 && grep -q AMQ221007 "$work/$b.log" ||
		{ grep -A3 AMQ224000 "$work/$b.log" | head -8; echo "bench_artemis: the $b broker did not start"; exit 0; }
done

# ticks PID: the CPU time PID has used, in clock ticks (user and system: fields 14 and 15), less
# its JIT compiler threads' (a broker's C2 compiles for 15 s of CPU and more after its start, in
# whichever cells it happens to: the broker's work is the rest)
ticks() {
	local t task jit=0
	t=$(awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	for task in /proc/"$1"/task/*; do
		case $(cat "$task/comm" 2>/dev/null) in
		C1\ Compiler* | C2\ Compiler*) jit=$((jit + $(awk '{ print $14 + $15 }' "$task/stat" 2>/dev/null || echo 0))) ;;
		esac
	done
	echo $((t - jit))
}
tck=$(getconf CLK_TCK)

# jstat FIELD...: those numbers of the hugepool broker's message journal, from the daemon
jstat() {
	local js f
	js=$("$build/hugepoolctl" -s "$work/hugepoold.sock" --json journal stat artemis-messages 2>/dev/null)
	for f in "$@"; do sed -n "s/.*\"$f\":\([0-9]*\).*/\1/p" <<<"$js"; done | paste -sd' '
}

# The syncs an Artemis broker makes: its fdatasync and fsync calls (ASYNCIO's poller syncs after
# the writes io_getevents returns, NIO's force() is one), counted by perf on the syscall
# tracepoints of the broker's threads; where perf cannot (not installed, not allowed), "-".
syncs_countable=false
perf stat -x, -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync true >/dev/null 2>&1 && syncs_countable=true

# machine: until killed, a line every 0.2 s of the time (epoch ms) and the CPU time all the
# machine's CPUs spent busy so far (user, nice, system, irq and softirq of /proc/stat, in clock
# ticks: every process's and the kernel's, the load generator's included; idle, iowait and the
# steal of other guests left out); read by bash builtins, so that only the sleep forks
machine() {
	local _ u n sy i w irq sirq
	while :; do
		read -r _ u n sy i w irq sirq _ </proc/stat
		echo "${EPOCHREALTIME//[!0-9]/} $((u + n + sy + irq + sirq))"
		sleep 0.2
	done
}

# run BROKER P S: one perf client run; prints "sends/s p50_us p99_us broker_us daemon_us rps sps
# machine_us busy" (broker_us, daemon_us: CPU per send, of the broker and of the hugepool
# broker's daemon, over the whole run, warm-up included, as are the sends counted; rps: the
# hugepool broker's message journal's records per sync, "-" for the others; sps: syncs per send
# over the same run, of the hugepool broker's message journal as its daemon counts them, of an
# Artemis broker as perf counts its fdatasync and fsync calls (both of its journals), "-" where not
# counted; machine_us: the whole machine's busy CPU time per send in the measured seconds alone,
# and busy: the share of its CPUs busy then, in percent), or "- - - - - - - - -" if it failed
run() {
	local b=$1 p=$2 s=$3 json="$work/$1.$2.$3.json" out c0 d0 c1 d1 a0 y0 a1 y1 counter="" sampler
	rm -f "$json" "$work/$b.syncs"
	machine >"$work/machine" &
	sampler=$!
	c0=$(ticks "${bpid[$b]}") d0=$(ticks "$dpid")
	read -r a0 y0 < <(jstat appends syncs)
	if [ "$b" != hugepool ] && [ "$b" != none ] && $syncs_countable; then
		# started here, not in a subshell: this shell waits for it to write its counts
		perf stat -x, -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync -p "${bpid[$b]}" -o "$work/$b.syncs" \
			>/dev/null 2>&1 &
		counter=$!
		sleep 0.2 # attached before the first send
	fi
	# a broker that stops answering fails its run rather than hanging the bench
	timeout -k 10 $((warmup + seconds + 120)) "$home/bin/artemis" perf client \
		--url "tcp://127.0.0.1:${port[$b]}?confirmationWindowSize=1048576" --persistent --producers "$p" --consumers 1 \
		--threads $((p < $(nproc) ? p : $(nproc))) --message-size "$s" --max-pending 1 \
		--warmup "$warmup" --duration "$((warmup + seconds))" --json "$json" "queue://bench.$p.$s" >"$work/$b.$p.$s.log" 2>&1
	c1=$(ticks "${bpid[$b]}") d1=$(ticks "$dpid")
	kill "$sampler"
	wait "$sampler" 2>/dev/null
	read -r a1 y1 < <(jstat appends syncs)
	[ "$b" = hugepool ] || d1=$d0 a1=$a0 y1=$y0
	if [ -n "$counter" ]; then
		kill -INT "$counter" 2>/dev/null
		wait "$counter" 2>/dev/null
		y0=0 y1=$(awk -F, '$1 ~ /^[0-9]+$/ { n += $1 } END { print n + 0 }' "$work/$b.syncs" 2>/dev/null)
	fi
	# sends/s: the sends completed in the intervals reported after the warm-up, over their span
	# (from the last warm-up report, or from the first report when none was warm-up: reports are
	# not exactly a second apart on a loaded machine); latency: the summary's histogram, which
	# leaves the warm-up's reports out; per send: the CPU and journal counts cover the whole run,
	# warm-up included, as does the summary's totalSent, so they are divided by it. (The perf
	# client's --duration includes its --warmup. Taking totalSent for the measured seconds alone,
	# as this script did from 2026-11-29 to 11-30, understated every broker's CPU and syncs per
	# send by (warm-up + seconds) / seconds alike: the hugepool broker's message journal came to
	# 3.6-3.7 records per send at 8 and 64 producers then, where a message is five records, and
	# to 5.0-5.2 divided by totalSent.) The machine's figures: its busy ticks at the measured
	# seconds' first and last report, each between the two samples around it, as the line
	# between them gives it.
	out=$(awk -F'[{},:]' -v cpu=$((c1 - c0)) -v dcpu=$((d1 - d0)) -v tck="$tck" -v recs=$((a1 - a0)) -v syncs=$((y1 - y0)) '
		function field(name,   i) { for (i = 1; i < NF; i++) if ($i == "\"" name "\"") return $(i + 1); return "" }
		/"sampleType":"interval"/ {
			t = field("time"); c = field("count"); all += c
			if (/"warmup":true/ || start == "") { start = t; n = 0 } else { n += c; end = t }
		}
		/"sampleType":"summary"/ && /"result":"success"/ { p50 = field("50"); p99 = field("99"); total = field("totalSent") }
		END { if (total > 0) all = total
			if (end > start && n > 0 && p50 != "") printf "%.0f %s %s %.0f %.0f %s %s %.0f %.0f %.0f\n", n * 1000 / (end - start), p50, p99,
			cpu * 1e6 / tck / all, dcpu * 1e6 / tck / all, (syncs && recs ? sprintf("%.2f", recs / syncs) : "-"),
			(syncs ? sprintf("%.2f", syncs / all) : "-"), start, end, n }' "$json" 2>/dev/null)
	[ -n "$out" ] && out=$(awk -v run="$out" -v tck="$tck" -v cpus="$(nproc)" '
		function at(t,   i) { # busy ticks at time t (ms)
			for (i = 2; i <= k; i++) if (ms[i] >= t) return b[i - 1] + (b[i] - b[i - 1]) * (t - ms[i - 1]) / (ms[i] - ms[i - 1])
			return ""
		}
		{ ms[++k] = $1 / 1000; b[k] = $2 }
		END { split(run, f, " "); t0 = at(f[8]); t1 = at(f[9])
			printf "%s %s %s %s %s %s %s", f[1], f[2], f[3], f[4], f[5], f[6], f[7]
			if (t0 != "" && t1 != "" && ms[1] <= f[8]) printf " %.0f %.0f\n", (t1 - t0) * 1e6 / tck / f[10],
				(t1 - t0) * 100000 / tck / (f[9] - f[8]) / cpus
			else printf " - -\n" }' "$work/machine")
	echo "${out:-- - - - - - - - -}"
}

# each broker's JIT warmed up before the first cell: just started, a broker spends most of its
# CPU compiling (C2 took two thirds of the hugepool broker's in its first seconds under load)
echo "bench_artemis: warming each broker up (${HP_BENCH_ARTEMIS_JIT_SECONDS:-15} s of 8 x 1000 B, not measured)"
for b in "${brokers[@]}"; do
	"$home/bin/artemis" perf client --url "tcp://127.0.0.1:${port[$b]}?confirmationWindowSize=1048576" --persistent \
		--producers 8 --consumers 1 --threads "$(nproc)" --message-size 1000 --max-pending 1 \
		--duration "${HP_BENCH_ARTEMIS_JIT_SECONDS:-15}" queue://bench.jit >"$work/$b.jit.log" 2>&1
done

IFS=, read -r -a ps <<<"$producers"
IFS=, read -r -a ss <<<"$sizes"
# runs[BROKER.P.S]: that broker's runs of the cell, a line each ("sends/s p50 p99 ..." as run
# prints them); per_round[BROKER.P.S.R]: its sends/s in round R
declare -A runs per_round
cell=0
for ((r = 0; r < rounds; r++)); do
	for p in "${ps[@]}"; do
		for s in "${ss[@]}"; do
			for ((k = 0; k < ${#brokers[@]}; k++)); do
				b=${brokers[$(((cell + r + k) % ${#brokers[@]}))]}
				read -r rate l50 l99 bu du rs sp mu bz < <(run "$b" "$p" "$s")
				[ "$rate" != - ] || continue
				runs[$b.$p.$s]+="$rate $l50 $l99 $bu $du $rs $sp $mu $bz"$'\n'
				per_round[$b.$p.$s.$r]=$rate
			done
			cell=$((cell + 1))
		done
	done
done

# Each broker's figures in a cell are those of its median run by sends/s (of an even number of
# runs, the faster of the middle two: with two rounds, the better run). Not the best of several:
# on this VM one cell's run moves by a third from run to run, and the best of three was one
# broker's lucky run as often as not (8 x 1000 B, 2026-11-30: ASYNCIO 3,003, 3,019 and 3,852
# sends/s beside hugepool's 3,202-3,589). The spread shows beside: hugepool over the better
# Artemis journal of the same round, round by round.
declare -A best p50 p99 cpu dcpu rps sps mcpu busy
for c in "${!runs[@]}"; do
	n=$(printf '%s' "${runs[$c]}" | grep -c .)
	read -r "best[$c]" "p50[$c]" "p99[$c]" "cpu[$c]" "dcpu[$c]" "rps[$c]" "sps[$c]" "mcpu[$c]" "busy[$c]" \
		< <(printf '%s' "${runs[$c]}" | sort -n -k1,1 | sed -n "$((n / 2 + 1))p")
done
# spread CELL: "lowest-highest" of hugepool's sends/s over the better Artemis journal's, each
# round's runs alone, "-" with fewer than two rounds that ran all three
spread() {
	local r h a lo="" hi=""
	for ((r = 0; r < rounds; r++)); do
		h=${per_round[hugepool.$1.$r]:-} a=${per_round[asyncio.$1.$r]:-0}
		[ "${per_round[nio.$1.$r]:-0}" -gt "$a" ] && a=${per_round[nio.$1.$r]}
		[ -n "$h" ] && [ "$a" -gt 0 ] || continue
		read -r lo hi < <(awk -v h="$h" -v a="$a" -v lo="$lo" -v hi="$hi" 'BEGIN { x = h / a
			if (lo == "" || x < lo) lo = x; if (hi == "" || x > hi) hi = x; print lo, hi }')
	done
	[ -n "$lo" ] && [ "$lo" != "$hi" ] && printf "%.2f-%.2fx" "$lo" "$hi" || printf -- -
}

ms() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1000 }'; }
fig() { # BROKER CELL: "sends/s (p50 / p99 ms)", "failed", or "-" for a broker left out
	if [ -n "${best[$1.$2]:-}" ]; then
		printf "%d (%s / %s)" "${best[$1.$2]}" "$(ms "${p50[$1.$2]}")" "$(ms "${p99[$1.$2]}")"
	elif [[ " ${brokers[*]} " == *" $1 "* ]]; then
		printf failed
	else
		printf -- -
	fi
}
# better CELL: the Artemis journal that made more sends/s in CELL (ASYNCIO on a tie), the one
# hugepool's figures are compared with
better() { if [ "${best[asyncio.$1]:-0}" -ge "${best[nio.$1]:-0}" ]; then echo asyncio; else echo nio; fi; }
# rows ROW: a table's rows, ROW called for each cell with p, s, c (the cell) and o (its better
# Artemis journal) set
rows() {
	local p s c o
	for p in "${ps[@]}"; do
		for s in "${ss[@]}"; do
			c=$p.$s o=$(better "$p.$s")
			"$1"
		done
	done
}
echo
echo "Durable sends of an Artemis 2.40.0 broker (artemis perf client, persistent, one send in flight per producer, a consumer;"
[ "$rounds" -gt 1 ] && of="the median of $rounds runs" || of="one run"
echo "$seconds s after $warmup s a cell, $of): sends/s (send latency p50 / p99 in ms); the ratios of those"
echo "runs, and hugepool's over the better Artemis journal's in each round alone, lowest to highest"
echo
echo "| producers x message | hugepool | Artemis ASYNCIO | Artemis NIO | sends/s: hugepool / better Artemis | round by round | p50 | p99 | no journal (persistence off) | no journal / better Artemis |"
echo "|---|---|---|---|---|---|---|---|---|---|"
sends_row() {
	local ratio=- r50=- r99=- ceil=-
	[ -n "${best[none.$c]:-}" ] && [ "${best[$o.$c]:-0}" -gt 0 ] &&
		ceil=$(awk -v a="${best[none.$c]}" -v b="${best[$o.$c]}" 'BEGIN { printf "%.2fx", a / b }')
	if [ -n "${best[hugepool.$c]:-}" ] && [ "${best[$o.$c]:-0}" -gt 0 ]; then
		ratio=$(awk -v a="${best[hugepool.$c]}" -v b="${best[$o.$c]}" 'BEGIN { printf "**%.2fx**", a / b }')
		r50=$(awk -v a="${p50[hugepool.$c]}" -v b="${p50[$o.$c]}" 'BEGIN { printf "%.2fx", a / b }')
		r99=$(awk -v a="${p99[hugepool.$c]}" -v b="${p99[$o.$c]}" 'BEGIN { printf "%.2fx", a / b }')
	fi
	echo "| $p x $s B | $(fig hugepool "$c") | $(fig asyncio "$c") | $(fig nio "$c") | $ratio ($o) | $(spread "$c") | $r50 | $r99 |" \
		"$(fig none "$c") | $ceil |"
}
rows sends_row
echo
echo "CPU per durable send, in microseconds, in the runs above (the broker's JVM less its JIT compiler threads; the"
echo "hugepool broker's daemon beside it), and the hugepool broker with its daemon over the broker the sends/s ratio"
echo "compares it with; and the hugepool broker's message journal in the same runs, as its daemon counts it: records"
echo "per sync; and syncs per durable send, of the hugepool broker's message journal as its daemon counts them and of"
echo "each Artemis broker as perf counts its fdatasync and fsync calls (a durable send is a message and its reference, each"
echo "waiting for a sync; its consumer's acknowledgement, in a transaction, an update and a commit that waits for one, and"
echo "the message's delete after it):"
echo
echo "| producers x message | hugepool broker + daemon | Artemis ASYNCIO | Artemis NIO | hugepool / better Artemis | records / sync | syncs / send: hugepool | ASYNCIO | NIO | no journal |"
echo "|---|---|---|---|---|---|---|---|---|---|"
cpu_row() {
	local ratio=-
	[ -n "${cpu[hugepool.$c]:-}" ] && [ "${cpu[$o.$c]:-0}" -gt 0 ] &&
		ratio=$(awk -v a="$((cpu[hugepool.$c] + dcpu[hugepool.$c]))" -v b="${cpu[$o.$c]}" 'BEGIN { printf "%.2fx", a / b }')
	echo "| $p x $s B | ${cpu[hugepool.$c]:--} + ${dcpu[hugepool.$c]:--} | ${cpu[asyncio.$c]:--} | ${cpu[nio.$c]:--} | $ratio ($o) |" \
		"${rps[hugepool.$c]:--} | ${sps[hugepool.$c]:--} | ${sps[asyncio.$c]:--} | ${sps[nio.$c]:--} | ${cpu[none.$c]:--} |"
}
rows cpu_row
mfig() { [ -n "${mcpu[$1.$2]:-}" ] && [ "${mcpu[$1.$2]}" != - ] && printf "%s (%s%%)" "${mcpu[$1.$2]}" "${busy[$1.$2]}" || printf -- -; }
echo
echo "The whole machine in the measured seconds of the runs above: CPU time per durable send, in microseconds, of all"
echo "its processes and its kernel (the load generator's, the broker's, its journal's), and the share of its $(nproc) CPUs"
echo "busy. A broker that keeps the CPUs busy makes sends/s in inverse proportion to it; the last column is the most"
echo "the hugepool broker's may be for 1.5x the better Artemis journal's sends/s with the CPUs all busy:"
echo
echo "| producers x message | hugepool | Artemis ASYNCIO | Artemis NIO | no journal | 1.5x the better Artemis needs at most |"
echo "|---|---|---|---|---|---|"
machine_row() {
	local need=-
	[ "${best[$o.$c]:-0}" -gt 0 ] && need=$(awk -v r="${best[$o.$c]}" -v n="$(nproc)" 'BEGIN { printf "%.0f", n * 1e6 / 1.5 / r }')
	echo "| $p x $s B | $(mfig hugepool "$c") | $(mfig asyncio "$c") | $(mfig nio "$c") | $(mfig none "$c") | $need |"
}
rows machine_row
if [ -e "$work/hugepool.log" ] && ! grep -q 'hugepool-artemis: the message journal is hugepoold' "$work/hugepool.log"; then
	echo "bench_artemis: the hugepool broker's log does not show the plugin wiring its journals: $work/hugepool.log"
fi
exit 0
