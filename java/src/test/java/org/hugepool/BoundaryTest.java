/*
 * SPDX-License-Identifier: MIT
 *
 * BoundaryTest.java - what the binding does with arguments a caller should not pass (issue 39's
 * findings 6 and 7, and the JNI entry points read again): each one is refused with the
 * exception Java's own classes throw for it, before anything reaches native code, and the JVM
 * lives. The attacks run in another JVM (Attacks), all in one, since some of them crashed the
 * JVM before their fix: a crash fails the attack it happened in and every one after it, each
 * saying so, instead of killing the test run.
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class BoundaryTest {
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("",
            "[class one]\nsize = 2M\ncount = 2\n[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\n");

    private static final String[] ATTACKS = { "appendNullArray", "spillNullArray", "appendBadRange", "spillBadRange",
            "batchMismatchedArrays", "batchUnknownMode", "acquireForever", "awaitForever", "spillNegativeThreshold",
            "closedLeaseSegmentAppend", "closedLeaseSegmentSpill", "closedArenaAppend", "closedArenaBatch",
            "liveArenaAppend", "truncatedMappingAppend", "truncatedMappingSliceSpill" };
    private static final Map<String, String> results = new HashMap<>();
    private static final List<String> output = new ArrayList<>();
    private static int exit;

    @BeforeAll
    static void attack() throws Exception {
        String[] args = new String[ATTACKS.length + 1];
        args[0] = daemon.socketPath();
        System.arraycopy(ATTACKS, 0, args, 1, ATTACKS.length);
        Process p = Daemon.jvm("org.hugepool.Attacks", args).start();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line; (line = r.readLine()) != null;) {
                output.add(line);
                if (line.startsWith("RESULT ")) {
                    String[] f = line.split(" ", 3);
                    results.put(f[1], f.length > 2 ? f[2] : "");
                }
            }
        }
        if (!p.waitFor(120, TimeUnit.SECONDS))
            p.destroyForcibly();
        exit = p.exitValue();
    }

    /* The attack's outcome: "ok", "skipped" or what it threw; fails if the JVM died in it or before. */
    private static String result(String attack) {
        String r = results.get(attack);
        assertNotNull(r, () -> "the attacking JVM exited with " + exit + " before " + attack + " had a result:\n"
                + String.join("\n", output.subList(Math.max(0, output.size() - 40), output.size())));
        return r;
    }

    private static void threw(String attack, Class<?> type) {
        String r = result(attack);
        if (r.equals("skipped"))
            return;
        assertTrue(r.startsWith(type.getName() + " "), attack + ": " + r);
    }

    @Test
    void theJvmLives() {
        result(ATTACKS[ATTACKS.length - 1]);
        assertEquals(0, exit, String.join("\n", output));
    }

    @Test
    void nullArrays() { // finding 6: SIGSEGV in the native method
        threw("appendNullArray", NullPointerException.class);
        threw("spillNullArray", NullPointerException.class);
    }

    @Test
    void rangesOutsideTheArray() {
        threw("appendBadRange", IndexOutOfBoundsException.class);
        threw("spillBadRange", IndexOutOfBoundsException.class);
    }

    @Test
    void nativeArraysOfMismatchedLengths() {
        threw("batchMismatchedArrays", IllegalArgumentException.class);
    }

    @Test
    void batchModeOutOfRange() {
        assertEquals("ok", result("batchUnknownMode"));
    }

    @Test
    void timeoutsBeyondMillis() {
        assertEquals("ok", result("acquireForever"));
        assertEquals("ok", result("awaitForever"));
    }

    @Test
    void spillThresholdBelowZero() {
        threw("spillNegativeThreshold", IllegalArgumentException.class);
    }

    @Test
    void closedSegmentsBuffers() { // finding 7: SIGSEGV, or another lease's bytes carried
        threw("closedLeaseSegmentAppend", IllegalStateException.class);
        threw("closedLeaseSegmentSpill", IllegalStateException.class);
        threw("closedArenaAppend", IllegalStateException.class);
        threw("closedArenaBatch", IllegalStateException.class);
    }

    @Test
    void liveSegmentsBuffers() {
        String r = result("liveArenaAppend");
        assertTrue(r.equals("ok") || r.equals("skipped"), r);
    }

    @Test
    void truncatedMapping() { // SIGBUS in the native method; Java's own read throws InternalError
        threw("truncatedMappingAppend", InternalError.class);
        threw("truncatedMappingSliceSpill", InternalError.class);
    }
}
