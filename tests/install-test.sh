#!/usr/bin/env bash
# install-test.sh - install into a DESTDIR and use the result as a user would: compile the
# README example against the installed header and library through pkg-config, run it against
# the installed daemon (and the heap library's C and C++ examples through pkg-config hugepool-heap,
# and a Java program on the installed jar and JNI library), lint the installed man pages, check
# that every page is installed and `man FUNCTION` opens the function's own page for every library
# function, and that hugepoold --help lists the exit statuses of hugepoold(8),
# and verify the unit file. Part of `make check-all`; prints "N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
dest=$(mktemp -d /tmp/hugepool-install.XXXXXX)
chmod 755 "$dest"
passed=0 failed=0
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dest"; }
trap cleanup EXIT
check() { # check NAME COMMAND...
	local name=$1; shift
	if out=$("$@" 2>&1); then
		passed=$((passed + 1)); echo "ok   $name"
	else
		failed=$((failed + 1)); echo "FAIL $name"; echo "$out" | tail -20
	fi
}

cd "$top"
check "make install DESTDIR" make -s install DESTDIR="$dest" PREFIX=/usr SYSCONFDIR=/etc
for f in usr/sbin/hugepoold usr/bin/hugepoolctl usr/lib/libhugepool.so.0 usr/lib/libhugepool.a \
	 usr/include/hugepool.h usr/lib/pkgconfig/hugepool.pc usr/share/man/man8/hugepoold.8 \
	 usr/lib/libhugepool-heap.so.0 usr/lib/libhugepool-heap.a usr/include/hugepool-heap.h \
	 usr/lib/pkgconfig/hugepool-heap.pc usr/share/man/man3/hugepool-heap.3 \
	 usr/share/man/man5/hugepoold.conf.5 usr/share/man/man1/hugepoolctl.1 usr/share/man/man3/libhugepool.3 \
	 usr/lib/systemd/system/hugepoold.service usr/lib/systemd/system/hugepool-hugepages.service \
	 usr/lib/systemd/system/hugepool-metrics.socket usr/lib/systemd/system/hugepool-metrics.service \
	 usr/lib/systemd/system/hugepool-metrics-textfile.service usr/lib/systemd/system/hugepool-metrics-textfile.timer \
	 usr/libexec/hugepool/hugepool-hugepages usr/lib/sysusers.d/hugepool.conf \
	 usr/share/doc/hugepool/examples/60-hugepool.conf etc/hugepool/hugepoold.conf; do
	check "installed $f" test -e "$dest/$f"
done
# every page of man/, each function's page and the overviews (the links: below)
for m in man/*.[1-8]; do
	check "installed $m" test -f "$dest/usr/share/man/man${m##*.}/${m#man/}"
done
# the Java binding, where make builds it (a JDK and Maven): the jar and the JNI library where
# Debian's Java policy puts them (LIBDIR/jni), exporting only its JNI entry points
java_built=""
command -v javac >/dev/null && command -v "${MVN:-mvn}" >/dev/null && java_built=1
if [ -n "$java_built" ]; then
	for f in usr/share/java/hugepool-0.1.0.jar usr/share/java/hugepool.jar usr/lib/jni/libhugepool_jni.so \
		 usr/share/man/man7/hugepool-java.7; do
		check "installed $f" test -e "$dest/$f"
	done
	check "only JNI entry points exported by the JNI library" sh -c \
		"! nm -D --defined-only '$dest/usr/lib/jni/libhugepool_jni.so' | awk '{print \$3}' | grep -v -e '^Java_org_hugepool_Native_' -e '^JNI_OnLoad\$' -e '^JNI_OnUnload\$' | grep ."
	check "the JNI library needs no other library than libc" sh -c \
		"! objdump -p '$dest/usr/lib/jni/libhugepool_jni.so' | awk '\$1 == \"NEEDED\"' | grep -v -e libc.so -e ld-linux"
fi
# the Druid extension (hugepool-druid(7)), where make builds it: its directory, the extension's
# jar and a relative link that resolves to the binding's jar
if [ -n "$java_built" ]; then
	check "installed the Druid extension's jar" \
		test -f "$dest/usr/share/hugepool/druid/druid-hugepool/druid-hugepool-0.1.0.jar"
	check "the Druid extension's link to the binding's jar resolves, relative" sh -c \
		"test -f '$dest/usr/share/hugepool/druid/druid-hugepool/hugepool-0.1.0.jar' && readlink '$dest/usr/share/hugepool/druid/druid-hugepool/hugepool-0.1.0.jar' | grep -q '^\.\./'"
fi
# hugepool-artemis, which make install builds and installs with the binding: its jar as the
# binding's, holding the broker plugin (its page is among man/'s above)
if [ -n "$java_built" ]; then
	for f in usr/share/java/hugepool-artemis-0.1.0.jar usr/share/java/hugepool-artemis.jar; do
		check "installed $f" test -e "$dest/$f"
	done
	check "the installed hugepool-artemis jar holds the broker plugin" sh -c \
		"jar tf '$dest/usr/share/java/hugepool-artemis.jar' | grep -qx org/hugepool/artemis/HugepoolJournals.class"
fi
# plain make on a machine without the build dependencies: headers that do not preprocess stand in
# for missing ones; make names the Debian packages in one line and points to ./dev.sh
mkdir -p "$dest/noinc" && for h in liburing.h libaio.h; do echo '#error missing' > "$dest/noinc/$h"; done
missing_deps() {
	local out; out=$(make -s BUILD="$dest/nodeps" CC="cc -I$dest/noinc" 2>&1)
	echo "$out"
	[ "$(grep -c '^hugepool: missing Debian packages: liburing-dev libaio-dev (.*), or run ./dev.sh' <<<"$out")" = 1 ] &&
		! grep -q -e 'error:' -e 'No such file' <<<"$out"
}
check "make without the build dependencies names the packages" missing_deps
export PKG_CONFIG_PATH="$dest/usr/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest"
check "compile example via pkg-config" sh -c \
	"cc -Wall -Werror -o '$dest/acquire' examples/acquire.c \$(pkg-config --cflags --libs hugepool)"
check "only hp_ symbols exported" sh -c \
	"! nm -D --defined-only '$dest/usr/lib/libhugepool.so.0' | awk '{print \$3}' | grep -v '^hp_' | grep -v '^HUGEPOOL_' | grep ."
# the heap: a C program through pkg-config (jemalloc stays private: not on the command line),
# the C++ allocator example, only hp_heap_ exported, and libhugepool itself free of jemalloc
cat > "$dest/heap.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <hugepool-heap.h>
int main(int argc, char **argv)
{
	hp_conn *c;
	hp_heap *h;
	int r = hp_connect(argc > 1 ? argv[1] : NULL, &c);
	if (r == 0 && (r = hp_heap_create(c, "small", 4u << 20, 0, &h)) == 0) {
		char *p = hp_heap_alloc(h, 100);
		r = p ? 0 : -1;
		if (p)
			strcpy(p, "ok");
		hp_heap_free(h, p);
		hp_heap_destroy(h);
	}
	hp_disconnect(c);
	printf("%s\n", r == 0 ? "heap ok" : hp_strerror(r));
	return r != 0;
}
C
check "pkg-config hugepool-heap keeps jemalloc private" sh -c \
	"pkg-config --libs hugepool-heap | grep -q -- '-lhugepool-heap' && ! pkg-config --libs hugepool-heap | grep -q jemalloc && pkg-config --static --libs hugepool-heap | grep -q -- -ljemalloc"
check "compile a heap program via pkg-config" sh -c \
	"cc -Wall -Werror -o '$dest/heap' '$dest/heap.c' \$(pkg-config --cflags --libs hugepool-heap)"
if command -v c++ >/dev/null; then
	check "compile the C++ heap allocator example via pkg-config" sh -c \
		"c++ -std=c++11 -Wall -Werror -o '$dest/heap_allocator' examples/heap_allocator.cpp \$(pkg-config --cflags --libs hugepool-heap)"
fi
check "only hp_heap_ symbols exported by the heap library" sh -c \
	"! nm -D --defined-only '$dest/usr/lib/libhugepool-heap.so.0' | awk '{print \$3}' | grep -v '^hp_heap_' | grep -v '^HUGEPOOL_HEAP_' | grep ."
check "libhugepool does not depend on jemalloc" sh -c "! objdump -p '$dest/usr/lib/libhugepool.so.0' | grep -q jemalloc"
check "soname" sh -c "objdump -p '$dest/usr/lib/libhugepool.so.0' | grep -q 'SONAME *libhugepool.so.0'"
check "installed config is valid" "$dest/usr/sbin/hugepoold" --check-config -c "$dest/etc/hugepool/hugepoold.conf"
# --print-hugepages: what hugepool-hugepages.service reserves, the pool over the page size
printf 'socket = %s/sock\n[class a]\nsize = 2M\ncount = 3\n[class b]\nsize = 4M\ncount = 2\n' "$dest" > "$dest/pages.conf"
check "--print-hugepages counts the pool's pages" sh -c \
	"[ \"\$('$dest/usr/sbin/hugepoold' --print-hugepages -c '$dest/pages.conf')\" = '7 2097152' ]"
sed -i '1a hugepages = off' "$dest/pages.conf"
check "--print-hugepages with hugepages = off" sh -c \
	"[ \"\$('$dest/usr/sbin/hugepoold' --print-hugepages -c '$dest/pages.conf')\" = '0 2097152' ]"
# hugepoold --help lists the exit statuses hugepoold(8) lists under EXIT STATUS, no more, no fewer
man_statuses=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH [^E]/p' "$dest/usr/share/man/man8/hugepoold.8" |
	awk 'prev == ".TP" && $1 == ".B" { print $2 } { prev = $0 }' | xargs)
help_statuses=$("$dest/usr/sbin/hugepoold" --help | sed -n 's/^  \([0-9][0-9]*\)  .*/\1/p' | xargs)
same_statuses() {
	[ -n "$man_statuses" ] && [ "$man_statuses" = "$help_statuses" ] ||
		{ echo "hugepoold(8): $man_statuses"; echo "hugepoold --help: $help_statuses"; false; }
}
check "hugepoold --help lists the exit statuses of hugepoold(8)" same_statuses

# run the example against the installed daemon (a small pool, socket and spill directory in the
# DESTDIR, not the default /var/tmp/hugepool, which may belong to another user)
cat > "$dest/test.conf" <<CONF
socket = $dest/sock
hugepages = off
spill_directory = $dest/spill
[class small]
size = 2M
count = 2
CONF
"$dest/usr/sbin/hugepoold" -c "$dest/test.conf" 2>"$dest/daemon.log" &
pid=$!
for _ in $(seq 100); do [ -S "$dest/sock" ] && break; sleep 0.1; done
check "example runs against the installed daemon" env LD_LIBRARY_PATH="$dest/usr/lib" "$dest/acquire" "$dest/sock" small
check "hugepoolctl status" "$dest/usr/bin/hugepoolctl" -s "$dest/sock" status
check "heap program runs against the installed daemon" env LD_LIBRARY_PATH="$dest/usr/lib" "$dest/heap" "$dest/sock"
if [ -x "$dest/heap_allocator" ]; then
	check "C++ heap allocator example runs" env LD_LIBRARY_PATH="$dest/usr/lib" "$dest/heap_allocator" "$dest/sock" small
fi
if [ -n "$java_built" ]; then
	# a single-file program on the installed jar; the JNI library found on java.library.path
	cat > "$dest/HpJava.java" <<'JAVA'
import java.time.Duration;
import org.hugepool.HugePool;
import org.hugepool.Lease;
public class HpJava {
    public static void main(String[] args) throws Exception {
        try (HugePool pool = HugePool.connect(args[0]); Lease lease = pool.acquire("small", 2, Duration.ofSeconds(5))) {
            lease.buffer(0).putLong(0, 7);
            System.out.println("java ok: " + lease.count() + " buffers");
        }
    }
}
JAVA
	check "a Java program runs against the installed daemon with the installed jar and JNI library" sh -c \
		"java --enable-native-access=ALL-UNNAMED -Djava.library.path='$dest/usr/lib/jni' -cp '$dest/usr/share/java/hugepool.jar' '$dest/HpJava.java' '$dest/sock' | grep -q '^java ok: 2 buffers'"
fi
check "spill directory created 0700" sh -c "[ \"\$(stat -c %a '$dest/spill')\" = 700 ]"
check "hugepoolctl spill" sh -c "'$dest/usr/bin/hugepoolctl' -s '$dest/sock' spill | grep -q '^Directory: *$dest/spill '"
check "hugepoolctl spill --json" sh -c "'$dest/usr/bin/hugepoolctl' -s '$dest/sock' spill --json | grep -q '^{\"directory\":\"$dest/spill\",'"
if command -v python3 >/dev/null; then
	check "hugepoolctl spill --json is valid JSON" sh -c "'$dest/usr/bin/hugepoolctl' -s '$dest/sock' spill --json | python3 -m json.tool >/dev/null"
fi
kill "$pid"; wait "$pid" 2>/dev/null; pid=""

# every public function -- exported by the installed library or declared in the installed
# header, not the list the Makefile made -- has its page: `man FUNCTION` finds the page of that
# function (or its family; a link to it) in the DESTDIR, not an overview, the page renders without
# a warning, its NAME section lists the function and its SYNOPSIS shows its prototype
man3="$dest/usr/share/man/man3"
funcs=$( { nm -D --defined-only "$dest/usr/lib/libhugepool.so.0" "$dest/usr/lib/libhugepool-heap.so.0" |
		awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }'
	grep -ho '\bhp_[a-z0-9_]*(' "$dest/usr/include/hugepool.h" "$dest/usr/include/hugepool-heap.h" | tr -d '('; } | sort -u)
check "public functions found" test -n "$funcs"
man_page() { # man_page FUNCTION
	local page="$man3/$1.3" out
	[ -e "$page" ] || { echo "no $page"; return 1; }
	sed -n '/^\.SH NAME/,/^\.SH [^N]/p' "$page" | grep -qw -- "$1" ||
		{ echo "the NAME section of $(readlink -f "$page") does not list $1"; return 1; }
	case $(basename "$(readlink -f "$page")") in
	hp_*) ;;
	*) echo "$page leads to $(readlink -f "$page"), an overview, not the function's page"; return 1 ;;
	esac
	if command -v man >/dev/null; then
		out=$(MANPATH="$dest/usr/share/man" man -w "$1") && [ "${out#"$dest"/}" != "$out" ] ||
			{ echo "man -w $1: $out"; return 1; }
		out=$(MANPAGER=cat man -l "$page" 2>&1 >/dev/null) && [ -z "$out" ] || { echo "man -l $page: $out"; return 1; }
		# what a reader of `man FUNCTION` sees: the function's prototype in the SYNOPSIS
		out=$(MANPAGER=cat MANWIDTH=300 man -M "$dest/usr/share/man" 3 "$1" 2>&1 | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p')
		grep -q "[ *]$1(" <<<"$out" || { echo "man $1 shows no prototype of $1 in its SYNOPSIS:"; echo "$out"; return 1; }
	fi
	if command -v mandoc >/dev/null; then
		out=$(mandoc -T utf8 "$page" 2>&1 >/dev/null) && [ -z "$out" ] || { echo "mandoc $page: $out"; return 1; }
	fi
}
for f in $funcs; do
	check "man page $f" man_page "$f"
done

if command -v mandoc >/dev/null; then
	for m in "$dest"/usr/share/man/man*/*; do
		[ -L "$m" ] && continue # a function's page: checked above
		check "mandoc lint $(basename "$m")" sh -c "out=\$(mandoc -T lint -W warning '$m'); [ -z \"\$out\" ] || { echo \"\$out\"; false; }"
	done
fi
if command -v systemd-analyze >/dev/null; then
	for u in hugepoold.service hugepool-hugepages.service hugepool-metrics.socket hugepool-metrics.service \
		hugepool-metrics-textfile.service hugepool-metrics-textfile.timer; do
		check "systemd-analyze verify $u" sh -c "cd '$dest' && systemd-analyze verify --root='$dest' usr/lib/systemd/system/$u 2>&1 | grep -v -e 'Cannot add dependency job' -e 'Failed to load' -e 'Unit .*\.service not found' -e '^\$' | { ! grep -i -e error -e invalid -e unknown; }"
	done
fi
echo "install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
