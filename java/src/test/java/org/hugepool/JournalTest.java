/*
 * SPDX-License-Identifier: MIT
 *
 * JournalTest.java - journals from Java: appends of arrays, heap and direct buffers and batches,
 * tickets and waits, append-and-wait's LSNs, the durable LSN, a replay from 1 and from the middle
 * with each record's LSN and bytes, truncate; lazy batches, held for the next record someone
 * waits for (journal l: max_batch_delay 10 s, so a record held too long is a timeout); and across a warm restart of the daemon
 * (hugepoolctl restart): the writer is cut off with the LSN the journal is durable to, the
 * HugePool's connection and its lease live on, a new writer goes on, and the replay holds every
 * acknowledged record once, in order. Waits beside appends: a wait does not take the writer from
 * the thread that appends, and a close waits for a wait in progress (never frees the writer
 * under it).
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class JournalTest {
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("", "[class small]\nsize = 2M\ncount = 2\n"
                + "[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\n"
                + "[journal r]\ndirectory = @DIR@/r\nsegment_size = 1M\n"
                + "[journal l]\ndirectory = @DIR@/l\nsegment_size = 1M\nmax_batch_delay = 10s\n"
                + "[journal w]\ndirectory = @DIR@/w\nsegment_size = 1M\n");

    static byte[] rec(String j, long i, int size) {
        byte[] b = new byte[size];
        byte[] tag = (j + ":" + i + ";").getBytes(StandardCharsets.US_ASCII);
        for (int k = 0; k < size; k++)
            b[k] = tag[k % tag.length];
        return b;
    }

    /* Every record of journal j from `from` on, as arrays, checking LSNs are consecutive. */
    static List<byte[]> replay(HugePool pool, String j, long from) throws Exception {
        List<byte[]> out = new ArrayList<>();
        try (JournalReader r = pool.openJournalReader(j, from)) {
            for (JournalRecord rec; (rec = r.next()) != null;) {
                assertEquals(from + out.size(), rec.lsn());
                assertTrue(rec.data().isReadOnly());
                out.add(rec.bytes());
            }
        }
        return out;
    }

    @Test
    void lazyBatches() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath()); JournalWriter w = pool.openJournalWriter("l")) {
            List<byte[]> sent = List.of(rec("l", 1, 100), rec("l", 2, 200), rec("l", 3, 300), rec("l", 4, 40),
                    rec("l", 5, 50));
            w.appendBatchLazy(sent.subList(0, 2));
            Thread.sleep(200);
            assertEquals(0, w.durableLsn(), "a lazy batch nobody waits for is held");
            assertEquals(0, pool.status().journal("l").syncs());
            assertEquals(3, w.appendAndWait(sent.get(2)));
            assertEquals(1, pool.status().journal("l").syncs(), "the lazy records went with the next one");
            long t = w.appendBatchLazy(sent.subList(3, 5));
            w.await(t, Duration.ofSeconds(5)); // a wait asks for them: long before 10 s
            assertEquals(5, w.durableLsn());
            List<byte[]> got = replay(pool, "l", 1);
            assertEquals(sent.size(), got.size());
            for (int i = 0; i < sent.size(); i++)
                assertArrayEquals(sent.get(i), got.get(i), "record " + (i + 1));
        }
    }

    @Test
    void appendWaitReplay() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath()); JournalWriter w = pool.openJournalWriter("j")) {
            List<byte[]> sent = new ArrayList<>();
            assertEquals(1, w.appendAndWait(rec("j", 1, 100)));
            sent.add(rec("j", 1, 100));
            long t = w.append(rec("j", 2, 1000));
            sent.add(rec("j", 2, 1000));
            ByteBuffer direct = ByteBuffer.allocateDirect(3000);
            direct.put(rec("j", 3, 3000)).flip();
            w.append(direct);
            assertEquals(0, direct.remaining(), "an append consumes the buffer");
            sent.add(rec("j", 3, 3000));
            ByteBuffer heap = ByteBuffer.wrap(rec("j", 4, 50)).asReadOnlyBuffer();
            t = w.append(heap);
            sent.add(rec("j", 4, 50));
            w.await(t, Duration.ofSeconds(10));
            assertTrue(w.durableLsn() >= 4);
            long first = w.appendBatchAndWait(rec("j", 5, 10), rec("j", 6, 0), rec("j", 7, 70000));
            assertEquals(5, first);
            sent.add(rec("j", 5, 10));
            sent.add(rec("j", 6, 0));
            sent.add(rec("j", 7, 70000));
            ByteBuffer b8 = ByteBuffer.allocateDirect(8);
            b8.put(0, (byte) 8);
            t = w.appendBatch(b8, ByteBuffer.wrap(rec("j", 9, 9)));
            sent.add(new byte[] { 8, 0, 0, 0, 0, 0, 0, 0 });
            sent.add(rec("j", 9, 9));
            w.awaitLsn(9, Duration.ofSeconds(10));
            w.setWaitMode(JournalWriter.WaitMode.SLEEP); // a waiter that sleeps at once still gets its sync
            assertEquals(10, w.appendAndWait(ByteBuffer.wrap(rec("j", 10, 200_000))));
            w.setWaitMode(JournalWriter.WaitMode.SPIN);
            assertThrows(NullPointerException.class, () -> w.setWaitMode(null)); // never reaches the JNI
            sent.add(rec("j", 10, 200_000));
            assertEquals("EMSGSIZE", assertThrows(HugepoolException.class, () -> w.append(new byte[(1 << 20) + 1]))
                    .errnoName());

            List<byte[]> got = replay(pool, "j", 1);
            assertEquals(sent.size(), got.size());
            for (int i = 0; i < sent.size(); i++)
                assertArrayEquals(sent.get(i), got.get(i), "record " + (i + 1));
            List<byte[]> tail = replay(pool, "j", 7);
            assertEquals(4, tail.size());
            assertArrayEquals(sent.get(6), tail.get(0));
            pool.truncateJournal("j", 5);
            assertEquals(10, pool.status().journal("j").durableLsn());
        }
    }

    @Test
    void acrossAWarmRestart() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath()); Lease lease = pool.acquire("small", 1, Duration.ZERO)) {
            lease.buffer(0).putLong(0, 0x1234_5678_9abcL);
            JournalWriter w = pool.openJournalWriter("r");
            long n = 0;
            for (; n < 50; n++)
                w.append(rec("r", n + 1, 200));
            w.await(w.append(rec("r", ++n, 200)), Duration.ofSeconds(10));

            daemon.restart();

            // a restart recovers the journal and closes its writers' connections
            DaemonGoneException gone = assertThrows(DaemonGoneException.class, () -> {
                for (int i = 0; i < 1000; i++)
                    w.appendAndWait(rec("x", i, 10));
            });
            assertTrue(gone.daemonMessage().contains("durable up to LSN " + n), gone.getMessage());
            w.close();
            // the pool's connection and its lease live on
            assertEquals(1, pool.status().leases());
            assertEquals(0x1234_5678_9abcL, lease.buffer(0).getLong(0));
            try (JournalWriter again = pool.openJournalWriter("r")) {
                assertEquals(n + 1, again.appendAndWait(rec("r", n + 1, 200)));
                n++;
            }
            List<byte[]> got = replay(pool, "r", 1);
            assertEquals(n, got.size());
            for (int i = 0; i < n; i++)
                assertArrayEquals(rec("r", i + 1, 200), got.get(i), "record " + (i + 1));
            try (JournalReader r = pool.openJournalReader("r", n + 1)) {
                assertNull(r.next());
            }
        }
    }

    /* A wait runs without the writer's monitor: the records it waits for are appended by
     * another thread while it waits, where that thread used to wait for the wait to end. */
    @Test
    void appendBesideAWait() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath()); JournalWriter w = pool.openJournalWriter("w")) {
            long n = w.appendAndWait(rec("w", 0, 10));
            Throwable[] got = new Throwable[1];
            Thread waiter = new Thread(() -> {
                try {
                    w.awaitLsn(n + 2, Duration.ofSeconds(20));
                } catch (Throwable e) {
                    got[0] = e;
                }
            });
            waiter.start();
            while (w.waiters() == 0 && waiter.isAlive())
                Thread.sleep(1);
            w.append(rec("w", 1, 100));
            assertEquals(n + 2, w.appendAndWait(rec("w", 2, 100)));
            waiter.join();
            assertNull(got[0], "the wait for records appended beside it");
        }
    }

    /* A close while another thread waits waits for that wait to end: the waiter gets its
     * timeout, never a freed writer; calls after the close throw ClosedException. What close
     * waits for is the wait's end (the waiter count at 0), not the waiter thread's: that thread
     * may still be on its way out when close returns (CI under Java 25 saw it alive). */
    @Test
    void closeWaitsForAWait() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            JournalWriter w = pool.openJournalWriter("w");
            long far = w.appendAndWait(rec("w", 0, 10)) + 1_000_000;
            Throwable[] got = new Throwable[1];
            Thread waiter = new Thread(() -> {
                try {
                    w.awaitLsn(far, Duration.ofMillis(1500));
                } catch (Throwable e) {
                    got[0] = e;
                }
            });
            waiter.start();
            while (w.waiters() == 0 && waiter.isAlive())
                Thread.sleep(1);
            w.close();
            assertEquals(0, w.waiters(), "close returned while a wait was in progress");
            waiter.join();
            assertTrue(got[0] instanceof HugepoolTimeoutException, String.valueOf(got[0]));
            assertThrows(ClosedException.class, () -> w.await(1, Duration.ZERO));
            assertThrows(ClosedException.class, () -> w.awaitLsn(1, Duration.ZERO));
        }
    }
}
