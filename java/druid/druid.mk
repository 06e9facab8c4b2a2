# SPDX-License-Identifier: MIT
#
# druid.mk - make rules of the Druid extension druid-hugepool (java/druid, hugepool-druid(7)),
# included by the top Makefile after the Java binding's rules, whose variables it uses (JAR,
# JAVA_SKIP, MVN, MVN_FLAGS, JAVADIR). `make druid` builds the jar with Maven (java/druid/pom.xml,
# against the binding's jar of this build) and lays out the extension directory as Druid loads
# it, $(BUILD)/java/druid/druid-hugepool: the extension's jar and the binding's. `make check`
# runs tests/druid-tests.sh (from tests/run-tests.sh) in the plain build; `make install` puts the
# directory under DRUIDEXTDIR, with the binding's jar as a relative link to JAVADIR's.

DRUID_BUILD := $(BUILD)/java/druid
DRUID_JAR := $(DRUID_BUILD)/target/druid-hugepool-$(VERSION).jar
DRUID_EXT := $(DRUID_BUILD)/druid-hugepool
DRUID_SRC := $(call rwildcard,java/druid/src/main,*)
# where an operator links it from, into Druid's druid.extensions.directory (hugepool-druid(7))
DRUIDEXTDIR ?= $(PREFIX)/share/hugepool/druid

$(DRUID_JAR): $(DRUID_SRC) java/druid/pom.xml $(JAR)
	$(say) MVN $@
	$(Q)cd java/druid && $(MVN) $(MVN_FLAGS) package -DbuildDir=$(abspath $(DRUID_BUILD))/target \
		-Dhugepool.jar=$(abspath $(JAR))

# a directory of its own, made anew, so that a jar of an older version never lingers in it
$(DRUID_BUILD)/.druid-hugepool: $(DRUID_JAR) $(JAR)
	$(Q)rm -rf $(DRUID_EXT) && mkdir -p $(DRUID_EXT)
	$(Q)cp $(DRUID_JAR) $(JAR) $(DRUID_EXT)/
	$(Q)touch $@

druid:
ifneq ($(JAVA_SKIP),)
	@echo "hugepool: the Druid extension is not built: $(JAVA_SKIP)" >&2; exit 1
else
druid: $(JNI_SO) $(DRUID_BUILD)/.druid-hugepool
endif

# what the tests take from Maven Central beside the extension (Druid's services, for a real
# historical: some 230 MB on a fresh machine), fetched by the same Maven run as the tests make
# (tests/druid-tests.sh), so that check-all fetches it in the background (java-all)
$(DRUID_BUILD)/test-classpath: $(DRUID_JAR) $(call rwildcard,java/druid/src/test,*)
	$(say) MVN $@
	$(Q)cd java/druid && $(MVN) $(MVN_FLAGS) -Pservice test-compile dependency:build-classpath \
		-Dmdep.includeScope=test -Dmdep.outputFile=$(abspath $@) -DbuildDir=$(abspath $(DRUID_BUILD))/target \
		-Dhugepool.jar=$(abspath $(JAR))

JAVA_PARTS += druid
JAVA_INSTALLS += install-druid
JAVA_FETCH += $(DRUID_BUILD)/test-classpath

# the binding's jar is a link to JAVADIR's: one copy of a jar, as Debian's Java policy has it
install-druid: druid install-java
	install -d $(DESTDIR)$(DRUIDEXTDIR)/druid-hugepool $(DESTDIR)$(MANDIR)/man7
	install -m 0644 $(DRUID_JAR) $(DESTDIR)$(DRUIDEXTDIR)/druid-hugepool/
	ln -sf $$(realpath -m --relative-to=$(DRUIDEXTDIR)/druid-hugepool $(JAVADIR)/hugepool-$(VERSION).jar) \
		$(DESTDIR)$(DRUIDEXTDIR)/druid-hugepool/hugepool-$(VERSION).jar
	install -m 0644 man/hugepool-druid.7 $(DESTDIR)$(MANDIR)/man7/

.PHONY: druid install-druid
