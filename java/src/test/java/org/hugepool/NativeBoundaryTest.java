/*
 * SPDX-License-Identifier: MIT
 *
 * NativeBoundaryTest.java - the JNI boundary itself (issue 40): the numbers Java reads from C
 * are C's (each errno constant is the errno of its name, the journal states name themselves as
 * the library does); an exception's class follows its errno and whether the call connected,
 * never the words of its message; every array a native method takes is checked against what
 * it must hold, with the exception Java throws for it, and a status is built natively from
 * hp_status field by field. Package-private calls: only this package can reach Native.
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class NativeBoundaryTest {
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("",
            "[class two]\nsize = 2M\ncount = 3\n[journal j]\ndirectory = @DIR@/j\nsegment_size = 1M\n"
                    + "[journal r]\ndirectory = @DIR@/r\nsegment_size = 1M\nwhen_full = recycle\n");

    @Test
    void errnoConstantsAreCs() throws Exception {
        int n = 0;
        for (Field f : Native.class.getDeclaredFields()) {
            if (!Modifier.isStatic(f.getModifiers()) || !f.getName().matches("E[A-Z0-9]+"))
                continue;
            int errno = f.getInt(null);
            assertEquals(f.getName(), Native.errnoName(errno), "Native." + f.getName() + " = " + errno);
            n++;
        }
        assertTrue(n >= 17, n + " errno constants");
        assertThrows(IllegalArgumentException.class, () -> Native.constant("ENOSUCHTHING"));
        assertThrows(NullPointerException.class, () -> Native.constant(null));
    }

    @Test
    void journalStatesAreTheLibrarys() {
        assertEquals("ok", Native.journalStateName(Status.Journal.OK));
        assertEquals("full", Native.journalStateName(Status.Journal.FULL));
        assertEquals("failed", Native.journalStateName(Status.Journal.FAILED));
        assertEquals("unknown", Native.journalStateName(-1));
    }

    @Test
    void exceptionClassByErrno() {
        // the operation's words do not choose: "connecting" of a call that did not connect
        assertInstanceOf(NotFoundException.class, HugepoolException.create(Native.ENOENT, false, "connecting x", "y", ""));
        assertInstanceOf(NoDaemonException.class, HugepoolException.create(Native.ENOENT, true, "opening", "y", ""));
        assertInstanceOf(NoDaemonException.class, HugepoolException.create(Native.ECONNREFUSED, true, "x", "y", ""));
        assertInstanceOf(LimitExceededException.class, HugepoolException.create(Native.EUSERS, true, "x", "y", ""));
        assertInstanceOf(DaemonGoneException.class, HugepoolException.create(Native.EPIPE, false, "x", "y", ""));
        assertInstanceOf(HugepoolTimeoutException.class, HugepoolException.create(Native.EAGAIN, false, "x", "y", ""));
        assertInstanceOf(PermissionDeniedException.class, HugepoolException.create(Native.EACCES, false, "x", "y", ""));
        assertEquals(HugepoolException.class, HugepoolException.create(Native.EINVAL, false, "x", "y", "").getClass());
    }

    @Test
    void nativeArraysAreChecked() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath())) {
            pool.lock.lock();
            try {
                long c = pool.handle("testing");
                // an out array too short for 2 buffers: nothing written past it, nothing leased
                assertThrows(IllegalArgumentException.class, () -> Native.acquire(c, "two", 2, 0, new long[5]));
                assertThrows(IllegalArgumentException.class, () -> Native.acquire(c, "two", 2, 0, null));
                // a lease description not of whole buffers
                assertThrows(IllegalArgumentException.class, () -> Native.release(c, new long[4]));
                assertThrows(IllegalArgumentException.class, () -> Native.release(c, null));
                long r = Native.readerOpen(c, "j", 1);
                assertTrue(r > 0);
                try {
                    ByteBuffer dst = ByteBuffer.allocateDirect(4096);
                    assertThrows(IllegalArgumentException.class, () -> Native.readerNext(r, dst, 4096, new long[3], 2));
                    assertThrows(IllegalArgumentException.class, () -> Native.readerNext(r, dst, 4096, null, 1));
                    assertThrows(IllegalArgumentException.class, () -> Native.readerNext(r, dst, 8192, new long[3], 1));
                    assertThrows(NullPointerException.class, () -> Native.readerNext(r, null, 0, new long[3], 1));
                } finally {
                    Native.readerClose(r);
                }
            } finally {
                pool.lock.unlock();
            }
            assertEquals(0, pool.status().bufferClass("two").leased());
        }
    }

    @Test
    void buffersNativeCodeMayNotReadInPlace() throws Exception {
        // the JNI side finds the JDK's fields on the JDKs the binding is tested on (17 and 25)
        assertTrue(Native.CHECKS_BUFFERS, "hugepool_jni.c found no java.nio.Buffer.segment or MappedByteBuffer.fd");
        // BufferViews, for a JDK where it would not: a lease's and allocateDirect's buffers in
        // place, a segment's and a mapping's not
        assumeTrue(Segments.SEGMENT != null, "java.lang.foreign is final from Java 22");
        assertTrue(BufferViews.inPlace(ByteBuffer.allocateDirect(8)));
        java.nio.file.Path f = java.nio.file.Files.createTempFile("hugepool-test", ".map");
        try (HugePool pool = HugePool.connect(daemon.socketPath()); Lease lease = pool.acquire("two", 1, Duration.ZERO);
                java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(f,
                        java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE)) {
            assertTrue(BufferViews.inPlace(lease.buffer(0)));
            assertFalse(BufferViews.inPlace(Seg.bytes(Seg.of(lease, 0), 0, 4096)));
            ch.write(ByteBuffer.wrap(new byte[4096]));
            assertFalse(BufferViews.inPlace(ch.map(java.nio.channels.FileChannel.MapMode.READ_ONLY, 0, 4096)));
        } finally {
            java.nio.file.Files.delete(f);
        }
    }

    @Test
    void statusBuiltField() throws Exception {
        try (HugePool pool = HugePool.connect(daemon.socketPath()); Lease lease = pool.acquire("two", 2, Duration.ZERO);
                JournalWriter w = pool.openJournalWriter("j")) {
            long first = w.appendBatchAndWait(new byte[10], new byte[20], new byte[30]);
            Status st = pool.status();
            assertTrue(st.daemonPid() > 0, st.toString());
            assertNotNull(st.daemonVersion());
            assertTrue(st.pageSize() > 0 && st.poolBytes() >= 3L * (2 << 20), st.toString());
            assertEquals(st.hugetlb(), st.fallbackReason().isEmpty() && st.pageSize() > 4096, st.toString());
            assertTrue(st.clients() >= 2 && st.leases() == lease.count(), st.toString());
            Status.BufferClass c = st.bufferClass("two");
            assertEquals(new Status.BufferClass("two", 2 << 20, 3, 1, 2, 0, false, c.hugetlb() ? 2 << 20 : 4096,
                    st.hugetlb(), st.fallbackReason().isEmpty() ? "" : c.fallbackReason()), c);
            /* the class's pages are what the daemon says of them: the pool's, with one class */
            assertEquals(st.pageSize(), c.pageSize(), c.toString());
            assertEquals(st.fallbackReason().isEmpty(), c.fallbackReason().isEmpty(), c.toString());
            assertTrue(st.fallbackReason().endsWith(c.fallbackReason()), st.toString());
            Status.Journal j = st.journal("j");
            assertEquals(Status.Journal.OK, j.state());
            assertEquals("ok", j.stateName());
            assertFalse(j.backend().isEmpty());
            assertEquals(first + 3, j.nextLsn());
            assertEquals(first + 2, j.durableLsn());
            assertEquals(3, j.appends());
            assertEquals(1, j.writers());
            assertTrue(j.syncs() >= 1 && j.retainLsn() <= first, j.toString());
            assertEquals(4, j.segments(), j.toString());
            assertEquals(1 << 20, j.segmentSize(), j.toString());
            assertFalse(j.direct(), j.toString());
            assertFalse(j.recycle(), j.toString());
            assertTrue(st.journal("r").recycle(), st.journal("r").toString());
            assertThrows(UnsupportedOperationException.class, () -> st.classes().clear());
        }
    }
}
