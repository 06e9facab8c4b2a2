# SPDX-License-Identifier: MIT
# druid-jvm.sh - sourced by tests/druid-tests.sh and bench/bench_druid.sh, which start Druid 33
# services on the extension: the JVM flags Druid's own start script (bin/run-java) gives Java 17,
# without which segments do not map (an IllegalAccessError the bootstrap swallows), as the array
# druid_jvm; and druid_log4j FILE, a log4j2 configuration that logs everything at info to standard
# output, each line stamped to the millisecond (bench_druid.sh reads the stamps), where the
# scripts look for the services' lines.
# shellcheck shell=bash
druid_jvm=(--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED --add-exports=java.base/jdk.internal.ref=ALL-UNNAMED
	--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
	--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED
	--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED)

druid_log4j() {
	cat >"$1" <<'XML'
<Configuration status="WARN">
  <Appenders><Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="%d{yyyy-MM-dd HH:mm:ss.SSS} %p [%t] %c - %m%n"/></Console></Appenders>
  <Loggers><Root level="info"><AppenderRef ref="out"/></Root></Loggers>
</Configuration>
XML
}
