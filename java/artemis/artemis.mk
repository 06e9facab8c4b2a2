# SPDX-License-Identifier: MIT
# artemis.mk - hugepool-artemis (java/artemis, hugepool-artemis(7)): ActiveMQ Artemis's journals on
# hugepoold. Included by the Makefile after the Java binding's rules, whose JAR, MVN, MVN_FLAGS and
# JAVA_SKIP it uses.
#   make artemis          the jar, $(BUILD)/java/artemis/hugepool-artemis-$(VERSION).jar (Maven,
#                         against the binding's jar of this build and Artemis 2.40.0 from Maven Central)
#   make check            also runs tests/artemis-tests.sh (from tests/run-tests.sh), plain build only
#   make bench            also runs bench/bench_artemis.sh (from bench/run-bench.sh): a broker on
#                         hugepool against the same broker on its own journals
#   make install          installs the jar and hugepool-artemis(7) when `make artemis` built it; the
#                         Debian packages do not ship it (Artemis is not in Debian: building it needs
#                         Maven Central, which a Debian build may not reach)
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

install-artemis:
	install -d $(DESTDIR)$(JAVADIR) $(DESTDIR)$(MANDIR)/man7
	install -m 0644 $(ARTEMIS_JAR) $(DESTDIR)$(JAVADIR)/hugepool-artemis-$(VERSION).jar
	ln -sf hugepool-artemis-$(VERSION).jar $(DESTDIR)$(JAVADIR)/hugepool-artemis.jar
	install -m 0644 man/hugepool-artemis.7 $(DESTDIR)$(MANDIR)/man7/
install: $(if $(wildcard $(ARTEMIS_JAR)),install-artemis)

.PHONY: artemis install-artemis
