/*
 * SPDX-License-Identifier: MIT
 *
 * ExampleTest.java - the examples compile and run as a user would run them: README.md's "From
 * Java" program, java/examples/ProcessingBuffers.java (the Druid-shaped pool) and, on Java 22
 * and later, java/examples/SegmentColumn.java (a buffer as a MemorySegment), each compiled with
 * the JDK's compiler against the binding's classes and run in a JVM of its own against a daemon
 * that has the README's class and journal.
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class ExampleTest {
    private static final Path SOURCE = Paths.get(System.getProperty("hugepool.source", ".")).toAbsolutePath();
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("",
            "[class small]\nsize = 2M\ncount = 2\n[class processing]\nsize = 4M\ncount = 4\n"
                + "[journal orders]\ndirectory = @DIR@/orders\nsegment_size = 1M\n");

    /* Compile source (named for its public class) into a directory of its own; run it with args. */
    private static String compileAndRun(String className, String source, String... args) throws Exception {
        Path dir = Files.createTempDirectory(daemon.dir, className);
        Path file = dir.resolve(className + ".java");
        Files.writeString(file, source);
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        int rc = javac.run(null, null, null, "-Xlint:all", "-Werror", "-d", dir.toString(), "-cp",
                System.getProperty("hugepool.classpath"), file.toString());
        assertEquals(0, rc, className + " compiles");
        String[] cmd = new String[args.length + 2];
        cmd[0] = "-cp";
        cmd[1] = System.getProperty("hugepool.classpath") + ":" + dir;
        System.arraycopy(args, 0, cmd, 2, args.length);
        ProcessBuilder pb = Daemon.jvm(className, cmd);
        pb.environment().put("HUGEPOOL_SOCKET", daemon.socketPath());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), className + " exits 0:\n" + out);
        return out;
    }

    @Test
    void readmeExample() throws Exception {
        String readme = Files.readString(SOURCE.resolve("../README.md"));
        Matcher m = Pattern.compile("## From Java\n.*?```java\n(.*?)```", Pattern.DOTALL).matcher(readme);
        assertTrue(m.find(), "README.md has a From Java section with a java block");
        String out = compileAndRun("Hello", m.group(1));
        assertTrue(out.contains("durable at LSN 1"), out);
        assertTrue(out.contains("1: 7 bytes"), out);
    }

    @Test
    void druidShapedProcessingBuffers() throws Exception {
        String src = Files.readString(SOURCE.resolve("examples/ProcessingBuffers.java"));
        int buffers = 4, tasks = 64, size = 4 << 20;
        String out = compileAndRun("ProcessingBuffers", src, daemon.socketPath(), "processing", "" + buffers, "" + tasks);
        long sum = 0;
        for (long t = 0; t < tasks; t++)
            for (long i = 0; i + 8 <= size; i += 4096)
                sum += t + i;
        assertTrue(out.contains(buffers + " buffers of " + size + " bytes"), out);
        assertTrue(out.contains(tasks + " tasks, checksum " + sum), out);
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            assertEquals(buffers, pool.status().bufferClass("processing").free(), "the example gave its buffers back");
        }
    }

    @Test
    void segmentColumn() throws Exception {
        assumeTrue(Runtime.version().feature() >= 22, "SegmentColumn needs Java 22 or later; this is Java "
                + Runtime.version().feature());
        String src = Files.readString(SOURCE.resolve("examples/SegmentColumn.java"));
        String out = compileAndRun("SegmentColumn", src, daemon.socketPath(), "processing");
        long n = (4 << 20) / 8;
        assertTrue(out.contains(n + " longs, sum " + n * (n - 1) / 2), out);
        assertTrue(out.contains("closed with the lease: "), out);
    }
}
