/*
 * SPDX-License-Identifier: MIT
 *
 * Daemon.java - a real hugepoold for tests, as tests/integration/harness.c starts one for the C
 * tests: for one test class (a JUnit extension: perClass) or one test (new Daemon(sections)
 * .start(), closed by try-with-resources). A fresh temporary directory with the socket, the
 * configuration (hugepages from $HP_TEST_HUGEPAGES, "prefer" by default, plus the test's own keys
 * and sections) and the spill directory; the build's hugepoold (system property hugepool.build)
 * run with -v. Its output is read by a thread of its own into `lines` and daemon.log; the start
 * and restart return once the daemon logged its start line ("Cold start" or "Warm start"), which
 * it writes after its socket listens and just before READY=1, so no test sleeps waiting for it.
 * stop() and start() again is a cold restart, start(env) one with more environment (the daemon's
 * fault injection), restart() a warm one. Start and restart from the test's thread: the daemon
 * gets SIGTERM when the thread that started it ends.
 *
 * The engine modules' tests use it too: the binding's build packs it alone into
 * hugepool-VERSION-tests.jar (java/pom.xml), which their poms take as a test dependency.
 */
package org.hugepool;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

public final class Daemon implements AutoCloseable, BeforeAllCallback, AfterAllCallback {
    public static final Path BUILD = Paths.get(System.getProperty("hugepool.build", "../build")).toAbsolutePath().normalize();
    private static final long START_MS = 60_000;

    public final Path dir, socket, conf;
    private Process proc;
    private final List<String> lines = new ArrayList<>(); // guarded by itself
    private int starts; // start lines seen

    /** A daemon for one test, not started: sections are its configuration ("@DIR@": the directory). */
    public Daemon(String sections) throws IOException {
        this("", sections);
    }

    /** A [journal NAME] section: segment size, segments, when_full = block; under the daemon's directory. */
    public static String journal(String name, String segmentSize, int segments) {
        return "[journal " + name + "]\ndirectory = @DIR@/" + name + "\nsegment_size = " + segmentSize + "\nsegments = "
                + segments + "\nwhen_full = block\n";
    }

    private Daemon(String globals, String sections) throws IOException {
        dir = Files.createTempDirectory("hugepool-java.");
        socket = dir.resolve("sock");
        conf = dir.resolve("hugepoold.conf");
        String huge = System.getenv().getOrDefault("HP_TEST_HUGEPAGES", "prefer");
        String text = "socket = " + socket + "\n" + (globals.contains("hugepages =") ? "" : "hugepages = " + huge + "\n")
                + "spill_directory = " + dir.resolve("spill") + "\n" + globals + "\n" + sections;
        Files.writeString(conf, text.replace("@DIR@", dir.toString()));
    }

    /**
     * A daemon for a test class, as a JUnit extension: started before its tests, stopped after
     * ({@code @RegisterExtension static final Daemon daemon = Daemon.perClass(...)}). globals are
     * more global keys, sections its [class] and [journal] sections ("@DIR@": the directory).
     */
    static Daemon perClass(String globals, String sections) {
        try {
            return new Daemon(globals, sections);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        start();
    }

    @Override
    public void afterAll(ExtensionContext context) throws Exception {
        close();
    }

    /** Start the daemon; returns once it serves. */
    public Daemon start() throws IOException, InterruptedException {
        return start(Map.of());
    }

    /** Start the daemon with more environment; returns once it serves. */
    public Daemon start(Map<String, String> env) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        // a crashed test JVM runs no close(): the daemon gets SIGTERM when its parent ends (as
        // harness.c's PR_SET_PDEATHSIG), where util-linux's setpriv can say so
        if (Files.isExecutable(Paths.get("/usr/bin/setpriv")))
            cmd.addAll(List.of("/usr/bin/setpriv", "--pdeathsig", "TERM", "--"));
        cmd.addAll(List.of(BUILD.resolve("hugepoold").toString(), "-v", "-c", conf.toString()));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
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
                        java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND)) {
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

    /* Wait until the n-th start line, or fail when the daemon exits or START_MS passes. */
    private void awaitStart(int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(START_MS);
        synchronized (lines) {
            for (;;) {
                int seen = 0;
                for (String l : lines)
                    if (l.contains("Cold start") || l.contains("Warm start"))
                        seen++;
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
    public void restart() throws IOException, InterruptedException {
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
    public String journalStat(String name) throws IOException, InterruptedException {
        Process ctl = new ProcessBuilder(BUILD.resolve("hugepoolctl").toString(), "-s", socket.toString(), "--json",
                "journal", "stat", name).redirectErrorStream(true).start();
        String out = new String(ctl.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (ctl.waitFor() != 0)
            throw new IllegalStateException("hugepoolctl journal stat: " + out);
        return out;
    }

    /** How many lines of the log contain s. */
    int logCount(String s) {
        synchronized (lines) {
            return (int) lines.stream().filter(l -> l.contains(s)).count();
        }
    }

    /** Everything the daemon logged so far. */
    public String log() {
        synchronized (lines) {
            return String.join("\n", lines);
        }
    }

    String socketPath() {
        return socket.toString();
    }

    /**
     * Send the daemon a signal by name ("STOP", "CONT", "KILL"...); after KILL, wait until it is
     * gone (start() again is then a cold restart after a crash).
     */
    public void signal(String sig) throws IOException, InterruptedException {
        Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(proc.pid())).redirectErrorStream(true).start();
        String out = new String(k.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (k.waitFor() != 0)
            throw new IllegalStateException("kill -" + sig + ": " + out);
        if (sig.equals("KILL"))
            proc.waitFor();
    }

    /** SIGTERM, and wait for the daemon to exit (30 s, then SIGKILL); start() again is a cold restart. */
    public void stop() throws InterruptedException {
        if (proc != null && proc.isAlive()) {
            proc.destroy();
            if (!proc.waitFor(30, TimeUnit.SECONDS))
                proc.destroyForcibly().waitFor();
        }
    }

    /** stop(), and remove the directory. */
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

    /**
     * A JVM of the same Java, with the binding on its class path, running mainClass with args
     * ("-cp", PATH first: that class path instead).
     */
    static ProcessBuilder jvm(String mainClass, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add("-D" + NativeLibrary.PROPERTY + "=" + System.getProperty(NativeLibrary.PROPERTY));
        if (!(args.length > 1 && args[0].equals("-cp"))) {
            cmd.add("-cp");
            cmd.add(System.getProperty("hugepool.classpath"));
        } else {
            cmd.add(args[0]);
            cmd.add(args[1]);
            args = java.util.Arrays.copyOfRange(args, 2, args.length);
        }
        cmd.add(mainClass);
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectErrorStream(true);
    }
}
