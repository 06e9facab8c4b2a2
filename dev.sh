#!/usr/bin/env bash
# dev.sh - the two commands of the README for a fresh Debian machine.
#   ./dev.sh run    install what is missing, build, and run hugepoold in the foreground with the
#                   bundled development configuration (socket under build/); as root it reserves
#                   the hugepages the pool needs for as long as the daemon runs
#   ./dev.sh test   install what is missing and run every test (make check-all)
# As a normal user it installs through `sudo -n` when that works, and otherwise prints the exact
# apt-get command to run and stops.
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages the build and the tests need (libjemalloc-dev for libhugepool-heap, g++ for
# its C++ allocator example, clang for the second compiler in check-all,
# mandoc for the man page lint, systemd for systemd-analyze verify of the unit; for the Debian
# packages and the container test that runs them under a real systemd: debhelper, dpkg-dev and
# lintian to build and check them, debootstrap for the Debian tree, systemd-container for
# systemd-nspawn, libhugetlbfs-bin for hugeadm, which the packaged units use, curl and jq to
# ask the container's Prometheus; default-jdk and maven for the Java binding, java/: Maven
# fetches its plugins and JUnit once, into ~/.m2; maven-repo-helper puts its POM in the Debian
# package's /usr/share/maven-repo).
PACKAGES=(gcc make pkg-config libcmocka-dev liburing-dev libaio-dev libjemalloc-dev clang g++ mandoc systemd
	debhelper dpkg-dev lintian debootstrap systemd-container libhugetlbfs-bin curl jq default-jdk maven
	maven-repo-helper)
# Installed without their Recommends: prometheus for promtool, which checks hugepoolctl metrics'
# output in make check (its Recommends is node_exporter, which nothing here needs). On a machine
# booted with systemd, Debian starts the Prometheus server it brings (port 9090): `systemctl
# disable --now prometheus` if that machine should not run one.
PACKAGES_NO_RECOMMENDS=(prometheus)

say() { printf 'dev.sh: %s\n' "$*" >&2; }

# the packages of the list named $1 that are not installed
missing_of() {
	local -n list=$1
	local p
	for p in "${list[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
	done
}

install_missing() {
	local missing=() norec=() sudo=()
	mapfile -t missing < <(missing_of PACKAGES)
	mapfile -t norec < <(missing_of PACKAGES_NO_RECOMMENDS)
	[ ${#missing[@]} -eq 0 ] && [ ${#norec[@]} -eq 0 ] && return 0
	say "installing missing packages: ${missing[*]} ${norec[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
			say "not root and sudo needs a password: please run"
			[ ${#missing[@]} -eq 0 ] || say "  sudo apt-get install -y ${missing[*]}"
			[ ${#norec[@]} -eq 0 ] || say "  sudo apt-get install -y --no-install-recommends ${norec[*]}"
			say "then run this command again"
			exit 1
		fi
		sudo=(sudo)
	fi
	"${sudo[@]}" apt-get update -qq
	[ ${#missing[@]} -eq 0 ] ||
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	[ ${#norec[@]} -eq 0 ] ||
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			"${norec[@]}" >/dev/null
}

run_daemon() {
	make -s
	sed "s|@TOP@|$PWD|" conf/dev.conf.in > build/dev.conf
	# the pool of conf/dev.conf.in: 64 x 2 MiB + 2 x 64 MiB = 256 MiB = 128 pages of 2 MiB;
	# no lock: a development daemon may run for hours, tests must not wait for it
	. scripts/hugepages.sh
	trap hugepages_restore EXIT
	hugepages_reserve dev.sh 128 nolock >&2 ||
		say "no hugepages reserved: the daemon falls back to regular shared memory and says so"
	say "socket: $PWD/build/hugepoold.sock  (try: build/hugepoolctl -s $PWD/build/hugepoold.sock status)"
	say "stop with Ctrl-C"
	# not exec: the trap must restore the hugepages after the daemon exits
	build/hugepoold --foreground -c build/dev.conf
}

case "${1:-}" in
run)
	install_missing
	run_daemon
	;;
test)
	install_missing
	make check-all
	;;
*)
	echo "usage: ./dev.sh run | test" >&2
	exit 1
	;;
esac
