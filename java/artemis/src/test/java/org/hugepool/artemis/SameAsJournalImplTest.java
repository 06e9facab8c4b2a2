/*
 * SPDX-License-Identifier: MIT
 *
 * SameAsJournalImplTest.java - the same random operations applied to Artemis's own JournalImpl
 * (NIO) and to a HugepoolJournal, then both loaded: the same committed records in the same
 * order, the same prepared and failed transactions. After a clean stop, after SIGKILL of the JVM
 * that wrote them (a child JVM, killed once both said everything is durable), and with a reclaim
 * threshold small enough that records are carried forward and the journal cut many times on the
 * way. A prepared transaction found by the load is committed on both, and both load the same again.
 */
package org.hugepool.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.apache.activemq.artemis.core.journal.impl.JournalImpl;
import org.hugepool.Daemon;
import org.junit.jupiter.api.Test;

class SameAsJournalImplTest {
    private static final long RECLAIM_AT = 512 << 10;
    private static final int OPS = Integer.getInteger("hugepool.test.ops", 4000);

    /* Equal loads, or the first line that differs (both whole in files beside the test's report). */
    private static void same(String what, String expect, String actual) throws java.io.IOException {
        if (expect.equals(actual))
            return;
        String[] e = expect.split("\n"), a = actual.split("\n");
        int i = 0;
        while (i < e.length && i < a.length && e[i].equals(a[i]))
            i++;
        java.nio.file.Path dir = Paths.get("loads");
        java.nio.file.Files.createDirectories(dir);
        java.nio.file.Files.writeString(dir.resolve("journalimpl.txt"), expect);
        java.nio.file.Files.writeString(dir.resolve("hugepool.txt"), actual);
        assertEquals(i < e.length ? cut(e[i]) : "(end)", i < a.length ? cut(a[i]) : "(end)", what + ": line " + (i + 1)
                + " of the loads differs (" + e.length + " and " + a.length + " lines; both in " + dir.toAbsolutePath() + ")");
    }

    private static String cut(String s) {
        return s.length() > 120 ? s.substring(0, 120) + "..." : s;
    }

    @Test
    void loadsAsJournalImplDoes() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "2M", 8)).start()) {
            String socket = d.socket.toString();
            File artDir = d.dir.resolve("artemis").toFile();

            // 1: written here, stopped cleanly
            JournalImpl art = Workload.artemis(artDir);
            HugepoolJournal hp = Workload.hugepool(socket, "j", RECLAIM_AT);
            art.loadInternalOnly();
            hp.loadInternalOnly();
            Workload w = new Workload(42, 1);
            w.run(OPS, art, hp);
            w.prepareOne(art, hp);
            long reclaims = hp.reclaims();
            art.stop();
            hp.stop();
            assertTrue(reclaims > 0, "the workload never reclaimed: nothing was carried forward");

            art = Workload.artemis(artDir);
            hp = Workload.hugepool(socket, "j", RECLAIM_AT);
            String expect = Workload.describe(art);
            same("load after a clean stop", expect, Workload.describe(hp));
            assertTrue(expect.contains("\nP "), "the workload left no prepared transaction");

            // a prepared transaction found by the load commits on both
            List<RecordInfo> recs = new ArrayList<>();
            List<PreparedTransactionInfo> prepared = new ArrayList<>();
            art.stop();
            hp.stop();
            art = Workload.artemis(artDir);
            hp = Workload.hugepool(socket, "j", RECLAIM_AT);
            art.load(recs, prepared, null);
            hp.loadInternalOnly();
            long tx = prepared.get(0).getId();
            art.appendCommitRecord(tx, true);
            hp.appendCommitRecord(tx, true);
            art.stop();
            hp.stop();
            art = Workload.artemis(artDir);
            hp = Workload.hugepool(socket, "j", RECLAIM_AT);
            expect = Workload.describe(art);
            same("load after committing prepared transaction " + tx, expect, Workload.describe(hp));
            art.stop();
            hp.stop();

            // 2: written by a JVM killed with SIGKILL once both journals said it is durable
            List<String> cmd = List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
                    "--enable-native-access=ALL-UNNAMED", "-Dhugepool.jni.library=" + System.getProperty("hugepool.jni.library"),
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", System.getProperty("java.class.path"),
                    Workload.class.getName(), socket, "j", artDir.toString(), "7", Integer.toString(OPS),
                    Long.toString(RECLAIM_AT), "100000000");
            Process child = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            String line;
            try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
                line = out.readLine();
                assertTrue(line != null && line.startsWith("SYNCED "), "the child said " + line);
                child.destroyForcibly(); // SIGKILL
                assertTrue(child.waitFor(60, TimeUnit.SECONDS));
            }
            assertTrue(Long.parseLong(line.substring(7)) > 0, "the killed workload never reclaimed");
            art = Workload.artemis(artDir);
            hp = Workload.hugepool(socket, "j", RECLAIM_AT);
            same("load after SIGKILL", Workload.describe(art), Workload.describe(hp));
            art.stop();
            hp.stop();
        }
    }
}
