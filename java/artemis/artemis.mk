# SPDX-License-Identifier: MIT
# artemis.mk - hugepool-artemis (java/artemis, hugepool-artemis(7)): ActiveMQ Artemis's journals on
# hugepoold. Included by the Makefile after the Java binding's rules, whose JAR, MVN, MVN_FLAGS and
# JAVA_SKIP it uses.
#   make artemis          the jar, $(BUILD)/java/artemis/hugepool-artemis-$(VERSION).jar (Maven,
#                         against the binding's jar of this build and Artemis 2.40.0 from Maven Central)
#   make check            also runs tests/artemis-tests.sh (from tests/run-tests.sh), plain build only
#   make java-all         also fetches and unpacks what those tests take from Maven Central
#                         (check-all runs it in the background, before the plain suite)
#   make bench            also runs bench/bench_artemis.sh (from bench/run-bench.sh): a broker on
#                         hugepool against the same broker on its own journals
#   make install          also builds and installs the jar (JAVADIR, versioned, with an unversioned
#                         link, as the binding's) and hugepool-artemis(7); the Debian package
#                         hugepool-artemis ships them (debian/rules builds it as it builds the
#                         binding's jar, from the builder's Maven repository or Maven Central)
ARTEMIS_BUILD := $(BUILD)/java/artemis
ARTEMIS_JAR := $(ARTEMIS_BUILD)/hugepool-artemis-$(VERSION).jar
ARTEMIS_SRC := $(call rwildcard,java/artemis/src/main/java,*.java)

# the broker distribution is the tests' and the benchmark's, not the jar's: not unpacked here
$(ARTEMIS_JAR): $(ARTEMIS_SRC) java/artemis/pom.xml $(JAR)
	$(say) MVN $@
	$(Q)cd java/artemis && $(MVN) $(MVN_FLAGS) package -Dmaven.test.skip=true -Dartemis.dist.skip=true \
		-DbuildDir=$(abspath $(ARTEMIS_BUILD)) -Dhugepool.build=$(abspath $(BUILD))

# what the tests take from Maven Central beside the jar (JUnit, Surefire's JUnit Platform provider
# and the broker distribution, apache-artemis 2.40.0 bin tar.gz: some 50 MB on a fresh machine),
# fetched by the Maven project the tests run, the distribution unpacked where they find it, so
# that check-all fetches it in the background (java-all). Surefire resolves its provider only
# when it forks, so the forked JVM is given Workload, a test class with no tests: 0 run.
$(ARTEMIS_BUILD)/.test-ready: $(ARTEMIS_JAR) $(call rwildcard,java/artemis/src/test,*)
	$(say) MVN $@
	$(Q)cd java/artemis && $(MVN) $(MVN_FLAGS) test -Dtest=Workload -DbuildDir=$(abspath $(ARTEMIS_BUILD)) \
		-Dhugepool.build=$(abspath $(BUILD))
	$(Q)touch $@

JAVA_PARTS += artemis
JAVA_INSTALLS += install-artemis
JAVA_FETCH += $(ARTEMIS_BUILD)/.test-ready

artemis:
ifneq ($(JAVA_SKIP),)
	@echo "hugepool: hugepool-artemis is not built: $(JAVA_SKIP)" >&2; exit 1
else
artemis: java $(ARTEMIS_JAR)
endif

install-artemis: artemis
	install -d $(DESTDIR)$(JAVADIR) $(DESTDIR)$(MANDIR)/man7
	install -m 0644 $(ARTEMIS_JAR) $(DESTDIR)$(JAVADIR)/hugepool-artemis-$(VERSION).jar
	ln -sf hugepool-artemis-$(VERSION).jar $(DESTDIR)$(JAVADIR)/hugepool-artemis.jar
	install -m 0644 man/hugepool-artemis.7 $(DESTDIR)$(MANDIR)/man7/

.PHONY: artemis install-artemis
