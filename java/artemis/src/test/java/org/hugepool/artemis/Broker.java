/*
 * SPDX-License-Identifier: MIT
 *
 * Broker.java - a standalone ActiveMQ Artemis 2.40.0 broker for the tests: made with the
 * distribution's own `artemis create` (unpacked by Maven into the build directory, system
 * property hugepool.artemis.home), switched to hugepool as hugepool-artemis(7) tells an operator
 * (the two jars in the instance's lib/, the plugin in broker.xml's <core>, the JNI library's path
 * in etc/artemis.profile), and run with `artemis run` as a child process. start() returns at the
 * broker's "Server is now active" line or fails with its output when it exits first; kill() is
 * SIGKILL. Only the core acceptor, on a free port of 127.0.0.1.
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
    private static final long START_MS = 120_000;

    final Path instance;
    final int port;
    private Process proc;
    private final List<String> lines = new ArrayList<>(); // guarded by itself
    private int actives;

    /** `artemis create` an instance in dir, and switch it to hugepool with these plugin properties. */
    Broker(Path dir, Map<String, String> plugin) throws IOException, InterruptedException {
        instance = dir.resolve("broker");
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        run(List.of(HOME.resolve("bin/artemis").toString(), "create", "--silent", "--force", "--no-web", "--allow-anonymous",
                "--user", "a", "--password", "a", "--no-autotune", "--no-amqp-acceptor", "--no-hornetq-acceptor",
                "--no-mqtt-acceptor", "--no-stomp-acceptor", "--host", "127.0.0.1", "--default-port", Integer.toString(port),
                instance.toString()));
        // the operator's change (hugepool-artemis(7), STANDALONE BROKER)
        Path lib = instance.resolve("lib");
        Files.createDirectories(lib);
        Files.copy(Paths.get(System.getProperty("hugepool.jar")), lib.resolve("hugepool.jar"), StandardCopyOption.REPLACE_EXISTING);
        Files.copy(Paths.get(System.getProperty("hugepool.artemis.jar")), lib.resolve("hugepool-artemis.jar"),
                StandardCopyOption.REPLACE_EXISTING);
        StringBuilder props = new StringBuilder();
        for (Map.Entry<String, String> p : plugin.entrySet())
            props.append("            <property key=\"").append(p.getKey()).append("\" value=\"").append(p.getValue()).append("\"/>\n");
        Path xml = instance.resolve("etc/broker.xml");
        String b = Files.readString(xml);
        b = b.replaceFirst("(?s)(<core xmlns=\"urn:activemq:core\"[^>]*>)", "$1\n        <broker-plugins>\n"
                + "          <broker-plugin class-name=\"org.hugepool.artemis.HugepoolJournals\">\n" + props
                + "          </broker-plugin>\n        </broker-plugins>\n");
        Files.writeString(xml, b);
        Path profile = instance.resolve("etc/artemis.profile");
        Files.writeString(profile, Files.readString(profile) + "\nJAVA_ARGS=\"$JAVA_ARGS -Dhugepool.jni.library="
                + System.getProperty("hugepool.jni.library") + "\"\n");
    }

    private static String run(List<String> cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0)
            throw new IllegalStateException(String.join(" ", cmd) + ":\n" + out);
        return out;
    }

    /** Start `artemis run`; return once it is active, or fail with its output if it exits first. */
    Broker start() throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(instance.resolve("bin/artemis").toString(), "run").redirectErrorStream(true);
        proc = pb.start();
        Process p = proc;
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null;)
                    synchronized (lines) {
                        lines.add(line);
                        lines.notifyAll();
                    }
            } catch (IOException e) {
                // gone
            }
            synchronized (lines) {
                lines.notifyAll();
            }
        }, "broker output");
        t.setDaemon(true);
        t.start();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(START_MS);
        synchronized (lines) {
            for (;;) {
                int n = (int) lines.stream().filter(l -> l.contains("AMQ221007")).count();
                if (n > actives) {
                    actives = n;
                    return this;
                }
                long left = deadline - System.nanoTime();
                if (!proc.isAlive() || left <= 0)
                    throw new BrokerFailed(String.join("\n", lines));
                lines.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
        }
    }

    /** The broker did not become active: its output. */
    static final class BrokerFailed extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        BrokerFailed(String output) {
            super("the broker did not start:\n" + output);
        }
    }

    /** Wait for the broker to exit by itself (a failed journal stops it); its output. */
    String awaitExit(long seconds) throws InterruptedException {
        if (!proc.waitFor(seconds, TimeUnit.SECONDS))
            throw new IllegalStateException("the broker still runs after " + seconds + " s:\n" + output());
        return output();
    }

    String output() {
        synchronized (lines) {
            return String.join("\n", lines);
        }
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
