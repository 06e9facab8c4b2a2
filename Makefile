# hugepool - build, test, benchmark and install the daemon, the library and the CLI.
#
#   make                     build everything into build/
#   make check               unit and integration tests (hugepages as reserved, and off)
#   make check-all           check, then again under ASan+UBSan and TSan, a clang -Werror
#                            build, and an install into a DESTDIR with a pkg-config example
#   make bench               benchmarks, each figure beside its baseline from the same run
#   make fuzz                libFuzzer on each tests/fuzz target (FUZZ_SECONDS=60 each)
#   make java                the Java binding: the JNI library and the jar (Maven), in build/java
#   make druid               the Druid extension druid-hugepool (java/druid/druid.mk), in build/java/druid
#   make install             PREFIX=/usr/local DESTDIR= (binaries, libraries, headers, .pc, man, units,
#                            sysusers.d, the hugepage reservation helper; the jar and the JNI library;
#                            the Druid extension's directory, DRUIDEXTDIR)
#   dpkg-buildpackage -b     the Debian packages (debian/), which use make install
#   make SANITIZE=address,undefined check    a sanitizer build in its own build directory
#   V=1                      show the commands

VERSION := 0.1.0
SOVERSION := 0

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
LIBEXECDIR ?= $(PREFIX)/libexec/hugepool
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DOCDIR ?= $(PREFIX)/share/doc/hugepool

CC ?= cc
CFLAGS ?= -O2 -g
WERROR ?=
CPPFLAGS ?=
override CFLAGS += $(CPPFLAGS) -std=gnu11 -fPIC -pthread -MMD -MP \
	-Wall -Wextra -Wstrict-prototypes -Wmissing-prototypes -Wshadow -Wpointer-arith \
	-Wcast-qual -Wformat=2 -Wno-format-nonliteral $(WERROR) \
	-DHUGEPOOL_VERSION='"$(VERSION)"' -Iinclude -Isrc/common
override LDFLAGS += -pthread

SANITIZE ?=
comma := ,
ifneq ($(SANITIZE),)
override CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
override LDFLAGS += -fsanitize=$(SANITIZE)
BUILD ?= build-$(subst $(comma),-,$(SANITIZE))
endif
BUILD ?= build

ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-6s %s\n'
endif

# every file below the folders $(1) whose name matches $(2), as $(wildcard) does, without a shell
rwildcard = $(foreach d,$(wildcard $(addsuffix /*,$(1))),$(call rwildcard,$(d),$(2)) $(filter $(subst *,%,$(2)),$(d)))

COMMON_SRC := $(wildcard src/common/*.c)
# the daemon's subsystems, a folder each (docs/ARCHITECTURE.md, "Layers"), and the folders each
# uses directly: its files are compiled with those on the include path, and the folders they use
# in turn (daemon_uses), and no other; no file includes another folder's *_internal.h
# (daemon-includes, below)
DAEMON_DIRS := base jio config restart pool journal spill server
DAEMON_USES_base :=
DAEMON_USES_jio := base
DAEMON_USES_config := jio
DAEMON_USES_restart := base
DAEMON_USES_pool := config restart
DAEMON_USES_journal := config
DAEMON_USES_spill := config restart
DAEMON_USES_server := pool journal spill
daemon_uses = $(sort $(foreach u,$(DAEMON_USES_$(1)),$(u) $(call daemon_uses,$(u))))
DAEMON_SRC := $(foreach d,$(DAEMON_DIRS),$(wildcard src/daemon/$(d)/*.c))
DAEMON_INCLUDES := $(addprefix -Isrc/daemon/,$(DAEMON_DIRS))
LIB_SRC := $(wildcard src/lib/*.c)
HEAP_SRC := $(wildcard src/heap/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
INTEG_SRC := $(wildcard tests/integration/test_*.c)
BENCH_SRC := $(wildcard bench/bench_*.c)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIBCOMMON := $(BUILD)/obj/libcommon.a
LIBDAEMON := $(BUILD)/obj/libdaemon.a
# what libdaemon.a needs at link time (the journal I/O backends)
DAEMON_LIBS := -luring -laio
LIBSO := $(BUILD)/libhugepool.so.$(VERSION)
LIBA := $(BUILD)/libhugepool.a
# the heap library (hugepool-heap.h): its own .so/.a/.pc, the only part that links jemalloc, so
# that libhugepool stays dlopen()able (docs/ARCHITECTURE.md, "Hugepage heap")
HEAP_SO := $(BUILD)/libhugepool-heap.so.$(VERSION)
HEAP_A := $(BUILD)/libhugepool-heap.a
HEAP_LIBS := -ljemalloc
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
INTEG_BIN := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(INTEG_SRC))
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
FUZZ_BIN := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/tests/test_fuzz_%,$(FUZZ_SRC))
TESTLIB_OBJ := $(call obj,tests/integration/harness.c) $(call obj,tests/integration/manager.c)
# the crash-point harness's model of a file system (tests/lib/crashfs.h), and its recording
# through the journal's taps, which needs the daemon's jio and journal_fs
CRASHFS_OBJ := $(call obj,tests/lib/crashfs.c)
CRASHFS_TAP_OBJ := $(call obj,tests/lib/crashfs_tap.c)

all: $(BUILD)/hugepoold $(if $(CLI_SRC),$(BUILD)/hugepoolctl) $(LIBSO) $(LIBA) $(BUILD)/hugepool.pc \
	$(HEAP_SO) $(HEAP_A) $(BUILD)/hugepool-heap.pc

# Before the first compile: the Debian packages the build needs, each found by a header it
# provides (a header the compiler cannot preprocess counts as missing), named in one line with
# what to do, instead of the compiler's "liburing.h: No such file or directory". The tests,
# benchmarks and fuzz targets need cmocka too. Checked once per build directory.
BUILD_DEPS := liburing.h:liburing-dev libaio.h:libaio-dev jemalloc/jemalloc.h:libjemalloc-dev
TEST_DEPS := $(BUILD_DEPS) cmocka.h:libcmocka-dev
define check_deps
	@command -v $(firstword $(CC)) >/dev/null || \
		{ echo "hugepool: no C compiler '$(firstword $(CC))': install the Debian package gcc, or run ./dev.sh, which installs everything the build needs" >&2; exit 1; }
	@missing=""; for d in $(1); do \
		printf '#include <stdarg.h>\n#include <stddef.h>\n#include <%s>\n' "$${d%%:*}" | \
			$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -E -x c - >/dev/null 2>&1 || missing="$$missing $${d#*:}"; \
	done; \
	[ -z "$$missing" ] || { echo "hugepool: missing Debian packages:$$missing (sudo apt-get install$$missing), or run ./dev.sh, which installs everything the build needs" >&2; exit 1; }
	@mkdir -p $(dir $@) && touch $@
endef
$(BUILD)/.build-deps:
	$(call check_deps,$(BUILD_DEPS))
$(BUILD)/.test-deps:
	$(call check_deps,$(TEST_DEPS))

# The layers (docs/ARCHITECTURE.md, "Layers"), enforced by the include path: a source file in
# src/common, src/lib, src/heap or src/cli sees the public header, src/common and its own
# directory (the compiler looks there first), nothing else; one in a folder of src/daemon also
# the folders daemon_uses gives for it (main.c: all of them); tests, benchmarks and fuzz
# targets see everything.
define layer_rule
$$(BUILD)/obj/src/$(1)/%.o: src/$(1)/%.c | $$(BUILD)/.build-deps $(3)
	@mkdir -p $$(dir $$@)
	$$(say) CC $$@
	$$(Q)$$(CC) $$(CFLAGS) $(2) -c -o $$@ $$<
endef
$(foreach layer,common lib heap cli,$(eval $(call layer_rule,$(layer))))
$(foreach d,$(DAEMON_DIRS),$(eval $(call layer_rule,daemon/$(d),$(addprefix -Isrc/daemon/,$(call daemon_uses,$(d))),$$(BUILD)/.daemon-includes)))
$(BUILD)/obj/src/daemon/main.o: src/daemon/main.c | $(BUILD)/.build-deps $(BUILD)/.daemon-includes
	@mkdir -p $(dir $@)
	$(say) CC $@
	$(Q)$(CC) $(CFLAGS) $(DAEMON_INCLUDES) -c -o $@ $<

# A folder's *_internal.h is for that folder's files: none elsewhere includes it (each folder
# that may use another sees all of it on the include path, so the path alone cannot say this).
$(BUILD)/.daemon-includes: $(wildcard src/daemon/*/*.[ch] src/daemon/*.c)
	@bad=$$(for f in $^; do d=$$(dirname $$f); \
		grep -o '#include "[a-z_]*_internal\.h"' $$f | sed 's/.*"\(.*\)"/\1/' | \
		while read -r h; do [ -e "$$d/$$h" ] || echo "$$f includes $$h, internal to another folder"; done; done); \
	[ -z "$$bad" ] || { echo "$$bad" >&2; exit 1; }
	@mkdir -p $(dir $@) && touch $@

$(BUILD)/obj/%.o: %.c | $(BUILD)/.test-deps
	@mkdir -p $(dir $@)
	$(say) CC $@
	$(Q)$(CC) $(CFLAGS) $(DAEMON_INCLUDES) -Isrc/lib -c -o $@ $<

$(LIBCOMMON): $(call obj,$(COMMON_SRC))
	$(say) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBDAEMON): $(call obj,$(DAEMON_SRC))
	$(say) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/hugepoold: $(call obj,src/daemon/main.c) $(LIBDAEMON) $(LIBCOMMON)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS)

$(LIBSO): $(call obj,$(LIB_SRC) $(COMMON_SRC)) src/lib/libhugepool.map
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,-soname,libhugepool.so.$(SOVERSION) \
		-Wl,--version-script=src/lib/libhugepool.map -o $@ $(filter %.o,$^)
	$(Q)ln -sf libhugepool.so.$(VERSION) $(BUILD)/libhugepool.so.$(SOVERSION)
	$(Q)ln -sf libhugepool.so.$(SOVERSION) $(BUILD)/libhugepool.so

$(LIBA): $(call obj,$(LIB_SRC) $(COMMON_SRC))
	$(say) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

# linked against libhugepool.so (its NEEDED), jemalloc and nothing else
$(HEAP_SO): $(call obj,$(HEAP_SRC)) src/heap/libhugepool-heap.map $(LIBSO)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,-soname,libhugepool-heap.so.$(SOVERSION) \
		-Wl,--version-script=src/heap/libhugepool-heap.map -o $@ $(filter %.o,$^) \
		-L$(BUILD) -lhugepool $(HEAP_LIBS)
	$(Q)ln -sf libhugepool-heap.so.$(VERSION) $(BUILD)/libhugepool-heap.so.$(SOVERSION)
	$(Q)ln -sf libhugepool-heap.so.$(SOVERSION) $(BUILD)/libhugepool-heap.so

$(HEAP_A): $(call obj,$(HEAP_SRC))
	$(say) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/hugepoolctl: $(call obj,$(CLI_SRC)) $(LIBA) $(LIBCOMMON)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^

# the .pc names install paths: install writes it again with the PREFIX it is given
PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	-e 's|@VERSION@|$(VERSION)|'

$(BUILD)/%.pc: %.pc.in Makefile
	@mkdir -p $(dir $@)
	$(Q)$(PC_SED) $< > $@

$(filter-out $(BUILD)/tests/test_dlopen,$(UNIT_BIN)): $(BUILD)/tests/%: $(call obj,tests/unit/%.c) $(LIBA) $(LIBDAEMON) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(DAEMON_LIBS) -lm

$(filter-out $(BUILD)/tests/test_heap,$(INTEG_BIN)): $(BUILD)/tests/%: $(call obj,tests/integration/%.c) $(TESTLIB_OBJ) $(LIBA) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

# the heap's tests link the shared libraries as `pkg-config --libs hugepool-heap` does: jemalloc
# only as libhugepool-heap.so's dependency, so the process's malloc stays glibc's (a program
# naming -ljemalloc itself gets jemalloc's malloc: it comes before libc in the lookup order)
$(BUILD)/tests/test_heap: $(call obj,tests/integration/test_heap.c) $(TESTLIB_OBJ) $(HEAP_SO) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -L$(BUILD) -Wl,-rpath,'$$ORIGIN/..' \
		-lhugepool-heap -lhugepool -lcmocka

# links neither library: it dlopen()s them, as JNI or ctypes would
$(BUILD)/tests/test_dlopen: $(call obj,tests/unit/test_dlopen.c) | $(LIBSO) $(HEAP_SO)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -ldl

# the wrapper test_journal_backends and test_hostile run hugepoold under (io_uring_setup or, by its
# other names noaio and nopassrights, io_setup or setsockopt SO_PASSRIGHTS denied); not named test_*, so
# run-tests.sh does not run it; built whenever they are
$(BUILD)/tests/noiouring: $(call obj,tests/integration/noiouring.c)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^
	$(Q)ln -sf noiouring $(BUILD)/tests/nopassrights
	$(Q)ln -sf noiouring $(BUILD)/tests/noaio
$(BUILD)/tests/test_journal_backends $(BUILD)/tests/test_hostile: | $(BUILD)/tests/noiouring

# the wrapper test_restart runs hugepoold under as a pid namespace's first process (a container's
# init); not named test_*, so run-tests.sh does not run it
$(BUILD)/tests/pidns: $(call obj,tests/integration/pidns.c)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^
$(BUILD)/tests/test_restart: | $(BUILD)/tests/pidns

# the daemon with its journals' operations traced (tests/integration/traced.c), which
# test_journal_power runs to build the states a power loss could leave; not named test_*, so
# run-tests.sh does not run it; built whenever that test is
$(BUILD)/tests/hugepoold-traced: $(call obj,src/daemon/main.c) $(call obj,tests/integration/traced.c) $(CRASHFS_OBJ) \
		$(CRASHFS_TAP_OBJ) $(LIBDAEMON) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS)
$(BUILD)/tests/test_journal_power: $(CRASHFS_OBJ) | $(BUILD)/tests/hugepoold-traced
$(BUILD)/tests/test_crash_points: $(CRASHFS_OBJ) $(CRASHFS_TAP_OBJ)

# a fuzz target with replay.c: its saved corpus as an ordinary test (fuzz_http: hugepoolctl's parser)
$(BUILD)/tests/test_fuzz_http: $(call obj,src/cli/http.c)
$(call obj,tests/fuzz/fuzz_http.c): CFLAGS += -Isrc/cli
$(BUILD)/tests/test_fuzz_%: $(call obj,tests/fuzz/fuzz_%.c) $(call obj,tests/fuzz/replay.c) $(LIBA) $(LIBDAEMON) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(DAEMON_LIBS)

# as test_heap: the shared heap library, so jemalloc does not become the process's malloc
$(BUILD)/bench/bench_heap: $(call obj,bench/bench_heap.c) $(call obj,bench/benchutil.c) $(TESTLIB_OBJ) $(HEAP_SO) $(LIBDAEMON) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) -L$(BUILD) -Wl,-rpath,'$$ORIGIN/..' \
		-lhugepool-heap -lhugepool -ldl $(DAEMON_LIBS)

$(filter-out $(BUILD)/bench/bench_heap,$(BENCH_BIN)): $(BUILD)/bench/%: $(call obj,bench/%.c) $(call obj,bench/benchutil.c) $(TESTLIB_OBJ) $(LIBA) $(LIBDAEMON) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS) -lm

# the C++ allocator example of hugepool-heap(3), built when there is a C++ compiler (test_heap
# runs it, and skips that case otherwise)
CXX_FOUND = $(eval CXX_FOUND := $(shell command -v $(firstword $(CXX)) 2>/dev/null))$(CXX_FOUND)
HEAP_EXAMPLE := $(if $(CXX_FOUND),$(BUILD)/examples/heap_allocator)
$(BUILD)/examples/heap_allocator: examples/heap_allocator.cpp include/hugepool-heap.h $(HEAP_SO)
	@mkdir -p $(dir $@)
	$(say) CXX $@
	$(Q)$(CXX) -std=c++11 -O2 -Wall -Wextra $(WERROR) $(filter -fsanitize=%,$(CFLAGS)) -Iinclude -o $@ $< \
		$(LDFLAGS) -L$(BUILD) -Wl,-rpath,'$$ORIGIN/..' -lhugepool-heap -lhugepool

tests: all $(UNIT_BIN) $(INTEG_BIN) $(FUZZ_BIN) $(HEAP_EXAMPLE)

check-all:
	$(Q)MAKE="$(MAKE)" tests/check-all.sh

# libFuzzer on every target for FUZZ_SECONDS each (clang); new inputs go to build-fuzz/
FUZZ_SECONDS ?= 60
fuzz:
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run-fuzz.sh

# ---- the Java binding (java/, hugepool-java(7)) ----------------------------------------------
# `make java`: the JNI library, C built here from libhugepool's own objects (so it needs no other
# library at run time, and the jar finds one file), and the jar, built by Maven (java/pom.xml) into
# $(BUILD)/java/target. `make check` runs the Java tests (tests/java-tests.sh) once, in the plain
# build only: a sanitizer's runtime would have to be preloaded into the JVM. Where there is no JDK
# or no Maven they are skipped with a line that says what is missing; ./dev.sh installs both.
# (looked up once, and only when a rule needs them: `make clean` asks no shell)
JAVAC = $(eval JAVAC := $(shell command -v javac 2>/dev/null))$(JAVAC)
MVN ?= mvn
MVN_FOUND = $(eval MVN_FOUND := $(shell command -v $(MVN) 2>/dev/null))$(MVN_FOUND)
MVN_FLAGS ?= -B -q
JAVA_HOME ?= $(if $(JAVAC),$(patsubst %/bin/javac,%,$(realpath $(JAVAC))))
JAVADIR ?= $(PREFIX)/share/java
JNIDIR ?= $(LIBDIR)/jni
JNI_SO := $(BUILD)/java/libhugepool_jni.so
JAR := $(BUILD)/java/target/hugepool-$(VERSION).jar
JAVA_SRC := $(call rwildcard,java/src/main/java,*.java)
# why the Java part is not built and tested here; empty when it is
JAVA_SKIP := $(if $(SANITIZE),a sanitizer build,$(if $(JAVAC),$(if $(MVN_FOUND),,no Maven: install maven or run ./dev.sh),no JDK: install default-jdk or run ./dev.sh))

# the C side's prototypes, generated from the native methods (javac -h): a signature that differs
# from Native.java does not compile
JNI_H := $(BUILD)/java/include/org_hugepool_Native.h
$(JNI_H): java/src/main/java/org/hugepool/Native.java
	$(say) JAVAC $@
	$(Q)$(JAVAC) --release 17 -h $(dir $@) -d $(BUILD)/java/jni-classes -sourcepath java/src/main/java $<

$(BUILD)/obj/java/%.o: java/%.c $(JNI_H) | $(BUILD)/.build-deps
	@mkdir -p $(dir $@)
	$(say) CC $@
	$(Q)$(CC) $(CFLAGS) -I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux -I$(dir $(JNI_H)) -c -o $@ $<

$(JNI_SO): $(call obj,java/src/main/native/hugepool_jni.c $(LIB_SRC) $(COMMON_SRC)) java/src/main/native/hugepool_jni.map
	$(say) LD $@
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -shared -Wl,--version-script=java/src/main/native/hugepool_jni.map -o $@ $(filter %.o,$^)

# the test daemon goes beside the jar, in hugepool-$(VERSION)-tests.jar, for the engine modules' tests
$(JAR): $(JAVA_SRC) java/src/test/java/org/hugepool/Daemon.java java/pom.xml
	$(say) MVN $@
	$(Q)cd java && $(MVN) $(MVN_FLAGS) package -DskipTests -DbuildDir=$(abspath $(BUILD))/java/target

java:
ifneq ($(JAVA_SKIP),)
	@echo "hugepool: the Java binding is not built: $(JAVA_SKIP)" >&2; exit 1
else
java: $(JNI_SO) $(JAR)
endif

# The Java parts, which each engine's .mk file adds to: JAVA_PARTS, what `make check` and `make
# bench` build (the binding; an engine's module), JAVA_INSTALLS, their install targets, and
# JAVA_FETCH, what their tests take from Maven Central beside them (check-all's background
# `make java-all` fetches it while the sanitizer suites run). The aggregate goals below name them
# unless JAVA_SKIP says why not.
JAVA_PARTS := java
JAVA_INSTALLS := install-java
JAVA_FETCH :=
unless_java_skip = $(if $(JAVA_SKIP),,$(1))

java-check: all java
	$(Q)tests/java-tests.sh $(BUILD)

# Debian's Java policy: the jar versioned in /usr/share/java with an unversioned link, the JNI
# library in /usr/lib/<multiarch>/jni (JNIDIR: $(LIBDIR)/jni, which the Debian build sets)
install-java: java
	install -d $(DESTDIR)$(JAVADIR) $(DESTDIR)$(JNIDIR) $(DESTDIR)$(MANDIR)/man7
	install -m 0644 $(JAR) $(DESTDIR)$(JAVADIR)/hugepool-$(VERSION).jar
	ln -sf hugepool-$(VERSION).jar $(DESTDIR)$(JAVADIR)/hugepool.jar
	install -m 0644 $(JNI_SO) $(DESTDIR)$(JNIDIR)/libhugepool_jni.so
	install -m 0644 man/hugepool-java.7 $(DESTDIR)$(MANDIR)/man7/

.PHONY: java java-all java-check install-java

include java/druid/druid.mk
include java/artemis/artemis.mk

# ---- the aggregate goals, each with all it needs on its one line ---------------------------
# every part Maven builds, and what the Java parts' tests fetch (check-all runs it early)
java-all: $(JAVA_PARTS) $(call unless_java_skip,$(JAVA_FETCH))

check: tests $(call unless_java_skip,$(JAVA_PARTS))
	$(Q)HP_JAVA_SKIP="$(JAVA_SKIP)" tests/run-tests.sh $(BUILD)

# the Java benchmarks (bench/bench_java.sh, bench_druid.sh, bench_artemis.sh) need their parts
bench: all $(BENCH_BIN) $(call unless_java_skip,$(JAVA_PARTS))
	$(Q)bench/run-bench.sh $(BUILD)

# the units and the reservation helper name install paths
UNIT_SED = sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@LIBEXECDIR@|$(LIBEXECDIR)|g'

# man3 holds every page of man/ and, for each further name a page's NAME section lists
# (scripts/man-names.sh), a link to that page, so that `man NAME` opens it; links, not .so
# pages, which mandoc calls fragile. tests/man-pages.sh checks that every function of the
# public headers is listed by one page, install-test.sh that `man FUNCTION` opens it.
install: all $(call unless_java_skip,$(JAVA_INSTALLS))
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(DOCDIR)/examples \
		$(DESTDIR)$(SYSCONFDIR)/hugepool
	install -m 0755 $(BUILD)/hugepoold $(DESTDIR)$(SBINDIR)/hugepoold
	install -m 0755 $(BUILD)/hugepoolctl $(DESTDIR)$(BINDIR)/hugepoolctl
	install -m 0755 $(LIBSO) $(DESTDIR)$(LIBDIR)/
	ln -sf libhugepool.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libhugepool.so.$(SOVERSION)
	ln -sf libhugepool.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libhugepool.so
	install -m 0644 $(LIBA) $(DESTDIR)$(LIBDIR)/
	install -m 0644 include/hugepool.h $(DESTDIR)$(INCLUDEDIR)/
	$(PC_SED) hugepool.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/hugepool.pc
	install -m 0755 $(HEAP_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf libhugepool-heap.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libhugepool-heap.so.$(SOVERSION)
	ln -sf libhugepool-heap.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libhugepool-heap.so
	install -m 0644 $(HEAP_A) $(DESTDIR)$(LIBDIR)/
	install -m 0644 include/hugepool-heap.h $(DESTDIR)$(INCLUDEDIR)/
	$(PC_SED) hugepool-heap.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/hugepool-heap.pc
	install -m 0644 man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 man/*.3 $(DESTDIR)$(MANDIR)/man3/
	for p in man/*.3; do \
		page=$${p#man/}; \
		for f in $$(scripts/man-names.sh $$p); do \
			[ "$$f.3" = "$$page" ] || ln -sf $$page $(DESTDIR)$(MANDIR)/man3/$$f.3 || exit; \
		done; \
	done
	install -m 0644 man/*.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 man/*.8 $(DESTDIR)$(MANDIR)/man8/
	for u in hugepoold hugepool-hugepages hugepool-metrics hugepool-metrics-textfile; do \
		$(UNIT_SED) systemd/$$u.service.in > $(DESTDIR)$(UNITDIR)/$$u.service && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u.service || exit; \
	done
	install -m 0644 systemd/hugepool-metrics.socket systemd/hugepool-metrics-textfile.timer $(DESTDIR)$(UNITDIR)/
	$(UNIT_SED) systemd/hugepool-hugepages > $(DESTDIR)$(LIBEXECDIR)/hugepool-hugepages
	chmod 0755 $(DESTDIR)$(LIBEXECDIR)/hugepool-hugepages
	install -m 0644 systemd/hugepool.sysusers $(DESTDIR)$(SYSUSERSDIR)/hugepool.conf
	install -m 0644 systemd/60-hugepool.conf $(DESTDIR)$(DOCDIR)/examples/60-hugepool.conf
	@# the user the unit runs as: made now on a live system, at boot or package install otherwise
	[ -n "$(DESTDIR)" ] || ! command -v systemd-sysusers >/dev/null || \
		systemd-sysusers $(SYSUSERSDIR)/hugepool.conf
	[ -e $(DESTDIR)$(SYSCONFDIR)/hugepool/hugepoold.conf ] || \
		install -m 0644 conf/hugepoold.conf $(DESTDIR)$(SYSCONFDIR)/hugepool/hugepoold.conf

clean:
	rm -rf build build-*

.PHONY: all tests check check-all fuzz bench install clean
.SECONDARY:

-include $(call rwildcard,$(BUILD)/obj,*.d)
