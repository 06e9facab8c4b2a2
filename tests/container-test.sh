#!/usr/bin/env bash
# container-test.sh - the Debian packages under a real systemd, used as a user would: build them
# with dpkg-buildpackage, lint them, boot a minimal Debian 12 tree with systemd-nspawn (systemd
# as PID 1), install the packages there with apt from the local files, and drive the service
# with systemctl: READY only after the pre-fault, the daemon as the user hugepool, hugepoolctl
# for a member of the socket's group and not for anyone else, leases, a journal under the state
# directory that survives a restart, spill files under the private /var/tmp, hugepages reserved
# by hugepool-hugepages.service and given back on stop, prefer and require when they are short,
# Restart=on-failure after SIGSEGV, systemd-analyze verify and security, journalctl; the Java
# packages installed and a Java client run on them (the host's JDK bound into the container), and
# a Maven project built offline against libhugepool-java's /usr/share/maven-repo;
# the metrics: the socket-activated endpoint scraped by Debian's Prometheus (its figures, queried
# through Prometheus' HTTP API, against hugepoolctl's), its service's systemd-analyze security,
# what a user outside the socket's group reads there (no uid's figures), what the services'
# identities may do (the status, no journal), silent, garbage and non-reading scrapers, one
# user holding hundreds of connections or cycling a thousand, thousands of scrapes that leave no
# process, fd or memory behind, and the textfile collector's file. The container has a network of its
# own (--private-network: a loopback), so its ports never meet the host's; the host's curl and
# jq reach them in its network namespace.
# Part of `make check-all`; prints "container: N passed, N failed". Exits 77 (skipped, with the
# reason) when not root, when a tool is missing, when the tree cannot be built or cannot boot.
# The Debian tree (debootstrap --variant=minbase, ~80 s) is built once and kept as a tarball in
# $HUGEPOOL_TEST_CACHE (default /var/cache/hugepool-test); `--tree-only` builds it and stops
# (check-all runs that in the background, early). It takes the test suite's hugepages
# lock for the whole run, takes the free hugepages out of the kernel's pool so that the
# service's own reservation is what the daemon gets, and puts the counts back as they were.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${HUGEPOOL_TEST_CACHE:-/var/cache/hugepool-test}
# the packages the tree holds beyond minbase: systemd to boot, the daemon's libraries (the
# container has no network: apt installs the .debs from local files only), hugeadm
# Debian's prometheus, whose server scrapes the metrics endpoint
tree_include=systemd,systemd-sysv,dbus,liburing2,libaio1,libhugetlbfs-bin,prometheus
tarball=$cache/bookworm-$(echo "$tree_include" | md5sum | cut -c1-8).tar.gz
hp=/sys/kernel/mm/hugepages/hugepages-2048kB
passed=0 failed=0
work="" npid="" cpid="" cg="" pages_before="" overcommit_before=""

say() { echo "container: $*"; }
skip() { say "skipped: $*"; say "0 passed, 0 failed, 1 skipped"; exit 77; }
# stop_here WHY: what follows cannot run; a failure
stop_here() { failed=$((failed + 1)); say "cannot go on: $*"; say "$passed passed, $failed failed"; exit 1; }
check() { # check NAME COMMAND...: one test
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		passed=$((passed + 1)); echo "ok   $name"
	else
		failed=$((failed + 1)); echo "FAIL $name"; echo "$out" | tail -25 | sed 's/^/     /'
	fi
}
# c COMMAND...: run in the container (all its namespaces, as its root)
c() { nsenter -t "$cpid" -a "$@"; }
# as USER COMMAND...: run in the container as USER, with a login environment
as() { local u=$1; shift; c runuser -u "$u" -- "$@"; }

cleanup() {
	if [ -n "$cpid" ]; then
		c systemctl poweroff >/dev/null 2>&1
	fi
	if [ -n "$npid" ]; then
		for _ in $(seq 150); do kill -0 "$npid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$npid" 2>/dev/null
		wait "$npid" 2>/dev/null
	fi
	if [ -n "$cg" ]; then
		for h in systemd unified; do
			[ -d "/sys/fs/cgroup/$h/$cg" ] && find "/sys/fs/cgroup/$h/$cg" -depth -type d -exec rmdir {} + 2>/dev/null
		done
	fi
	# whatever the container did to the kernel's hugepages, the count is put back
	if [ -n "$pages_before" ]; then
		echo "$overcommit_before" > "$hp/nr_overcommit_hugepages" 2>/dev/null
		echo "$pages_before" > "$hp/nr_hugepages" 2>/dev/null
	fi
	[ -n "$work" ] && rm -rf "$work"
}
trap cleanup EXIT

# The Debian tree: from the cache, or built once into it (a lock keeps two runs from building it).
tree_build() {
	local tmp
	mkdir -p "$cache"
	exec 8>"$cache/.lock"
	flock 8
	if [ ! -s "$tarball" ]; then
		mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p; s/^deb  *\(http[^ ]*\)  *bookworm .*/\1/p' \
			/etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | grep -m1 -v security)
		[ -n "$mirror" ] || skip "no Debian mirror in /etc/apt/sources.list* to build the tree from"
		say "building the Debian tree once (debootstrap from $mirror, about 80 s) into $tarball"
		tmp=$(mktemp -d /tmp/hugepool-tree.XXXXXX)
		if ! debootstrap --variant=minbase --include="$tree_include" bookworm "$tmp/bootstrap" "$mirror" \
			>"$tmp/debootstrap.log" 2>&1; then
			tail -5 "$tmp/debootstrap.log"
			rm -rf "$tmp"
			skip "debootstrap could not build the tree (log above)"
		fi
		tar -C "$tmp/bootstrap" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball" ||
			{ rm -rf "$tmp"; skip "cannot write $tarball"; }
		rm -rf "$tmp"
	fi
	flock -u 8
}

[ "$(id -u)" -eq 0 ] || skip "not root: booting a container needs root"
# --tree-only: build the cached Debian tree (check-all does it in the background, early) and stop
if [ "${1:-}" = --tree-only ]; then
	command -v debootstrap >/dev/null || skip "debootstrap is missing"
	tree_build
	say "the Debian tree is $tarball"
	exit 0
fi
for t in systemd-nspawn debootstrap dpkg-buildpackage lintian nsenter flock cc curl jq; do
	command -v "$t" >/dev/null || skip "$t is missing (./dev.sh installs what the tests need)"
done
[ -d /sys/fs/cgroup/systemd ] && [ -d /sys/fs/cgroup/unified ] ||
	skip "no /sys/fs/cgroup/systemd and /sys/fs/cgroup/unified to give the container a cgroup of its own"
[ -d "$hp" ] || skip "no 2 MiB hugepage support in this kernel ($hp missing)"
work=$(mktemp -d /tmp/hugepool-container.XXXXXX)

# --- the packages, built from a copy of the tree (dpkg-buildpackage writes beside it) -------------
src=$work/src/hugepool-0.1.0
mkdir -p "$src"
(cd "$top" && git ls-files -co --exclude-standard 2>/dev/null || find . -path ./build -prune -o -type f -print) |
	grep -v -e '^build' -e '^\./build' | (cd "$top" && tar -cf - -T -) | tar -C "$src" -xf -
say "building the Debian packages (dpkg-buildpackage -b -us -uc)"
if ! (cd "$src" && dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1); then
	tail -30 "$work/build.log"
	check "dpkg-buildpackage -b -us -uc" false
	say "$passed passed, $failed failed"
	exit 1
fi
check "dpkg-buildpackage -b -us -uc" true
debs=$(cd "$work/src" && ls hugepool_*.deb libhugepool0_*.deb libhugepool-dev_*.deb libhugepool-java_*.deb \
	libhugepool-jni_*.deb)
# lintian: nothing but the tags debian/*.lintian-overrides explains
lintian_clean() { local out; out=$(lintian --fail-on error,warning,info,pedantic -I --pedantic "$work"/src/*.changes 2>&1 | grep -v 'running with root privileges'); [ -z "$out" ] || { echo "$out"; false; }; }
check "lintian clean (overrides explained in debian/)" lintian_clean
# Debian's Java policy for Maven users: a Maven project (tests/container/maven) resolves
# org.hugepool:hugepool from libhugepool-java's /usr/share/maven-repo, offline, its plugins from
# the local repository the package build used; the repository's jar is /usr/share/java's
maven_consumer() {
	local m=$work/maven repo=usr/share/maven-repo/org/hugepool/hugepool/0.1.0
	rm -rf "$m" && mkdir -p "$m/root" && cp -r "$top/tests/container/maven" "$m/project" &&
		dpkg-deb -x "$(ls "$work"/src/libhugepool-java_*.deb)" "$m/root" &&
		[ -f "$m/root/$repo/hugepool-0.1.0.pom" ] &&
		[ "$(readlink -f "$m/root/$repo/hugepool-0.1.0.jar")" = "$(readlink -f "$m/root/usr/share/java/hugepool.jar")" ] &&
		(cd "$m/project" && "${MVN:-mvn}" -o -B -q -Daether.offline.protocols=file -Dmaven.repo.local="$m/m2" \
			-Ddebian.repo="file://$m/root/usr/share/maven-repo" -Dplugins.repo="file://$HOME/.m2/repository" compile) &&
		[ -f "$m/project/target/classes/consumer/Uses.class" ]
}
check "a Maven project depends on org.hugepool:hugepool offline (libhugepool-java's /usr/share/maven-repo)" maven_consumer
# the client, linked against the package build's libhugepool.so.0: the packaged one runs it
cc -O2 -o "$work/hpclient" "$top/tests/container/hpclient.c" -I"$src/include" -L"$src/build" -lhugepool ||
	{ check "build the test client" false; say "$passed passed, $failed failed"; exit 1; }

# the Java client, compiled against the package build's jar; the container runs it on the host's
# JDK, bound read-only at the same path (the tree has no Java: the packages need none to install)
java=$(readlink -f "$(command -v java)" 2>/dev/null)
java_binds=()
if [ -n "$java" ] && [ "${java#/usr/lib/jvm/}" != "$java" ] && command -v javac >/dev/null; then
	mkdir -p "$work/hpjava"
	javac -d "$work/hpjava" -cp "$src/build/java/target/hugepool-0.1.0.jar" "$top/tests/container/HpJava.java" ||
		{ check "build the Java test client" false; say "$passed passed, $failed failed"; exit 1; }
	java_binds=(--bind-ro=/usr/lib/jvm)
	for d in /etc/java-*; do [ -d "$d" ] && java_binds+=("--bind-ro=$d"); done
fi

# --- the Debian tree, from the cache or built once (tree_build, above) -----------------------------
tree_build
mkdir "$work/root"
tar -C "$work/root" -xzf "$tarball" || skip "cannot unpack $tarball"
mkdir "$work/root/root/hp"
(cd "$work/src" && cp $debs "$work/root/root/hp/")
install -m 0755 "$work/hpclient" "$work/root/usr/local/bin/hpclient"
[ ${#java_binds[@]} -eq 0 ] || cp -r "$work/hpjava" "$work/root/usr/local/share/hpjava"

# --- boot: the hugepages lock first, then systemd-nspawn with systemd as PID 1 --------------------
exec 9>/tmp/hugepool-hugepages.lock
flock 9
pages_before=$(cat "$hp/nr_hugepages")
overcommit_before=$(cat "$hp/nr_overcommit_hugepages")
free_pages() { echo $(($(cat "$hp/free_hugepages") - $(cat "$hp/resv_hugepages"))); }
# no free pages for the run (the lock keeps other suites away; pages in use stay): what the
# daemon gets, hugepool-hugepages.service must reserve; put back at exit
echo $((pages_before - $(free_pages))) > "$hp/nr_hugepages"
pages_base=$(cat "$hp/nr_hugepages")
# without a host systemd nspawn must not register or make a scope (--register=no --keep-unit),
# so it gets a cgroup of its own here, removed afterwards; SYSTEMD_NSPAWN_API_VFS_WRITABLE lets
# hugepool-hugepages.service in the container change the (host's) hugepage pool, as it would
# on a machine of its own
cg=hugepool-container-$$
for h in systemd unified; do mkdir -p "/sys/fs/cgroup/$h/$cg" || skip "cannot make cgroup $h/$cg"; done
(
	for h in systemd unified; do echo "$BASHPID" > "/sys/fs/cgroup/$h/$cg/cgroup.procs"; done
	SYSTEMD_NSPAWN_API_VFS_WRITABLE=1 exec systemd-nspawn -q -D "$work/root" -M "$cg" -b --register=no \
		--keep-unit --volatile=overlay --console=pipe --private-network "${java_binds[@]}"
) >"$work/console.log" 2>&1 </dev/null &
npid=$!
# the container's PID 1: nspawn's child in another pid namespace (a short-lived helper comes first)
for _ in $(seq 100); do
	for p in $(pgrep -P "$npid"); do
		[ "$(readlink "/proc/$p/ns/pid")" != "$(readlink /proc/self/ns/pid)" ] && cpid=$p
	done
	[ -n "$cpid" ] && break
	kill -0 "$npid" 2>/dev/null || break
	sleep 0.1
done
[ -n "$cpid" ] || { tail -20 "$work/console.log"; npid=""; skip "systemd-nspawn could not boot the tree (console above)"; }
state=""
for _ in $(seq 300); do
	state=$(c systemctl is-system-running 2>/dev/null)
	case "$state" in running | degraded) break ;; esac
	sleep 0.1
done
case "$state" in running | degraded) ;; *) tail -20 "$work/console.log"; skip "systemd in the container did not come up ($state)" ;; esac
say "booted: systemd is PID 1 in the container ($state)"
[ "$state" = running ] || c systemctl --failed --no-legend

# --- the package ----------------------------------------------------------------------------------
check "apt install the packages from local files" c env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -q $(printf '/root/hp/%s ' $debs)
c dpkg-query -W hugepool >/dev/null 2>&1 || stop_here "the packages are not installed"
system_user() { c getent passwd hugepool | grep '^hugepool:x:[0-9]\{1,3\}:'; }
check "the system user hugepool exists (sysusers.d)" system_user
not_started() { [ "$(c systemctl is-enabled hugepoold)" = disabled ] && ! c systemctl -q is-active hugepoold hugepool-hugepages; }
check "installing neither enables nor starts hugepoold" not_started
metrics_off() {
	local u
	for u in hugepool-metrics.socket hugepool-metrics-textfile.timer; do
		echo "$u: $(c systemctl is-enabled $u), $(c systemctl is-active $u)"
		[ "$(c systemctl is-enabled $u)" = disabled ] && ! c systemctl -q is-active $u || return 1
	done
}
check "nor the metrics endpoint's socket, nor the textfile timer" metrics_off
check "the group hugepool-monitor exists (sysusers.d)" c getent group hugepool-monitor
conffile() { c dpkg-query -W -f='${Conffiles}' hugepool | grep -q /etc/hugepool/hugepoold.conf && c hugepoold --check-config; }
check "the shipped configuration is a conffile and valid" conffile
# the tree has no man-db, so the units' Documentation=man:... cannot be looked up there
verify() {
	local out
	out=$(c systemd-analyze verify hugepoold.service hugepool-hugepages.service 2>&1 | grep -v "Command 'man .*' failed with code 1")
	[ -z "$out" ] || { echo "$out"; false; }
}
check "systemd-analyze verify is silent on both units" verify
exposure=$(c systemd-analyze security hugepoold.service 2>/dev/null | sed -n 's/.*Overall exposure level for hugepoold.service: *\([0-9.]*\).*/\1/p')
say "systemd-analyze security hugepoold.service: exposure ${exposure:-unknown}"
check "systemd-analyze security: exposure ${exposure:-unknown} <= 2.0" awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 2.0) }'

# a small pool for the test: 8 x 2 MiB + 2 x 8 MiB = 16 pages of 2 MiB; a journal in its default
# directory (under StateDirectory=)
need=16
c sh -c 'cat > /etc/hugepool/hugepoold.conf' <<'CONF'
# hugepoold.conf of tests/container-test.sh
hugepages = prefer
monitor_group = hugepool-monitor
# alice's spill file of 3000000 bytes is 91% of it: hugepoolctl(1)'s alert fires (pending)
spill_max_bytes_per_uid = 3300000
[class small]
size = 2M
count = 8
[class large]
size = 8M
count = 2
[journal orders]
segment_size = 1M
segments = 2
CONF
print_hugepages() { local out; out=$(c hugepoold --print-hugepages); echo "$out"; [ "$out" = "$need 2097152" ]; }
check "--print-hugepages of the test configuration" print_hugepages
c useradd -m -G hugepool alice
c useradd -m bob

# --- start: hugepages reserved first, READY only after the pre-fault ------------------------------
free0=$(free_pages)
check "systemctl start hugepoold" c systemctl start hugepoold
mainpid=$(c systemctl show -P MainPID hugepoold)
[ "$mainpid" -gt 1 ] 2>/dev/null || stop_here "hugepoold did not start: $(c journalctl -b -u hugepoold -u hugepool-hugepages -o cat | tail -5)"
check "hugepool-hugepages.service ran first and stays active" c systemctl -q is-active hugepool-hugepages
pages_started=$(cat "$hp/nr_hugepages")
reserved_ok() { # the oneshot added what was missing, or said the kernel was short
	local short=$((need - free0)) added=$((pages_started - pages_base))
	[ "$short" -lt 0 ] && short=0
	if [ "$added" -eq "$short" ]; then return 0; fi
	c journalctl -b -u hugepool-hugepages -o cat | grep 'could add only' || { echo "free $free0, need $need, added $added"; false; }
}
check "the shortfall was reserved with hugeadm (nr_hugepages $pages_base -> $pages_started, $free0 were free)" reserved_ok
backing_ok() { # hugetlb when the pages were there; otherwise the daemon fell back and says why
	local st; st=$(as alice hugepoolctl status)
	if [ $((free0 + pages_started - pages_base)) -ge "$need" ]; then
		grep -q 'Backing: *hugetlb pages' <<<"$st" || { echo "$st"; false; }
	else
		grep -q 'fallback' <<<"$st" || { echo "$st"; false; }
	fi
}
check "the pool is backed by hugetlb pages when they could be reserved" backing_ok
ready_after_prefault() { # active from READY=1 on: no sooner after the start than the pre-fault took
	local start active prefault
	start=$(c systemctl show -P ExecMainStartTimestampMonotonic hugepoold)
	active=$(c systemctl show -P ActiveEnterTimestampMonotonic hugepoold)
	prefault=$(as alice hugepoolctl status --json | sed -n 's/.*"prefault_s":\([0-9.e+-]*\).*/\1/p')
	echo "started at $start us, active at $active us, pre-fault took $prefault s;" \
	     "status: $(c systemctl show -P StatusText hugepoold)"
	c systemctl show -P StatusText hugepoold | grep -q '^Serving ' &&
		awk -v s="$start" -v a="$active" -v p="$prefault" 'BEGIN { exit !(p > 0 && a - s >= p * 1e6) }'
}
check "active (READY=1) only after the pre-fault (Type=notify)" ready_after_prefault
unprivileged() { # (MainPID is a pid of the container's namespace: look from inside)
	local st; st=$(c cat "/proc/$mainpid/status")
	grep -e '^Uid:' -e '^CapEff:' <<<"$st" &&
		grep -q "^Uid:[[:space:]]*$(c id -u hugepool)[[:space:]]" <<<"$st" && grep -q '^CapEff:[[:space:]]*0*$' <<<"$st"
}
check "the daemon runs as hugepool, with no capabilities" unprivileged
check "hugepoolctl status as alice, a member of the socket's group" as alice hugepoolctl status
check "hugepoolctl status refused to bob, who is not" sh -c "! nsenter -t $cpid -a runuser -u bob -- hugepoolctl status"
check "a client of alice leases buffers" as alice hpclient lease small 3
check "and large ones" as alice hpclient lease large 2
check "journal appends as alice, durable" as alice hpclient append orders 5
if [ ${#java_binds[@]} -gt 0 ]; then
	java_client() {
		local out; out=$(as alice "$java" -cp /usr/share/java/hugepool.jar:/usr/local/share/hpjava HpJava small 2 orders)
		echo "$out"; grep -q '^java: 2 buffers of 2097152 bytes, record at LSN [0-9]' <<<"$out"
	}
	check "a Java client of alice leases and appends (libhugepool-java, its JNI library found in jni/)" java_client
else
	say "no JDK under /usr/lib/jvm: the Java client is not run"
fi
journal_dir_ok() {
	c sh -c 'stat -c "%U %a %n" /var/lib/hugepool /var/lib/hugepool/orders /var/lib/hugepool/orders/*' | tee /dev/stderr |
		awk '$1 != "hugepool" { bad = 1 } $2 !~ /^[67]00$/ { bad = 1 } END { exit bad || NR < 3 }'
}
check "the journal lives in the state directory, the daemon's, 0700/0600" journal_dir_ok
spill_ok() { # while a client holds a spill file, it is in the daemon's private /var/tmp
	local line out
	coproc SPILL { nsenter -t "$cpid" -a runuser -u alice -- hpclient spill 3000000; }
	read -r line <&"${SPILL[0]}"
	echo "client: $line"
	out=$(c ls -l "/proc/$mainpid/fd" | grep '/var/tmp/hugepool/')
	echo "daemon's fds: $out"
	c nsenter -t "$mainpid" -m test -d /var/tmp/hugepool && ! c test -e /var/tmp/hugepool &&
		[ -n "$out" ] && as alice hugepoolctl spill | grep -q 'Directory: */var/tmp/hugepool' || { exec {SPILL[1]}>&-; wait; false; return; }
	exec {SPILL[1]}>&-
	read -r line <&"${SPILL[0]}"
	echo "client: $line"
	wait "$SPILL_PID" && [ "$line" = "read back 3000000 bytes" ]
}
check "spill files live in the service's private /var/tmp" spill_ok

# --- metrics: the socket-activated endpoint, a real Prometheus, the textfile collector -------------
# host tools in the container's network namespace (its own loopback: --private-network)
scrape() { nsenter -t "$cpid" -n curl -sS -m 20 "$@"; }
# a client of alice holds 3 small buffers and a spill file while the figures are compared
coproc MHOLD { nsenter -t "$cpid" -a runuser -u alice -- hpclient hold small 3; }
mhold_pid=$MHOLD_PID
read -r line <&"${MHOLD[0]}"
echo "client: $line"
# (bash has one coproc at a time: this one reads a fifo the test holds open)
mkfifo "$work/mspill.in"
nsenter -t "$cpid" -a runuser -u alice -- hpclient spill 3000000 <"$work/mspill.in" >"$work/mspill.out" &
mspill_pid=$!
exec {mspill_in}>"$work/mspill.in"
for _ in $(seq 100); do [ -s "$work/mspill.out" ] && break; sleep 0.1; done
echo "client: $(head -1 "$work/mspill.out")"
check "systemctl enable --now hugepool-metrics.socket" c systemctl enable --now hugepool-metrics.socket
units_verified() {
	local out
	out=$(c systemd-analyze verify hugepool-metrics.socket hugepool-metrics.service hugepool-metrics-textfile.service \
		hugepool-metrics-textfile.timer 2>&1 | grep -v "Command 'man .*' failed with code 1")
	[ -z "$out" ] || { echo "$out"; false; }
}
check "systemd-analyze verify is silent on the metrics units" units_verified
m_exposure=$(c systemd-analyze security hugepool-metrics.service 2>/dev/null |
	sed -n 's/.*Overall exposure level for hugepool-metrics.service: *\([0-9.]*\).*/\1/p')
say "systemd-analyze security hugepool-metrics.service: exposure ${m_exposure:-unknown}"
check "systemd-analyze security of the endpoint's service: exposure ${m_exposure:-unknown} <= 2.0" \
	awk -v e="${m_exposure:-99}" 'BEGIN { exit !(e <= 2.0) }'
endpoint_ok() {
	local out; out=$(scrape -D - http://127.0.0.1:10864/metrics)
	grep -i -e '^HTTP/' -e '^content-type' <<<"$out"
	grep -q '^hugepool_up 1' <<<"$out" && grep -qi '^content-type: text/plain; version=0.0.4' <<<"$out" &&
		grep -q '^hugepool_class_leased_buffers{class="small"} 3' <<<"$out"
}
check "GET http://127.0.0.1:10864/metrics: the pool's figures, in the text format" endpoint_ok
# issue 39, finding 1: bob, outside the socket's group (his hugepoolctl status is refused), reads the
# endpoint: the figures that name nobody, and neither alice's spill figures nor the machine's totals
names_nobody_ok() {
	local out
	! as bob hugepoolctl status >/dev/null 2>&1 || { echo "bob may use the daemon's socket"; return 1; }
	out=$(nsenter -t "$cpid" -n setpriv --reuid="$(c id -u bob)" --regid="$(c id -g bob)" --clear-groups \
		curl -sS -m 20 http://127.0.0.1:10864/metrics) || return 1
	grep -e '^hugepool_scrape_sees_all_uids' -e '^hugepool_spill_' -e '^hugepool_class_leased_buffers' <<<"$out"
	grep -q '^hugepool_class_leased_buffers{class="small"} 3' <<<"$out" &&
		grep -q '^hugepool_scrape_sees_all_uids 0' <<<"$out" && ! grep -q -e '^hugepool_spill_uid_files{' \
		-e '^hugepool_spill_uid_bytes{' -e '^hugepool_spill_bytes ' -e '^hugepool_spill_files ' -e '^hugepool_spill_memory_' <<<"$out"
}
check "any local user (bob, outside the socket's group) reads no figure that names a uid" names_nobody_ok
# finding 8: the services' identities may read the status and nothing else (they were in the
# socket's group, every journal's default access list): as each unit's user and groups
as_unit() { # as_unit UNIT COMMAND...: run COMMAND with UNIT's user and supplementary groups
	local u=$1 user groups
	shift
	user=$(c systemctl show -P User "$u") groups=$(c systemctl show -P SupplementaryGroups "$u")
	[ -n "$user" ] || { echo "$u has no User= (no such unit?): not run as root instead"; return 1; }
	if [ "$(c systemctl show -P DynamicUser "$u")" = yes ]; then
		c systemd-run --wait --pipe -q -p DynamicUser=yes -p User="$user-probe" -p SupplementaryGroups="$groups" "$@"
	else
		c systemd-run --wait --pipe -q -p User="$user" -p SupplementaryGroups="$groups" "$@"
	fi
}
identity_ok() {
	local u out
	for u in hugepool-metrics.service hugepool-metrics-textfile.service; do
		echo "$u: $(c systemctl show -P User "$u"), groups $(c systemctl show -P SupplementaryGroups "$u")"
		as_unit "$u" hugepoolctl status >/dev/null || { echo "$u: no status"; return 1; }
		out=$(as_unit "$u" hugepoolctl journal dump orders 2>&1) && { echo "$u: journal dump: $out"; return 1; }
		grep -q 'may ask for the status and nothing else' <<<"$out" || { echo "$u: journal dump: $out"; return 1; }
		out=$(as_unit "$u" hugepoolctl journal truncate orders 2 2>&1) && { echo "$u: journal truncate: $out"; return 1; }
		grep -q 'may ask for the status and nothing else' <<<"$out" || { echo "$u: journal truncate: $out"; return 1; }
	done
	[ "$(c hugepoolctl journal list --json | jq -r '.journals[0].retain_lsn')" -le 1 ]
}
check "the metrics services' identities get the status, and neither dump nor truncate a journal" identity_ok
om_ok() {
	local out; out=$(scrape -D - -H 'Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5' http://127.0.0.1:10864/metrics)
	grep -qi '^content-type: application/openmetrics-text; version=1.0.0' <<<"$out" && [ "$(tail -1 <<<"$out")" = "# EOF" ]
}
check "Accept: application/openmetrics-text: OpenMetrics, ending in # EOF" om_ok
statuses_ok() {
	local a b c2 d
	a=$(scrape -o /dev/null -w '%{http_code}' http://127.0.0.1:10864/)
	b=$(scrape -o /dev/null -w '%{http_code}' -X POST http://127.0.0.1:10864/metrics)
	c2=$(nsenter -t "$cpid" -n bash -c 'exec 3<>/dev/tcp/127.0.0.1/10864; printf "\026\003\001 no request\r\n\r\n" >&3; head -1 <&3' | tr -d '\r')
	d=$(scrape -o /dev/null -w '%{http_code}' -I http://127.0.0.1:10864/metrics)
	echo "/: $a, POST: $b, garbage: $c2, HEAD: $d"
	[ "$a" = 404 ] && [ "$b" = 405 ] && [ "$c2" = "HTTP/1.1 400 Bad Request" ] && [ "$d" = 200 ]
}
check "another path 404, another method 405, garbage 400, HEAD 200" statuses_ok

# Debian's Prometheus scrapes it, every second, as it would a fleet's machine, and evaluates the
# alerting rules hugepoolctl(1) gives (its EX block, unescaped); the service serves every uid's
# figures here, as an administrator's drop-in adding --uids makes it (hugepoold(8), MONITORING)
uids_dropin() {
	c mkdir -p /etc/systemd/system/hugepool-metrics.service.d &&
		printf '[Service]\nExecStart=\nExecStart=/usr/bin/hugepoolctl metrics --http --uids\n' |
		c sh -c 'cat > /etc/systemd/system/hugepool-metrics.service.d/uids.conf' &&
		c systemctl daemon-reload && c systemctl restart hugepool-metrics.service &&
		scrape http://127.0.0.1:10864/metrics | grep "^hugepool_spill_uid_files{uid=\"$(c id -u alice)\"} 1"
}
check "a drop-in adding --uids: the endpoint serves alice's spill figures" uids_dropin
sed -n '/^\.SS Alerting rules/,/^\.EE/p' "$top/man/hugepoolctl.1" | sed -e '1,/^\.EX/d' -e '/^\.EE/d' -e 's/\\-/-/g' |
	c sh -c 'cat > /etc/prometheus/hugepool.rules.yml'
c sh -c 'cat > /etc/prometheus/prometheus.yml' <<'YML'
# prometheus.yml of tests/container-test.sh
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - /etc/prometheus/hugepool.rules.yml
scrape_configs:
  - job_name: hugepool
    static_configs:
      - targets: ['127.0.0.1:10864']
YML
check "systemctl restart prometheus (Debian's package) with the hugepool job" c systemctl restart prometheus
# prom_query QUERY: the value of the first sample Prometheus' HTTP API returns for QUERY, or nothing
prom_query() { scrape -G --data-urlencode "query=$1" http://127.0.0.1:9090/api/v1/query | jq -r '.data.result[0].value[1] // empty'; }
prom_up() {
	local v
	for _ in $(seq 120); do
		v=$(prom_query 'up{job="hugepool"} * hugepool_up')
		[ "$v" = 1 ] && return 0
		sleep 0.5
	done
	scrape http://127.0.0.1:9090/api/v1/targets | jq -c '.data.activeTargets[] | {health, lastError}'
	false
}
check "Prometheus scrapes the endpoint (up and hugepool_up are 1)" prom_up
# figure QUERY EXPECTED: Prometheus comes to say EXPECTED within a few scrapes
figure() {
	local v
	for _ in $(seq 20); do
		v=$(prom_query "$1")
		[ "$v" = "$2" ] && { echo "$1 = $v"; return 0; }
		sleep 0.5
	done
	echo "$1: Prometheus says '$v', hugepoolctl status --json says '$2'"; false
}
figures_match() {
	local st js sp cls f
	st=$(c hugepoolctl status --json) && js=$(c hugepoolctl journal list --json) && sp=$(c hugepoolctl spill --json) || return 1
	for cls in small large; do
		for f in total:buffers free:free_buffers leased:leased_buffers waiters:waiters; do
			figure "hugepool_class_${f#*:}{class=\"$cls\"}" \
				"$(jq -r ".classes[] | select(.name == \"$cls\") | .${f%%:*}" <<<"$st")" || return 1
		done
	done
	figure 'hugepool_journal_durable_lsn{journal="orders"}' "$(jq -r '.journals[0].durable_lsn' <<<"$js")" &&
		figure 'hugepool_journal_state{journal="orders",state="ok"}' 1 &&
		figure 'hugepool_spill_bytes' "$(jq -r '.bytes' <<<"$sp")" &&
		figure 'hugepool_spill_files' "$(jq -r '.files' <<<"$sp")" &&
		figure 'hugepool_pool_bytes' "$(jq -r '.pool_bytes' <<<"$st")" &&
		figure 'hugepool_lives' "$(jq -r '.start.lives' <<<"$st")"
}
check "Prometheus' /api/v1/query returns the figures of hugepoolctl status --json" figures_match
om_scraped() { # Prometheus asked for OpenMetrics, whose info type the text format does not have
	local t; t=$(scrape 'http://127.0.0.1:9090/api/v1/metadata?metric=hugepool_exporter_build' | jq -r '.data.hugepool_exporter_build[0].type // empty')
	echo "metadata type of hugepool_exporter_build: $t"; [ "$t" = info ]
}
check "Prometheus negotiated OpenMetrics (hugepool_exporter_build is an info)" om_scraped
quantile_ok() { # a histogram through PromQL: the acquire wait of alice's grants
	# within a few scrapes, as figure: one scrape that failed on a loaded machine (up 0) marks
	# every series stale until the next, and an instant query finds none then
	local v
	for _ in $(seq 20); do
		v=$(prom_query 'histogram_quantile(0.5, sum by (le) (hugepool_class_acquire_wait_seconds_bucket{class="small"}))')
		[ -n "$v" ] && [ "$v" != NaN ] && break
		sleep 0.5
	done
	echo "median acquire wait: $v s"; [ -n "$v" ] && [ "$v" != NaN ]
}
check "histogram_quantile() over hugepool_class_acquire_wait_seconds" quantile_ok
alerts_ok() { # every rule evaluates on real series; alice's spill is over 90% of her limit, nothing else
	local bad alerts
	for _ in $(seq 40); do
		bad=$(scrape http://127.0.0.1:9090/api/v1/rules | jq -r '[.data.groups[].rules[] | select(.health != "ok") | .name] | join(" ")')
		alerts=$(scrape http://127.0.0.1:9090/api/v1/alerts | jq -r '[.data.alerts[] | .labels.alertname + ":" + .state] | sort | join(" ")')
		[ -z "$bad" ] && [ "$alerts" = "HugepoolSpillUidNearLimit:pending" ] && { echo "alerts: $alerts"; return 0; }
		sleep 0.5
	done
	echo "rules not evaluated or in error: '$bad'; alerts: '$alerts'"; false
}
check "hugepoolctl(1)'s alerting rules: all evaluate, HugepoolSpillUidNearLimit pending for alice" alerts_ok
c systemctl stop prometheus # its scrapes would mix with the counts below
c rm -r /etc/systemd/system/hugepool-metrics.service.d
c systemctl daemon-reload
c systemctl restart hugepool-metrics.service

# scrapers that are silent, send garbage or never read, and one local user holding or cycling
# connections: one service process serves them all, and nothing of the daemon's is held
mainpid=$(c systemctl show -P MainPID hugepoold)
mpid() { c systemctl show -P MainPID hugepool-metrics.service; }
daemon_fds() { c sh -c "ls /proc/$mainpid/fd | wc -l"; }
daemon_conns() { c hugepoolctl stats --json | jq -r '.server.connections'; }
service_fds() { c sh -c "ls /proc/$(mpid)/fd | wc -l"; }
# the service's connections back to none (a lingering one closes within 1 s, any within 10 s)
service_idle() { local f0=$1; for _ in $(seq 120); do [ "$(service_fds)" -le "$f0" ] && return 0; sleep 0.1; done; false; }
scrape_ok() { [ "$(scrape -o /dev/null -m 5 -w '%{http_code}' http://127.0.0.1:10864/metrics)" = 200 ]; }
pid0=$(mpid) sfds0=$(service_fds)
silent_ok() {
	local fds0 conns0 line
	fds0=$(daemon_fds) conns0=$(daemon_conns)
	line=$(nsenter -t "$cpid" -n bash -c 'exec 3<>/dev/tcp/127.0.0.1/10864; head -1 <&3' | tr -d '\r')
	echo "silent scraper: answered '$line'; daemon fds $fds0 -> $(daemon_fds), connections $conns0 -> $(daemon_conns)" |
		tee "$work/silent.txt"
	[ "$line" = "HTTP/1.1 408 Request Timeout" ] && [ "$(daemon_fds)" = "$fds0" ] && [ "$(daemon_conns)" = "$conns0" ]
}
check "a scraper that connects and says nothing: 408 after 10 s, no daemon connection" silent_ok
garbage_ok() {
	local fds0 total0 total1
	fds0=$(daemon_fds) total0=$(c hugepoolctl stats --json | jq -r .connections_total)
	for _ in $(seq 10); do
		nsenter -t "$cpid" -n bash -c 'exec 3<>/dev/tcp/127.0.0.1/10864; head -c 20000 /dev/urandom | tr -d "\n" >&3; cat <&3 >/dev/null' 2>/dev/null
	done
	total1=$(c hugepoolctl stats --json | jq -r .connections_total)
	echo "10 garbage scrapers: daemon connections accepted $total0 -> $total1 (the second count's own), fds $fds0 -> $(daemon_fds)" |
		tee "$work/garbage.txt"
	[ "$total1" = $((total0 + 1)) ] && [ "$(daemon_fds)" = "$fds0" ]
}
check "scrapers that send garbage: answered 400, never a daemon connection" garbage_ok
noread_ok() {
	local conns0=$(daemon_conns)
	nsenter -t "$cpid" -n bash -c 'exec 3<>/dev/tcp/127.0.0.1/10864; printf "GET /metrics HTTP/1.1\r\n\r\n" >&3; sleep 3' &
	sleep 1
	echo "a scraper that never reads: daemon connections $conns0 -> $(daemon_conns)"
	[ "$(daemon_conns)" = "$conns0" ] && scrape_ok || { wait; return 1; }
	wait
}
check "a scraper that asks and never reads: the daemon's connection was already closed, others answered" noread_ok
# issue 39, finding 3: silent connections from 127.0.0.2-5 (any local user may bind them), more
# than the endpoint keeps, held by bob: every scrape still answered (systemd's MaxConnections=16
# answered none)
held_ok() {
	local line n=0
	coproc TCPHOLD { nsenter -t "$cpid" -a runuser -u bob -- hpclient tcp-hold 10864 300; }
	read -r line <&"${TCPHOLD[0]}"
	for _ in $(seq 25); do scrape_ok && n=$((n + 1)); done
	exec {TCPHOLD[1]}>&-
	wait "$TCPHOLD_PID"
	echo "bob: $line; scrapes answered meanwhile: $n of 25" | tee "$work/held.txt"
	[ "$line" = "holding 300 connections" ] && [ "$n" = 25 ]
}
check "bob holds 300 silent connections: 25 of 25 scrapes answered" held_ok
# finding 4: a burst of connections opened and closed stops nothing (it tripped the trigger limit)
burst_ok() {
	local out; out=$(as bob hpclient tcp-burst 10864 1000) || return 1
	echo "bob: $out; socket $(c systemctl show -P ActiveState hugepool-metrics.socket), service pid $pid0 -> $(mpid)" |
		tee "$work/burst.txt"
	[ "$(c systemctl show -P ActiveState hugepool-metrics.socket)" = active ] && [ "$(mpid)" = "$pid0" ] && scrape_ok
}
check "bob opens and closes 1000 connections at once: the socket stays, the same service answers" burst_ok

# thousands of scrapes leave no process, no fd and no daemon memory behind
# the container's processes but systemd-userdbd's workers (comm "systemd-userwor"), which
# DynamicUser= lookups start and which idle for up to a minute before they exit
proc_names() { c sh -c 'for p in /proc/[0-9]*; do echo "$(cat $p/comm 2>/dev/null)"; done' | grep -v '^systemd-userwor' | sort; }
proc_count() { proc_names | wc -l; }
rss_kib() { c awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
many_scrapes() {
	local n=2000 procs0 names0 fds0 rss0 srss0 codes t0 t1
	service_idle "$sfds0" || { echo "the service's fds: $(service_fds), $sfds0 at first"; return 1; }
	procs0=$(proc_count) names0=$(proc_names) fds0=$(daemon_fds) rss0=$(rss_kib "$mainpid") srss0=$(rss_kib "$(mpid)")
	t0=$(date +%s.%N)
	codes=$(nsenter -t "$cpid" -n sh -c "for i in \$(seq $n); do curl -s -o /dev/null -m 20 -w '%{http_code}\n' http://127.0.0.1:10864/metrics; done" | sort | uniq -c)
	t1=$(date +%s.%N)
	service_idle "$sfds0"
	{
		echo "$n scrapes in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s: $(echo $codes)"
		echo "processes $procs0 -> $(proc_count); daemon fds $fds0 -> $(daemon_fds), RSS $rss0 -> $(rss_kib "$mainpid") KiB;" \
			"the service's fds $sfds0 -> $(service_fds), RSS $srss0 -> $(rss_kib "$(mpid)") KiB, pid $pid0 -> $(mpid);" \
			"failed units: $(c systemctl list-units --failed --no-legend | grep -c hugepool-metrics);" \
			"new processes: $(diff <(echo "$names0") <(proc_names) | sed -n 's/^> //p' | tr '\n' ' ')"
	} | tee "$work/many.txt"
	[ "$(echo $codes)" = "$n 200" ] && [ "$(proc_count)" -le "$procs0" ] && [ "$(daemon_fds)" = "$fds0" ] &&
		[ $(($(rss_kib "$mainpid") - rss0)) -le 1024 ] && [ "$(service_fds)" -le "$sfds0" ] &&
		[ $(($(rss_kib "$(mpid)") - srss0)) -le 1024 ] && [ "$(mpid)" = "$pid0" ] &&
		[ "$(c systemctl list-units --failed --no-legend | grep -c hugepool-metrics)" = 0 ]
}
check "2000 scrapes: all 200, no process, fd or memory left behind" many_scrapes
for f in silent garbage held burst many; do [ -s "$work/$f.txt" ] && sed 's/^/container: /' "$work/$f.txt"; done
c systemctl disable --now hugepool-metrics.socket

# node_exporter's textfile collector: its directory as prometheus-node-exporter makes it
c install -d -o prometheus -g prometheus -m 0755 /var/lib/prometheus/node-exporter
textfile_ok() {
	local f=/var/lib/prometheus/node-exporter/hugepool.prom out
	c systemctl start hugepool-metrics-textfile.service || return 1
	c stat -c '%U %a %n' "$f" && out=$(c cat "$f") &&
		[ "$(c stat -c '%U %a' "$f")" = "prometheus 600" ] && grep -q '^hugepool_up 1' <<<"$out" &&
		grep -q '^hugepool_scrape_sees_all_uids 0' <<<"$out" && [ "$(c ls -A /var/lib/prometheus/node-exporter)" = hugepool.prom ]
}
check "hugepool-metrics-textfile.service writes hugepool.prom (prometheus's, 0600, no uid named, nothing else left)" textfile_ok
timer_ok() {
	local m0 m1
	m0=$(c stat -c %Y.%y /var/lib/prometheus/node-exporter/hugepool.prom)
	c systemctl enable --now hugepool-metrics-textfile.timer || return 1
	for _ in $(seq 40); do
		m1=$(c stat -c %Y.%y /var/lib/prometheus/node-exporter/hugepool.prom)
		[ "$m1" != "$m0" ] && return 0
		sleep 0.5
	done
	false
}
check "hugepool-metrics-textfile.timer refreshes it" timer_ok
c systemctl disable --now hugepool-metrics-textfile.timer
exec {MHOLD[1]}>&- {mspill_in}>&-
wait "$mhold_pid" "$mspill_pid"

# --- restart: warm (the pool, the leases and the connection live on), the journal keeps its records,
# and the pages are taken back, not reserved twice ---------------------------------------------------
# warm_life N: the journal says the daemon's life N started warm
warm_life() { c journalctl -b -u hugepoold -o cat | grep "Warm start (life $1)" || { c journalctl -b -u hugepoold -o cat | tail -5; false; }; }
coproc HOLD { nsenter -t "$cpid" -a runuser -u alice -- hpclient hold small 2; }
hold_pid=$HOLD_PID # (bash unsets HOLD_PID when the client ends)
read -r held <&"${HOLD[0]}"
echo "client: $held"
sock_ino=$(c stat -c %i /run/hugepool/hugepoold.sock)
check "systemctl restart hugepoold" c systemctl restart hugepoold
check "the restart was warm (life 2: the pool adopted from the fd store)" warm_life 2
# RuntimeDirectoryPreserve=restart: the socket stays where clients connect, taken over, not bound anew
same_socket() {
	local now; now=$(c stat -c %i /run/hugepool/hugepoold.sock)
	echo "socket inode $sock_ino -> $now"
	[ "$now" = "$sock_ino" ] && ! c journalctl -b -u hugepoold -o cat | grep "binding anew"
}
check "the listening socket was taken over from the fd store, not bound anew" same_socket
exec {HOLD[1]}>&- # (here: check runs its command in a subshell) the client goes on
held_on() { # the client sees a pause, not a disconnect: same connection, same leases, same bytes
	local line out=""
	while read -r line <&"${HOLD[0]}"; do out+="$line"$'\n'; done
	echo "$out"
	grep -q 'released 2 buffers on the same connection' <<<"$out" # (printed only when all went well)
}
check "a client holding leases kept its connection and its buffers across the restart" held_on
wait "$hold_pid"
journal_kept() { as alice hugepoolctl journal verify orders && [ "$(as alice hugepoolctl journal dump orders | grep -c 'record [1-5]')" = 5 ]; }
check "the journal survived the restart with its 5 records" journal_kept
check "and takes more" as alice hpclient append orders 2
pages_kept() { # the oneshot gave its pages back and reserved again: the same ones, now in use
	local now; now="$(cat $hp/nr_hugepages) $(cat $hp/surplus_hugepages)"
	[ "$now" = "$pages_started 0" ] || { echo "nr_hugepages, surplus: $now"; c journalctl -b -u hugepool-hugepages -o cat | tail -4; false; }
}
check "a restart takes back the pages the pool kept, not twice (nr_hugepages $pages_started, surplus 0)" pages_kept

# --- reload: the next life takes over beside the running one (restart = auto under systemd), and
# systemd follows it (MAINPID=): a new main process, the old one gone, warm -----------------------
mainpid=$(c systemctl show -P MainPID hugepoold)
# taken_over OLD NEW: the life taken over (OLD) said so and ended; it releases what it held after
# the hand-over (its journals' I/O queues take tens of ms), so after the restart was answered
taken_over() {
	for _ in $(seq 100); do
		! c kill -0 "$1" 2>/dev/null && c journalctl -b -u hugepoold -o cat | grep -q "Taken over by pid $2" && return 0
		sleep 0.1
	done
	echo "pid $1 still there, or no 'Taken over by pid $2'"; false
}
reloaded() {
	local now
	c systemctl reload hugepoold || return 1
	now=$(c systemctl show -P MainPID hugepoold)
	[ "$now" != "$mainpid" ] && [ "$now" != 0 ] && [ "$(c systemctl show -P ActiveState hugepoold)" = active ] &&
		warm_life 3 && taken_over "$mainpid" "$now"
}
check "systemctl reload: taken over by a new main process that systemd follows, warm (life 3)" reloaded
mainpid=$(c systemctl show -P MainPID hugepoold)
# LimitNICE=+0: the next life prepared idle (SCHED_IDLE, nice 19) and every thread is back at the
# unit's priority (SCHED_OTHER, nice 0; fields 19 and 41 of /proc/PID/task/TID/stat). Where the
# container's systemd cannot raise RLIMIT_NICE (no CAP_SYS_RESOURCE, as in some sandboxes) the
# daemon must see that and prepare at its own priority instead, and say so.
idle_then_back() {
	local parts limit
	parts=$(c journalctl -b -u hugepoold -o cat | grep "Restart parts" | tail -1)
	limit=$(c awk '/^Max nice priority/ { print $4 }' "/proc/$mainpid/limits")
	if [ "${limit:-0}" -ge 20 ]; then
		echo "$parts" | grep -q "; prepared idle" || { echo "RLIMIT_NICE $limit: $parts"; return 1; }
	else
		echo "$parts" | grep -q "; prepared at the daemon's priority" || { echo "RLIMIT_NICE $limit: $parts"; return 1; }
	fi
	c sh -c "cat /proc/$mainpid/task/*/stat" | sed 's/.*) //' |
		awk '{ n++; if ($17 != 0 || $39 != 0) { bad++; print "nice " $17 ", policy " $39 } }
		     END { exit !(n > 0 && bad == 0) }'
}
check "the next life prepared idle where LimitNICE=+0 took effect, and serves at the unit's priority (SCHED_OTHER, nice 0)" idle_then_back
# a reload the next life would not survive (a broken configuration) is refused before anything
# stops: the same process serves on, its life unchanged, and the log says why
refused_reload() {
	c cp /etc/hugepool/hugepoold.conf /etc/hugepool/hugepoold.conf.good
	echo "no_such_key = 1" | c tee -a /etc/hugepool/hugepoold.conf >/dev/null
	! c systemctl reload hugepoold; local rc=$?
	c mv /etc/hugepool/hugepoold.conf.good /etc/hugepool/hugepoold.conf
	[ "$rc" = 0 ] && [ "$(c systemctl show -P MainPID hugepoold)" = "$mainpid" ] &&
		[ "$(c systemctl show -P ActiveState hugepoold)" = active ] && as alice hpclient lease small 1 &&
		c journalctl -b -u hugepoold -o cat | grep "Refusing the restart" | grep -q no_such_key
}
check "systemctl reload with a broken configuration: refused, the daemon serves on" refused_reload
check "and is not re-executed by it (still life 3)" warm_life 3

# --- SIGSEGV: Restart=on-failure brings it back ----------------------------------------------------
mainpid=$(c systemctl show -P MainPID hugepoold)
[ "$mainpid" -gt 1 ] 2>/dev/null || stop_here "hugepoold is not running after the restart"
c sh -c "kill -SEGV $mainpid"
restarted() {
	local pid st
	for _ in $(seq 300); do
		pid=$(c systemctl show -P MainPID hugepoold)
		st=$(c systemctl show -P ActiveState hugepoold)
		[ "$pid" != 0 ] && [ "$pid" != "$mainpid" ] && [ "$st" = active ] && break
		sleep 0.1
	done
	echo "MainPID $mainpid -> $pid, $st, NRestarts $(c systemctl show -P NRestarts hugepoold)"
	[ "$st" = active ] && [ "$pid" != "$mainpid" ] && [ "$(c systemctl show -P NRestarts hugepoold)" = 1 ] &&
		c journalctl -b -u hugepoold -o cat | grep -q 'status=11/SEGV'
}
check "kill -SEGV: Restart=on-failure brings the daemon back" restarted
check "warm (life 4): the pool outlived the crash in the fd store" warm_life 4
check "and no page was reserved twice (nr_hugepages $pages_started, surplus 0)" pages_kept
check "after which alice leases again" as alice hpclient lease small 8
boot_lines() { # three processes so far: the first, the restart, the one after SIGSEGV
	local log; log=$(c journalctl -b -u hugepoold -o cat)
	[ "$(grep -c 'hugepoold 0.1.0 starting' <<<"$log")" -ge 3 ] && grep 'Pre-faulted' <<<"$log" || { echo "$log" | tail; false; }
}
check "journalctl -u hugepoold shows the boot lines" boot_lines

# --- an upgrade (the package installed again: its postinst as an upgrade runs it) hands the daemon
# over to the package's binary by take-over, not by a stop and a start; the pages stay reserved --
mainpid=$(c systemctl show -P MainPID hugepoold)
reinstall() { c env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --reinstall "/root/hp/$(printf '%s\n' $debs | grep '^hugepool_')" >/dev/null; }
upgraded() {
	local now
	reinstall || return 1
	now=$(c systemctl show -P MainPID hugepoold)
	echo "MainPID $mainpid -> $now, $(c systemctl show -P ActiveState hugepoold)"
	[ "$now" != "$mainpid" ] && [ "$now" != 0 ] && [ "$(c systemctl show -P ActiveState hugepoold)" = active ] &&
		taken_over "$mainpid" "$now"
}
check "reinstalling the package (as an upgrade): the daemon taken over by the new binary, not restarted" upgraded
check "warm (life 5)" warm_life 5
check "and the pages stayed reserved, not twice (nr_hugepages $pages_started, surplus 0)" pages_kept

# --- the pause a client sees (issue 44): one connection of alice's loops lease and release of a
# buffer while the daemon restarts under it, 3 times each way: systemctl restart (SIGTERM, systemd
# stops the unit and starts it again with its fd store, hugepool-hugepages too: PartOf=) and
# systemctl reload (the take-over). The client keeps its connection throughout (asserted); the
# longest round trips are printed beside the same client's longest with no restart, with the
# journal's account of the last restart (CLOCK_MONOTONIC, ms after systemd's "Stopping"): what
# the service manager's part of the pause is made of. Printed, never asserted: timings.
coproc LOOP { nsenter -t "$cpid" -a runuser -u alice -- hpclient loop small 2>&1; }
loop_pid=$LOOP_PID
# copies of the coprocess's pipes: bash unsets LOOP when the client exits, these stay
exec {loop_in}<&"${LOOP[0]}" {loop_out}>&"${LOOP[1]}"
exec {LOOP[0]}<&- {LOOP[1]}>&-
read -r line <&"$loop_in"
# loop_mark: the longest round trip since the last mark (us)
loop_mark() { local l; echo >&"$loop_out" && read -r l <&"$loop_in" && awk '{ print $2 }' <<<"$l"; } 2>/dev/null
pauses=""
if [ "$line" = looping ]; then
	sleep 1
	loop_mark >/dev/null
	for way in restart reload; do
		floor="" pause=""
		for _ in 1 2 3; do
			sleep 1
			floor+=" $(loop_mark)"
			c systemctl "$way" hugepoold || break
			pause+=" $(loop_mark)"
		done
		pauses+="systemctl $way: longest round trip (us)$pause; with no restart$floor"$'\n'
	done
fi
exec {loop_out}>&-
looped() {
	local l out=""
	while read -r l <&"$loop_in"; do out+="$l"$'\n'; done
	echo "$line"; echo "$out"
	[ "$line" = looping ] && grep -q '^looped on the same connection$' <<<"$out" ||
		{ c journalctl -b -u hugepoold -o cat | grep -E 'Received|Closing connection|Warm start|Taken over'; false; }
}
check "a client looping lease and release through 3 systemctl restarts and 3 reloads keeps its connection" looped
# a taken-over daemon is the service manager's child, as the one it started was (CLONE_PARENT):
# systemd 252 waits for a child to stop on SIGTERM, and sends a stranger SIGKILL at once, in
# the middle of the stop that keeps the connections in the fd store
own_child() {
	! c journalctl -b -u hugepoold -o cat | grep -E 'which is not our child|Killing process .* with signal SIGKILL'
}
check "after the take-overs systemd follows the daemon as its own child: each systemctl restart let it stop" own_child
wait "$loop_pid"
printf '%s' "$pauses" | sed 's/^/container: /'
# the last systemctl restart in the journal, ms after the daemon heard SIGTERM
c journalctl -b -u hugepoold -u hugepool-hugepages -o short-monotonic --no-hostname |
	awk '/Received Terminated/ { n = NR } { l[NR] = $0 } END { for (i = n; n && i <= NR; i++) print l[i] }' |
	awk '{ s = $0; sub(/^\[ */, "", s); t = s + 0; sub(/^[0-9.]+\] /, "", s); if (NR == 1) t0 = t
	       printf "container: systemctl restart at %7.3f ms: %s\n", (t - t0) * 1000, substr(s, 1, 150) }
	     /Started hugepoold.service/ { exit }'

# --- stop: the pages go back ------------------------------------------------------------------------
check "systemctl stop hugepoold" c systemctl stop hugepoold
# the stop PartOf= propagates is a job of its own: systemctl returns when hugepoold's is done
oneshot_stopped() {
	local st
	for _ in $(seq 100); do
		st=$(c systemctl show -P ActiveState hugepool-hugepages)
		[ "$st" = inactive ] && return 0
		sleep 0.1
	done
	echo "hugepool-hugepages: $st"; false
}
check "stop also stopped hugepool-hugepages (PartOf=)" oneshot_stopped
pages_back() { # systemd lets go of the fd store (the pool's buffers) after the stop, on its own time
	local now
	for _ in $(seq 100); do
		now="$(cat $hp/nr_hugepages) $(cat $hp/nr_overcommit_hugepages)"
		[ "$now" = "$pages_base $overcommit_before" ] && return 0
		sleep 0.1
	done
	echo "nr_hugepages, overcommit: $now"; c journalctl -b -u hugepool-hugepages -o cat | tail -6; false
}
check "stop gave the hugepages back (nr_hugepages $pages_base, overcommit $overcommit_before)" pages_back
stays_stopped() { reinstall && ! c systemctl -q is-active hugepoold hugepool-hugepages; } # only a running one is taken over
check "reinstalling the package leaves a stopped daemon stopped" stays_stopped

# --- too few hugepages: prefer falls back, require refuses (the reservation masked) ----------------
c systemctl mask -q hugepool-hugepages
short=$(($(free_pages) + 1))
c sed -i -e "s/^count = 8/count = $short/" -e '/^\[class large\]/,/^count/d' /etc/hugepool/hugepoold.conf
fallback_ok() { c systemctl start hugepoold && as alice hugepoolctl status | grep 'fallback: '; }
check "hugepages = prefer with $short pages short of free ones: starts on regular memory" fallback_ok
c systemctl stop hugepoold
c sed -i 's/^hugepages = prefer/hugepages = require/' /etc/hugepool/hugepoold.conf
require_ok() {
	! c systemctl start hugepoold &&
		[ "$(c systemctl show -P ExecMainStatus hugepoold)" = 3 ] &&
		c journalctl -b -u hugepoold -o cat | grep 'Not enough hugepages for class .* (hugepages = require)'
}
check "hugepages = require with too few: refuses to start, exit status 3" require_ok
c systemctl unmask -q hugepool-hugepages

say "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
