# SPDX-License-Identifier: MIT
# artemis.mk - hugepool-artemis (java/artemis, hugepool-artemis(7)): ActiveMQ Artemis's journals on
# hugepoold. Included by the Makefile after the Java binding's rules, whose JAR, MVN, MVN_FLAGS and
# JAVA_SKIP it uses.
#   make artemis          the jar, $(BUILD)/java/artemis/hugepool-artemis-$(VERSION).jar (Maven,
#                         against the binding's jar of this build and Artemis 2.40.0 from Maven Central)
#   make check            also runs tests/artemis-tests.sh (from tests/run-tests.sh), plain build only
#   make bench            also runs bench/bench_artemis.sh (from bench/run-bench.sh): a broker on
#                         hugepool against the same broker on its own journals
#   make install          also builds and installs the jar (JAVADIR, versioned, with an unversioned
#                         link, as the binding's) and hugepool-artemis(7); the Debian package
#                         hugepool-artemis ships them (debian/rules builds it as it builds the
#                         binding's jar, from the builder's Maven repository or Maven Central)
ARTEMIS_JAR := $(BUILD)/java/artemis/hugepool-artemis-$(VERSION).jar
ARTEMIS_SRC := $(shell find java/artemis/src/main/java -name '*.java')

# the broker distribution is the tests' and the benchmark's, not the jar's: not unpacked here
$(ARTEMIS_JAR): $(ARTEMIS_SRC) java/artemis/pom.xml $(JAR)
	$(say) MVN $@
	$(Q)cd java/artemis && $(MVN) $(MVN_FLAGS) package -Dmaven.test.skip=true -Dartemis.dist.skip=true \
		-DbuildDir=$(abspath $(BUILD))/java/artemis -Dhugepool.build=$(abspath $(BUILD))

artemis:
ifneq ($(JAVA_SKIP),)
	@echo "hugepool: hugepool-artemis is not built: $(JAVA_SKIP)" >&2; exit 1
else
artemis: java $(ARTEMIS_JAR)
check: artemis
bench: artemis
endif

install-artemis: artemis
	install -d $(DESTDIR)$(JAVADIR) $(DESTDIR)$(MANDIR)/man7
	install -m 0644 $(ARTEMIS_JAR) $(DESTDIR)$(JAVADIR)/hugepool-artemis-$(VERSION).jar
	ln -sf hugepool-artemis-$(VERSION).jar $(DESTDIR)$(JAVADIR)/hugepool-artemis.jar
	install -m 0644 man/hugepool-artemis.7 $(DESTDIR)$(MANDIR)/man7/
install: $(if $(JAVA_SKIP),,install-artemis)

.PHONY: artemis install-artemis
