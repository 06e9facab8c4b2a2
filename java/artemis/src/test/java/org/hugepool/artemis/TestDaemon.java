/*
 * SPDX-License-Identifier: MIT
 *
 * TestDaemon.java - a real hugepoold for the Artemis tests: the build's daemon (system property
 * hugepool.build) on a private socket and configuration in a temporary directory, with the
 * journals a test names. start() returns once the daemon logged its start line, which it writes
 * once its socket listens (never a fixed wait); start(env) starts it with more environment (the
 * daemon's fault injection, HUGEPOOLD_FAULT_INJECT), stop() and start() again is a cold restart;
 * restart() is `hugepoolctl restart`, a warm restart by re-execution, and returns at the next
 * life's start line. The daemon's output goes to daemon.log in the directory, read by a thread of
 * its own.
 */
package org.hugepool.artemis;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

final class TestDaemon implements AutoCloseable {
    static final Path BUILD = Paths.get(System.getProperty("hugepool.build", "../../build")).toAbsolutePath().normalize();
    private static final long START_MS = 60_000;

    final Path dir, socket, conf;
    private Process proc;
    private final List<String> lines = new ArrayList<>(); // guarded by itself
    private int starts;

    /** A journal section: name, segment size, segments; the directory is under this daemon's. */
    static String journal(String name, String segmentSize, int segments) {
        return "[journal " + name + "]\ndirectory = @DIR@/" + name + "\nsegment_size = " + segmentSize + "\nsegments = "
                + segments + "\nwhen_full = block\n";
    }

    TestDaemon(String sections) throws IOException {
        dir = Files.createTempDirectory("hugepool-artemis.");
        socket = dir.resolve("sock");
        conf = dir.resolve("hugepoold.conf");
        String huge = System.getenv().getOrDefault("HP_TEST_HUGEPAGES", "off");
        Files.writeString(conf, ("socket = " + socket + "\nhugepages = " + huge + "\nspill_directory = " + dir.resolve("spill")
                + "\n" + sections).replace("@DIR@", dir.toString()));
    }

    TestDaemon start() throws IOException, InterruptedException {
        return start(Map.of());
    }

    TestDaemon start(Map<String, String> env) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        if (Files.isExecutable(Paths.get("/usr/bin/setpriv")))
            cmd.addAll(List.of("/usr/bin/setpriv", "--pdeathsig", "TERM", "--"));
        cmd.addAll(List.of(BUILD.resolve("hugepoold").toString(), "-v", "-c", conf.toString()));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().remove("NOTIFY_SOCKET");
        pb.environment().remove("LISTEN_FDS");
        pb.environment().putAll(env);
        proc = pb.start();
        Process p = proc;
        Thread t = new Thread(() -> pump(p), "hugepoold output");
        t.setDaemon(true);
        t.start();
        awaitStart(starts + 1);
        return this;
    }

    private void pump(Process p) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
                Writer log = Files.newBufferedWriter(dir.resolve("daemon.log"), StandardCharsets.UTF_8,
                        StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
            for (String line; (line = r.readLine()) != null;) {
                log.write(line + "\n");
                log.flush();
                synchronized (lines) {
                    lines.add(line);
                    lines.notifyAll();
                }
            }
        } catch (IOException e) {
            // the daemon is gone; awaitStart sees it
        }
        synchronized (lines) {
            lines.notifyAll();
        }
    }

    private void awaitStart(int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(START_MS);
        synchronized (lines) {
            for (;;) {
                int seen = (int) lines.stream().filter(l -> l.contains("Cold start") || l.contains("Warm start")).count();
                if (seen >= n) {
                    starts = seen;
                    return;
                }
                long left = deadline - System.nanoTime();
                if (!proc.isAlive() || left <= 0)
                    throw new IllegalStateException("hugepoold did not start (" + (proc.isAlive() ? "timeout" : "exit "
                            + proc.exitValue()) + "):\n" + String.join("\n", lines));
                lines.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
        }
    }

    /*
     * A warm restart (hugepoolctl restart): returns once the life that answered (the daemon's own
     * process, after two take-overs: restart = exec with no service manager) has logged its start,
     * so that the count of start lines is right for the next start.
     */
    void restart() throws IOException, InterruptedException {
        Process ctl = new ProcessBuilder(BUILD.resolve("hugepoolctl").toString(), "-s", socket.toString(), "restart")
                .redirectErrorStream(true).start();
        String out = new String(ctl.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (ctl.waitFor() != 0)
            throw new IllegalStateException("hugepoolctl restart: " + out);
        Matcher life = Pattern.compile("\\(life (\\d+)\\)").matcher(out);
        if (!life.find())
            throw new IllegalStateException("hugepoolctl restart did not say which life serves: " + out);
        awaitLine("Warm start (life " + life.group(1) + ")");
    }

    /* Wait until a line contains s; then count the start lines again. */
    private void awaitLine(String s) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(START_MS);
        synchronized (lines) {
            while (lines.stream().noneMatch(l -> l.contains(s))) {
                long left = deadline - System.nanoTime();
                if (!proc.isAlive() || left <= 0)
                    throw new IllegalStateException("hugepoold did not log \"" + s + "\":\n" + String.join("\n", lines));
                lines.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
            starts = (int) lines.stream().filter(l -> l.contains("Cold start") || l.contains("Warm start")).count();
        }
    }

    /** `hugepoolctl journal stat NAME --json`'s output (the journal's segments, as the daemon counts them). */
    String journalStat(String name) throws IOException, InterruptedException {
        Process ctl = new ProcessBuilder(BUILD.resolve("hugepoolctl").toString(), "-s", socket.toString(), "--json",
                "journal", "stat", name).redirectErrorStream(true).start();
        String out = new String(ctl.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (ctl.waitFor() != 0)
            throw new IllegalStateException("hugepoolctl journal stat: " + out);
        return out;
    }

    String log() {
        synchronized (lines) {
            return String.join("\n", lines);
        }
    }

    void stop() throws InterruptedException {
        if (proc != null && proc.isAlive()) {
            proc.destroy();
            if (!proc.waitFor(30, TimeUnit.SECONDS))
                proc.destroyForcibly().waitFor();
        }
    }

    @Override
    public void close() throws IOException {
        try {
            stop();
        } catch (InterruptedException e) {
            proc.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }
}
