/*
 * SPDX-License-Identifier: MIT
 *
 * ErrorTest.java - every error a user of the binding meets, each an exception of its own class
 * with the errno and the daemon's (or the library's) words: no daemon, an unknown class or
 * journal, a per-uid byte limit, more buffers than a class has, not free now, a handle used
 * after its close (pool, lease, writer, reader, spill stream), and a connection limit (whose case
 * waits until the daemon let go of its connections, so that the next case may connect).
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class ErrorTest {
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("max_bytes_per_uid = 6M\nmax_connections_per_uid = 4\n",
                "[class small]\nsize = 2M\ncount = 4\n[class one]\nsize = 2M\ncount = 1\n[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\n");

    private static void says(HugepoolException e, String errno, String words) {
        assertEquals(errno, e.errnoName(), e.getMessage());
        assertTrue(e.daemonMessage().contains(words), "the daemon's words \"" + words + "\" in: " + e.getMessage());
        assertTrue(e.getMessage().contains(e.daemonMessage()), e.getMessage());
    }

    @Test
    void noDaemon() {
        String path = daemon.dir.resolve("nobody-here.sock").toString();
        NoDaemonException e = assertThrows(NoDaemonException.class, () -> HugePool.connect(path));
        says(e, "ENOENT", path);
        assertTrue(e.getMessage().startsWith("connecting to hugepoold"), e.getMessage());
    }

    @Test
    void unknownClassAndJournal() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            NotFoundException e = assertThrows(NotFoundException.class, () -> pool.acquire("nosuch", 1, Duration.ZERO));
            says(e, "ENOENT", "nosuch");
            assertEquals(2, e.errno());
            says(assertThrows(NotFoundException.class, () -> pool.openJournalWriter("nosuch")), "ENOENT", "nosuch");
            says(assertThrows(NotFoundException.class, () -> pool.openJournalReader("nosuch", 1)), "ENOENT", "nosuch");
        }
    }

    @Test
    void limits() throws Exception {
        try (HugePool a = HugePool.connect(daemon.socketPath()); HugePool b = HugePool.connect(daemon.socketPath())) {
            Lease held = a.acquire("small", 2, Duration.ZERO);
            // 4 MiB held of 6 MiB: two more buffers pass max_bytes_per_uid, refused at once
            LimitExceededException e = assertThrows(LimitExceededException.class,
                    () -> b.acquire("small", 2, Duration.ofSeconds(10)));
            says(e, "EDQUOT", "max_bytes_per_uid");
            held.close();
            b.acquire("small", 2, Duration.ZERO).close();
            says(assertThrows(LimitExceededException.class, () -> b.acquire("small", 5, Duration.ZERO)), "E2BIG", "");
            try (Lease one = a.acquire("one", 1, Duration.ZERO)) {
                assertEquals(1, one.count());
                says(assertThrows(HugepoolTimeoutException.class, () -> b.acquire("one", 1, Duration.ZERO)), "EAGAIN", "");
                says(assertThrows(HugepoolTimeoutException.class, () -> b.acquire("one", 1, Duration.ofMillis(50))),
                        "ETIMEDOUT", "");
            }
        }
    }

    @Test
    void connectionLimit() throws Exception {
        HugePool[] c = new HugePool[4];
        try {
            for (int i = 0; i < c.length; i++)
                c[i] = HugePool.connect(daemon.socketPath());
            says(assertThrows(LimitExceededException.class, () -> HugePool.connect(daemon.socketPath())), "EUSERS",
                    "max_connections_per_uid");
        } finally {
            for (HugePool p : c)
                if (p != null)
                    p.close();
            awaitOnlyObserver();
        }
    }

    @Test
    void writersCountAsConnections() throws Exception {
        // max_connections_per_uid = 4: the pool's connection and three writers' fill it
        try (HugePool pool = HugePool.connect(daemon.socketPath()); JournalWriter a = pool.openJournalWriter("j");
                JournalWriter b = pool.openJournalWriter("j"); JournalWriter c = pool.openJournalWriter("j")) {
            assertTrue(a.isOpen() && b.isOpen() && c.isOpen());
            LimitExceededException e = assertThrows(LimitExceededException.class, () -> pool.openJournalWriter("j"));
            says(e, "EUSERS", "max_connections_per_uid");
            assertTrue(e.operation().contains("a writer of journal \"j\" (its own connection)"), e.getMessage());
        } finally {
            awaitOnlyObserver();
        }
    }

    /*
     * A closed connection is gone for the daemon only once its event loop saw the socket close:
     * until then it still counts against max_connections_per_uid, and the next case's connect
     * could be refused. Wait (bounded) until an observer is the daemon's only client.
     */
    private static void awaitOnlyObserver() throws Exception {
        long end = System.nanoTime() + 10_000_000_000L;
        for (;;) {
            try (HugePool observer = HugePool.connect(daemon.socketPath())) {
                if (observer.status().clients() == 1)
                    return;
            } catch (LimitExceededException e) {
                // the closed ones still count
            }
            if (System.nanoTime() > end)
                throw new AssertionError("the daemon still counts the closed connections after 10 s");
            Thread.sleep(10);
        }
    }

    @Test
    void closedHandles() throws Exception {
        HugePool pool = HugePool.connect(daemon.socketPath());
        Lease lease = pool.acquire("small", 1, Duration.ZERO);
        JournalWriter w = pool.openJournalWriter("j");
        JournalReader r = pool.openJournalReader("j", 1);
        SpillStream s = pool.openSpill();
        lease.close();
        assertThrows(ClosedException.class, () -> lease.buffer(0));
        w.close();
        ClosedException e = assertThrows(ClosedException.class, () -> w.append(new byte[1]));
        assertEquals("EBADF", e.errnoName());
        assertTrue(e.getMessage().contains("the writer is closed"), e.getMessage());
        assertThrows(ClosedException.class, () -> w.setWaitMode(JournalWriter.WaitMode.SLEEP));
        Lease second = pool.acquire("small", 1, Duration.ZERO);
        pool.close();
        pool.close();
        assertThrows(ClosedException.class, () -> pool.acquire("small", 1, Duration.ZERO));
        assertThrows(ClosedException.class, pool::status);
        assertThrows(ClosedException.class, () -> pool.openSpill());
        assertThrows(ClosedException.class, () -> second.buffer(0)); // released by the pool's close
        assertThrows(ClosedException.class, r::next);
        assertThrows(ClosedException.class, () -> s.write(new byte[1]));
        r.close();
        s.close();
    }
}
