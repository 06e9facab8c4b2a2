/*
 * SPDX-License-Identifier: MIT
 *
 * PoolTest.java - leases from Java against a real hugepoold: acquire and release as the daemon
 * counts them; a JVM killed with SIGKILL gives its leases back, and what it wrote is there for
 * the next JVM of the same user (warm re-acquire); a stale ByteBuffer after release is touched,
 * the JVM lives, it reads zeroes and the next holder's bytes are untouched; the status.
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class PoolTest {
    private static final long MIB = 1 << 20;
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("",
            "[class small]\nsize = 2M\ncount = 4\n[class one]\nsize = 2M\ncount = 1\n"
                + "[class kill]\nsize = 4M\ncount = 2\n");

    static boolean all(ByteBuffer b, int v) {
        for (int i = 0; i < b.capacity(); i++)
            if (b.get(i) != (byte) v)
                return false;
        return true;
    }

    static void fill(ByteBuffer b, int v) {
        for (int i = 0; i < b.capacity(); i++)
            b.put(i, (byte) v);
    }

    @Test
    void acquireAndRelease() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            Lease lease = pool.acquire("small", 2, Duration.ZERO);
            assertEquals(2, lease.count());
            assertEquals("small", lease.className());
            assertNotEquals(lease.leaseId(0), lease.leaseId(1));
            for (ByteBuffer b : lease.buffers()) {
                assertTrue(b.isDirect());
                assertEquals(ByteOrder.nativeOrder(), b.order());
                assertEquals(2 * MIB, b.capacity());
                fill(b, 0x5a);
            }
            assertEquals(1, lease.slices(0).size());
            Status st = pool.status();
            assertEquals(2, st.bufferClass("small").leased());
            assertEquals(2, st.bufferClass("small").free());
            assertEquals(2, st.leases());
            lease.close();
            lease.close(); // twice is fine
            assertFalse(lease.isOpen());
            st = pool.status();
            assertEquals(0, st.bufferClass("small").leased());
            assertEquals(4, st.bufferClass("small").free());
            // all or none: 4 free, 5 asked
            assertThrows(LimitExceededException.class, () -> pool.acquire("small", 5, Duration.ZERO));
            // closing the pool releases what it holds
            pool.acquire("small", 4, Duration.ofSeconds(1));
        }
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            assertEquals(4, pool.status().bufferClass("small").free());
        }
    }

    /* Whether this process maps anything at address (within a range of /proc/self/maps). */
    private static boolean mapped(long address) throws Exception {
        for (String l : java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/self/maps"))) {
            String[] range = l.substring(0, l.indexOf(' ')).split("-");
            if (Long.compareUnsigned(Long.parseUnsignedLong(range[0], 16), address) <= 0
                    && Long.compareUnsigned(address, Long.parseUnsignedLong(range[1], 16)) < 0)
                return true;
        }
        return false;
    }

    @Test
    void acquireMakesNoViewsAndReleaseUnmapsTheUnviewed() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            Lease lease = pool.acquire("small", 2, Duration.ofSeconds(5));
            long viewed = lease.nativeDescription()[0], unviewed = lease.nativeDescription()[3];
            ByteBuffer kept = lease.buffer(0);
            kept.putLong(0, 7);
            assertTrue(mapped(viewed) && mapped(unviewed));
            lease.close();
            // a view was made of buffer 0: its range stays mapped (private zeroes) while the view
            // is reachable; none of buffer 1: nothing can point into it, so it is gone at once
            assertTrue(mapped(viewed));
            assertEquals(0, kept.getLong(0));
            assertFalse(mapped(unviewed), "the range of a buffer never viewed is unmapped by the release");
        }
    }

    @Test
    void staleBufferAfterRelease() throws Exception {
        try (HugePool a = HugePool.connect(daemon.socketPath()); HugePool b = HugePool.connect(daemon.socketPath())) {
            Lease lease = a.acquire("one", 1, Duration.ofSeconds(5));
            ByteBuffer stale = lease.buffer(0);
            ByteBuffer staleSlice = stale.duplicate().position(4096).slice();
            fill(stale, 0x11);
            lease.close();
            assertThrows(ClosedException.class, () -> lease.buffer(0));
            // the JVM lives: the range is private zero pages now, not unmapped
            assertTrue(all(stale, 0), "a stale buffer reads zeroes");
            fill(stale, 0x77); // and its writes are its own
            // the next holder (same uid: the buffer comes back warm) finds what the lease left,
            // untouched by the stale writes
            try (Lease next = b.acquire("one", 1, Duration.ofSeconds(5))) {
                ByteBuffer nb = next.buffer(0);
                assertTrue(all(nb, 0x11), "the next holder's bytes are untouched by a stale buffer");
                fill(nb, 0x22);
                assertTrue(all(stale, 0x77), "the next holder's writes do not reach a stale buffer");
                assertEquals((byte) 0x77, staleSlice.get(0));
            }
        }
    }

    @Test
    void staleBufferAfterPoolClose() throws Exception {
        ByteBuffer stale;
        try (HugePool a = HugePool.connect(daemon.socketPath())) {
            stale = a.acquire("one", 1, Duration.ofSeconds(5)).buffer(0);
            fill(stale, 0x33);
        }
        assertTrue(all(stale, 0), "after the pool's close a kept buffer reads zeroes");
        fill(stale, 1);
    }

    @Test
    void sigkilledJvmGivesItsLeasesBackWarm() throws Exception {
        Process child = Daemon.jvm("org.hugepool.Holder", daemon.socketPath(), "kill", "2", "171").start();
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream()));
            String line = out.readLine();
            assertEquals("holding 2", line, "the other JVM's output");
            assertEquals(2, pool.status().bufferClass("kill").leased());
            child.destroyForcibly(); // SIGKILL
            assertTrue(child.waitFor(30, TimeUnit.SECONDS));
            assertEquals(137, child.exitValue());
            // the daemon sees the socket close and grants the waiting acquire
            try (Lease lease = pool.acquire("kill", 2, Duration.ofSeconds(30))) {
                for (ByteBuffer b : lease.buffers())
                    assertTrue(all(b, 171), "what the killed JVM wrote is there for the next (warm)");
            }
        } finally {
            child.destroyForcibly();
        }
    }

    @Test
    void status() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            Status st = pool.status();
            assertTrue(st.daemonPid() > 0);
            assertEquals(3, st.classes().size());
            assertEquals(2 * MIB, st.bufferClass("one").size());
            assertEquals((4 + 1) * 2 * MIB + 2 * 4 * MIB, st.poolBytes());
            assertTrue(st.hugetlb() || !st.fallbackReason().isEmpty() || System.getenv("HP_TEST_HUGEPAGES") != null,
                    "hugetlb, or a reason why not: " + st);
        }
    }
}
