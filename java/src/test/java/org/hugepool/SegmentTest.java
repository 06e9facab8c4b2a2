/*
 * SPDX-License-Identifier: MIT
 *
 * SegmentTest.java - a leased buffer as one java.lang.foreign.MemorySegment on Java 22 and later,
 * against a real hugepoold: it is the buffer's memory (what a ByteBuffer view writes the segment
 * reads, and back); once the lease or its HugePool is closed every access to it throws, in any
 * thread, even one that was using it at that moment, and the JVM lives; the next holder's bytes
 * are untouched. Before Java 22 the call says why it cannot. The tests are compiled for Java 17,
 * so they reach the segment through Seg's method handles.
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class SegmentTest {
    private static final int SIZE = 2 << 20;
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("", "[class one]\nsize = 2M\ncount = 1\n");

    private static void needs22() {
        assumeTrue(Seg.TYPE != null, "MemorySegment needs Java 22 or later; this is Java " + Runtime.version().feature());
    }

    @Test
    void unsupportedBefore22() throws Exception {
        assumeTrue(Seg.TYPE == null, "this Java has MemorySegment");
        try (HugePool pool = HugePool.connect(daemon.socketPath()); Lease lease = pool.acquire("one", 1, Duration.ofSeconds(5))) {
            UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class,
                    () -> lease.segment(0, Object.class));
            assertTrue(e.getMessage().startsWith("a MemorySegment needs Java 22 or later"), e.getMessage());
        }
    }

    @Test
    void segmentIsTheBuffer() throws Exception {
        needs22();
        try (HugePool pool = HugePool.connect(daemon.socketPath()); Lease lease = pool.acquire("one", 1, Duration.ofSeconds(5))) {
            Object s = Seg.of(lease, 0);
            assertSame(s, Seg.of(lease, 0), "one segment per buffer");
            assertEquals(SIZE, Seg.size(s));
            ByteBuffer view = lease.buffer(0), through = Seg.bytes(s, 0, SIZE);
            view.putLong(SIZE - 8, 0x0123456789abcdefL);
            assertEquals(0x0123456789abcdefL, through.getLong(SIZE - 8));
            through.putLong(0, 42);
            assertEquals(42, view.getLong(0));
            assertThrows(IllegalArgumentException.class, () -> lease.segment(0, ByteBuffer.class));
            assertThrows(IndexOutOfBoundsException.class, () -> Seg.of(lease, 1));
        }
    }

    @Test
    void closedSegmentThrows() throws Exception {
        needs22();
        try (HugePool a = HugePool.connect(daemon.socketPath()); HugePool b = HugePool.connect(daemon.socketPath())) {
            Lease lease = a.acquire("one", 1, Duration.ofSeconds(5));
            Object s = Seg.of(lease, 0);
            ByteBuffer through = Seg.bytes(s, 0, SIZE);
            through.putLong(0, 0x1111);
            lease.close();
            assertThrows(IllegalStateException.class, () -> through.getLong(0), "a closed segment's buffer throws");
            assertThrows(IllegalStateException.class, () -> through.putLong(0, 0x7777));
            assertThrows(IllegalStateException.class, () -> Seg.bytes(s, 0, 8).get(0), "so does a new view of it");
            assertThrows(ClosedException.class, () -> Seg.of(lease, 0));
            try (Lease next = b.acquire("one", 1, Duration.ofSeconds(5))) {
                assertEquals(0x1111, next.buffer(0).getLong(0), "the next holder finds what the lease left");
            }
        }
    }

    @Test
    void poolCloseClosesSegments() throws Exception {
        needs22();
        ByteBuffer through;
        try (HugePool a = HugePool.connect(daemon.socketPath())) {
            through = Seg.bytes(Seg.of(a.acquire("one", 1, Duration.ofSeconds(5)), 0), 0, SIZE);
            through.put(0, (byte) 1);
        }
        assertThrows(IllegalStateException.class, () -> through.get(0));
    }

    /* A thread writing through the segment while another closes the lease is stopped by it. */
    @Test
    void closeWhileInUse() throws Exception {
        needs22();
        try (HugePool a = HugePool.connect(daemon.socketPath()); HugePool b = HugePool.connect(daemon.socketPath())) {
            Lease lease = a.acquire("one", 1, Duration.ofSeconds(5));
            ByteBuffer through = Seg.bytes(Seg.of(lease, 0), 0, SIZE);
            AtomicReference<Throwable> ended = new AtomicReference<>();
            CountDownLatch running = new CountDownLatch(1);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            Thread user = new Thread(() -> {
                try {
                    for (long n = 1; System.nanoTime() < deadline; n++) {
                        through.putLong((int) (n % (SIZE / 8)) * 8, n);
                        running.countDown();
                    }
                } catch (Throwable t) {
                    ended.set(t);
                }
            });
            user.start();
            running.await();
            lease.close();
            user.join();
            assertTrue(ended.get() instanceof IllegalStateException, "the user was stopped by the close: " + ended.get());
            try (Lease next = b.acquire("one", 1, Duration.ofSeconds(5))) {
                long before = next.buffer(0).getLong(8);
                Thread.sleep(10);
                assertEquals(before, next.buffer(0).getLong(8), "nothing writes to the next holder's buffer");
            }
        }
    }
}
