/*
 * SPDX-License-Identifier: MIT
 *
 * SpillTest.java - spill streams from Java: a small run stays in memory, a run past the
 * threshold moves to a daemon-made file; both read back equal as an InputStream and as views of
 * whole rows, again after a rewind; a partial row is refused; the per-uid spill limit is refused
 * in the daemon's words and the stream keeps what it held; closing gives the file back.
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class SpillTest {
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("spill_threshold = 8K\nspill_max_bytes_per_uid = 4M\n",
            "[class small]\nsize = 2M\ncount = 1\n");

    static byte[] rows(int n) {
        ByteBuffer b = ByteBuffer.allocate(16 * n);
        for (long i = 0; i < n; i++)
            b.putLong(i).putLong(~i);
        return b.array();
    }

    static byte[] readAll(SpillStream s) throws Exception {
        return s.inputStream().readAllBytes();
    }

    static byte[] readRows(SpillStream s) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (ByteBuffer r; (r = s.nextRows(16)) != null;) {
            assertEquals(0, r.remaining() % 16);
            assertTrue(r.isReadOnly());
            byte[] a = new byte[r.remaining()];
            r.get(a);
            out.write(a);
        }
        return out.toByteArray();
    }

    @Test
    void memoryThenFile() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            byte[] small = rows(100);
            try (SpillStream s = pool.openSpill()) {
                s.write(small);
                s.finish();
                assertFalse(s.inFile(), "1600 bytes stay in memory");
                assertArrayEquals(small, readAll(s));
                s.rewind();
                assertArrayEquals(small, readRows(s));
            }
            byte[] big = rows(40_000); // 640 KB, past the 8K threshold
            try (SpillStream s = pool.openSpill()) {
                for (int off = 0; off < big.length; off += 1000)
                    s.write(ByteBuffer.wrap(big, off, Math.min(1000, big.length - off)));
                s.finish();
                assertTrue(s.inFile(), "past the threshold the stream is a file");
                assertEquals(big.length, s.size());
                assertEquals(1, pool.status().spillFiles());
                assertArrayEquals(big, readRows(s));
                s.rewind();
                assertArrayEquals(big, readAll(s));
                s.rewind();
                ByteBuffer direct = ByteBuffer.allocateDirect(big.length);
                assertEquals(16, s.read(new byte[16], 0, 16));
                direct.put(big, 0, 16);
                while (direct.hasRemaining()) {
                    byte[] chunk = new byte[Math.min(100_000, direct.remaining())];
                    int n = s.read(chunk, 0, chunk.length);
                    direct.put(chunk, 0, n);
                }
                direct.flip();
                assertEquals(ByteBuffer.wrap(big), direct);
            }
            assertEquals(0, pool.status().spillFiles(), "closing the stream gives the file back");
        }
    }

    @Test
    void partialRowsAndWritesAfterFinish() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath()); SpillStream s = pool.openSpill(SpillStream.ALWAYS_FILE)) {
            s.write(new byte[40]);
            assertThrows(HugepoolException.class, () -> s.nextRows(16), "read before finish");
            s.finish();
            assertTrue(s.inFile());
            assertEquals(32, s.nextRows(16).remaining());
            HugepoolException e = assertThrows(HugepoolException.class, () -> s.nextRows(16));
            assertEquals("EBADMSG", e.errnoName());
            assertEquals(8, s.read(new byte[100], 0, 100));
            assertNull(s.nextRows(16));
            assertEquals("EINVAL", assertThrows(HugepoolException.class, () -> s.write(new byte[1])).errnoName());
        }
    }

    @Test
    void perUidLimit() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath()); SpillStream s = pool.openSpill()) {
            byte[] chunk = new byte[1 << 20];
            LimitExceededException e = assertThrows(LimitExceededException.class, () -> {
                for (int i = 0; i < 8; i++)
                    s.write(chunk);
            });
            assertEquals("EDQUOT", e.errnoName());
            assertTrue(e.daemonMessage().contains("spill_max_bytes_per_uid"), e.getMessage());
            long kept = s.size();
            assertTrue(kept > 0 && kept <= 4 << 20, "kept " + kept);
            s.finish();
            assertEquals(kept, readAll(s).length, "the stream keeps what it held");
        }
    }
}
