/*
 * SPDX-License-Identifier: MIT
 *
 * Broker.java - a standalone ActiveMQ Artemis 2.40.0 broker for the tests: made once with the
 * distribution's own `artemis create` (unpacked by Maven into the build directory, system
 * property hugepool.artemis.home), switched to hugepool as hugepool-artemis(7) tells an operator
 * (the two jars in the instance's lib/, the plugin in broker.xml's <core>, the JNI library's path
 * in etc/artemis.profile), and run with `artemis run` as a child process, as often as a test
 * class needs: configure() rewrites the plugin's properties between runs, so one instance serves
 * every case (`artemis create` costs seconds).
 *
 * start() returns at the broker's "Server is now active" line, or fails with that run's output
 * once the broker exited (its output ended and the process is gone: never a fixed wait);
 * startAs(uid) runs it as another uid. kill() is SIGKILL, stop() SIGTERM, awaitExit() waits for
 * a broker that stops by itself. Only the core acceptor, on a free port of 127.0.0.1.
 */
package org.hugepool.artemis;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

final class Broker implements AutoCloseable {
    static final Path HOME = Paths.get(System.getProperty("hugepool.artemis.home", "dist/apache-artemis-2.40.0"));
    private static final long START_MS = 120_000; // a start that takes this long is a hang
    private static final String PLUGINS = "(?s)\\n *<broker-plugins>.*?</broker-plugins>\\n";
    /*
     * The JVM options of `artemis create` and `artemis run` in place of the profiles' defaults
     * (both scripts take JAVA_ARGS from the environment when it is set): C1 only, the serial
     * collector and a small heap halve a broker's start on a loaded 2-core machine (13 s against
     * 27 s), and nothing a test checks depends on them. The last two are the profile's own.
     */
    private static final String JAVA_ARGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xms64M -Xmx512M"
            + " --add-opens java.base/jdk.internal.misc=ALL-UNNAMED -Dlog4j2.disableJmx=true";

    final Path instance;
    final int port;
    private Process proc;
    private Output out;

    /** The output of one run of the broker, read by a thread of its own. */
    private static final class Output {
        final List<String> lines = new ArrayList<>(); // guarded by this
        boolean ended; // guarded by this

        synchronized String text() {
            return String.join("\n", lines);
        }
    }

    /** `artemis create` an instance in dir and switch it to hugepool with these plugin properties. */
    Broker(Path dir, Map<String, String> plugin) throws IOException, InterruptedException {
        instance = dir.resolve("broker");
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        // --nio: the journals are hugepool's anyway, and ASYNCIO would load libaio's glue, whose
        // lock file in /tmp (artemisJLHandler_*) a broker killed by a test leaves behind
        run(List.of(HOME.resolve("bin/artemis").toString(), "create", "--silent", "--force", "--no-web", "--allow-anonymous",
                "--user", "a", "--password", "a", "--nio", "--no-autotune", "--no-amqp-acceptor", "--no-hornetq-acceptor",
                "--no-mqtt-acceptor", "--no-stomp-acceptor", "--host", "127.0.0.1", "--default-port", Integer.toString(port),
                instance.toString()));
        // the operator's change (hugepool-artemis(7), STANDALONE BROKER)
        Path lib = instance.resolve("lib");
        Files.createDirectories(lib);
        Files.copy(Paths.get(System.getProperty("hugepool.jar")), lib.resolve("hugepool.jar"), StandardCopyOption.REPLACE_EXISTING);
        Files.copy(Paths.get(System.getProperty("hugepool.artemis.jar")), lib.resolve("hugepool-artemis.jar"),
                StandardCopyOption.REPLACE_EXISTING);
        configure(plugin);
        Path profile = instance.resolve("etc/artemis.profile");
        Files.writeString(profile, Files.readString(profile) + "\nJAVA_ARGS=\"$JAVA_ARGS -Dhugepool.jni.library="
                + System.getProperty("hugepool.jni.library") + "\"\n");
    }

    /** Put the plugin in broker.xml's <core> with these properties, in place of the one there. */
    void configure(Map<String, String> plugin) throws IOException {
        StringBuilder props = new StringBuilder();
        for (Map.Entry<String, String> p : plugin.entrySet())
            props.append("            <property key=\"").append(p.getKey()).append("\" value=\"").append(p.getValue()).append("\"/>\n");
        Path xml = instance.resolve("etc/broker.xml");
        String b = Files.readString(xml).replaceFirst(PLUGINS, "\n");
        b = b.replaceFirst("(?s)(<core xmlns=\"urn:activemq:core\"[^>]*>)", "$1\n        <broker-plugins>\n"
                + "          <broker-plugin class-name=\"org.hugepool.artemis.HugepoolJournals\">\n" + props
                + "          </broker-plugin>\n        </broker-plugins>\n");
        Files.writeString(xml, b);
    }

    private static ProcessBuilder process(List<String> cmd) {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put("JAVA_ARGS", JAVA_ARGS);
        return pb;
    }

    private static String run(List<String> cmd) throws IOException, InterruptedException {
        Process p = process(cmd).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0)
            throw new IllegalStateException(String.join(" ", cmd) + ":\n" + out);
        return out;
    }

    /**
     * The distribution's own client against this broker, as an operator runs it (`artemis
     * producer`, `artemis consumer`): its output, or fail with it if it exits other than 0.
     */
    String client(String command, String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(HOME.resolve("bin/artemis").toString(), command, "--silent", "--url", url()));
        cmd.addAll(List.of(args));
        return run(cmd);
    }

    /** Start `artemis run`; return once it is active, or fail with its output if it exits first. */
    Broker start() throws IOException, InterruptedException {
        return start(List.of());
    }

    /*
     * Start it as uid (and gid) `uid`, with no supplementary groups: the daemon sees that uid on
     * its socket. The broker keeps root's power over files (CAP_DAC_OVERRIDE and
     * CAP_DAC_READ_SEARCH, ambient), so it reads the build and the Maven repository wherever the
     * tree is checked out; what hugepoold allows that uid is all that changes.
     */
    Broker startAs(int uid) throws IOException, InterruptedException {
        return start(List.of("/usr/bin/setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups",
                "--inh-caps=+dac_override,+dac_read_search", "--ambient-caps=+dac_override,+dac_read_search", "--"));
    }

    private Broker start(List<String> prefix) throws IOException, InterruptedException {
        if (proc != null && proc.isAlive())
            throw new IllegalStateException("the broker already runs");
        List<String> cmd = new ArrayList<>(prefix);
        cmd.addAll(List.of(instance.resolve("bin/artemis").toString(), "run"));
        Process p = process(cmd).start();
        Output o = new Output();
        proc = p;
        out = o;
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null;)
                    synchronized (o) {
                        o.lines.add(line);
                        o.notifyAll();
                    }
            } catch (IOException e) {
                // the broker is gone: its output ended
            }
            synchronized (o) {
                o.ended = true;
                o.notifyAll();
            }
        }, "broker output");
        t.setDaemon(true);
        t.start();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(START_MS);
        synchronized (o) {
            for (;;) {
                if (o.lines.stream().anyMatch(l -> l.contains("AMQ221007")))
                    return this;
                long left = deadline - System.nanoTime();
                if (o.ended || left <= 0)
                    break;
                o.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
        }
        // its output ended: the broker exited, or is about to (it was not active)
        if (!p.waitFor(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
            p.destroyForcibly().waitFor();
            throw new IllegalStateException("the broker neither became active nor exited in " + START_MS / 1000 + " s:\n"
                    + o.text());
        }
        throw new BrokerFailed(p.exitValue(), o.text());
    }

    /** The broker did not become active: its exit status and output. */
    static final class BrokerFailed extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        BrokerFailed(int status, String output) {
            super("the broker did not start (exit status " + status + "):\n" + output);
        }
    }

    boolean running() {
        return proc != null && proc.isAlive();
    }

    /** Wait for the broker to exit by itself (a failed journal stops it); this run's output. */
    String awaitExit(long seconds) throws InterruptedException {
        if (!proc.waitFor(seconds, TimeUnit.SECONDS))
            throw new IllegalStateException("the broker still runs after " + seconds + " s:\n" + output());
        synchronized (out) {
            while (!out.ended)
                out.wait();
        }
        return output();
    }

    /** This run's output so far. */
    String output() {
        return out == null ? "" : out.text();
    }

    String url() {
        return "tcp://127.0.0.1:" + port;
    }

    void kill() throws InterruptedException {
        if (proc != null && proc.isAlive()) {
            proc.destroyForcibly();
            proc.waitFor();
        }
    }

    void stop() throws InterruptedException {
        if (proc != null && proc.isAlive()) {
            proc.destroy();
            if (!proc.waitFor(60, TimeUnit.SECONDS))
                kill();
        }
    }

    @Override
    public void close() {
        if (proc != null)
            proc.destroyForcibly();
    }
}
