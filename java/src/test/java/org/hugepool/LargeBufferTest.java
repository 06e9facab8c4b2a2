/*
 * SPDX-License-Identifier: MIT
 *
 * LargeBufferTest.java - a buffer larger than a ByteBuffer holds (2 GiB + 2 MiB, regular shared
 * memory so no hugepages are needed) is served as consecutive 1 GiB slices covering it in order,
 * buffer(i) says to use them, and its slices after the release read zeroes like any stale view;
 * on Java 22 and later it is also one MemorySegment, closed with the lease.
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class LargeBufferTest {
    private static final long SIZE = (2L << 30) + (2 << 20);
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("hugepages = off\n", "[class large]\nsize = 2050M\ncount = 1\n");

    @Test
    void slices() throws Exception {
        List<ByteBuffer> s;
        try (HugePool pool = HugePool.connect(daemon.socketPath()); Lease lease = pool.acquire("large", 1, Duration.ZERO)) {
            assertEquals(SIZE, lease.bufferSize(0));
            assertThrows(IllegalStateException.class, () -> lease.buffer(0));
            s = lease.slices(0);
            assertEquals(3, s.size());
            assertEquals(Lease.SLICE_BYTES, s.get(0).capacity());
            assertEquals(Lease.SLICE_BYTES, s.get(1).capacity());
            assertEquals(2 << 20, s.get(2).capacity());
            // consecutive: the last word of one slice and the first of the next are neighbours
            s.get(0).putLong((int) Lease.SLICE_BYTES - 8, 1);
            s.get(1).putLong(0, 2);
            s.get(2).putLong((2 << 20) - 8, 3);
            List<ByteBuffer> again = lease.slices(0);
            assertEquals(1, again.get(0).getLong((int) Lease.SLICE_BYTES - 8));
            assertEquals(2, again.get(1).getLong(0));
            assertEquals(3, again.get(2).getLong((2 << 20) - 8));
        }
        for (ByteBuffer b : s)
            assertEquals(0, b.getLong(b.capacity() - 8), "a released slice reads zeroes");
    }

    @Test
    void oneSegment() throws Exception {
        assumeTrue(Seg.TYPE != null, "MemorySegment needs Java 22 or later; this is Java " + Runtime.version().feature());
        ByteBuffer across;
        try (HugePool pool = HugePool.connect(daemon.socketPath()); Lease lease = pool.acquire("large", 1, Duration.ZERO)) {
            Object s = Seg.of(lease, 0);
            assertEquals(SIZE, Seg.size(s));
            List<ByteBuffer> slices = lease.slices(0);
            slices.get(0).putLong((int) Lease.SLICE_BYTES - 8, 5);
            slices.get(1).putLong(0, 6);
            slices.get(2).putLong((2 << 20) - 8, 7);
            // one segment: a view across the first slice's end, and the buffer's last word
            across = Seg.bytes(s, Lease.SLICE_BYTES - 8, 16);
            assertEquals(5, across.getLong(0));
            assertEquals(6, across.getLong(8));
            assertEquals(7, Seg.bytes(s, SIZE - 8, 8).getLong(0));
        }
        assertThrows(IllegalStateException.class, () -> across.getLong(0), "closed with the lease");
    }
}
