/*
 * SPDX-License-Identifier: MIT
 *
 * Native.java - the native methods, one per function of java/src/main/native/hugepool_jni.c (the
 * C side says what each returns), and the numbers both sides use, read from C once when this
 * class initialises (the C side's JNI_CONSTANTS defines each: errno values, limits, states).
 * Package-private: the public classes call these under their locks and turn negative errnos into
 * exceptions (HugepoolException.create). Nothing here is thread-safe by itself.
 */
package org.hugepool;

import java.nio.ByteBuffer;

final class Native {
    static {
        NativeLibrary.load();
    }

    /* errno values: HugepoolException.create picks an exception's class by them */
    static final int EPERM = (int) constant("EPERM"), ENOENT = (int) constant("ENOENT"), E2BIG = (int) constant("E2BIG"),
            EBADF = (int) constant("EBADF"), EAGAIN = (int) constant("EAGAIN"), ENOMEM = (int) constant("ENOMEM"),
            EACCES = (int) constant("EACCES"), EINVAL = (int) constant("EINVAL"), EPIPE = (int) constant("EPIPE"),
            EBADMSG = (int) constant("EBADMSG"), EOVERFLOW = (int) constant("EOVERFLOW"),
            EUSERS = (int) constant("EUSERS"), ECONNRESET = (int) constant("ECONNRESET"),
            ENOTCONN = (int) constant("ENOTCONN"), ETIMEDOUT = (int) constant("ETIMEDOUT"),
            ECONNREFUSED = (int) constant("ECONNREFUSED"), EDQUOT = (int) constant("EDQUOT");
    /* buffers in one acquire; records in one appendBatch; records one readerNext hands over */
    static final int ACQUIRE_MAX = (int) constant("HP_ACQUIRE_MAX"), BATCH_MAX = (int) constant("BATCH_MAX"),
            READ_MAX = (int) constant("READ_MAX");
    /* a journal's state in its status; a spill stream's state once in a file */
    static final int JOURNAL_OK = (int) constant("HP_JOURNAL_OK"), JOURNAL_FULL = (int) constant("HP_JOURNAL_FULL"),
            JOURNAL_FAILED = (int) constant("HP_JOURNAL_FAILED"), SPILL_FILE = (int) constant("HP_SPILL_FILE");
    static final long SPILL_THRESHOLD_MAX = constant("HP_SPILL_THRESHOLD_MAX");
    /*
     * What append, appendBatch and spillWrite return for a direct buffer native code may not read
     * in place (a view of a MemorySegment or of a file mapping): copy it through Java and call
     * again. They answer so only where CHECKS_BUFFERS; elsewhere BufferViews tells first.
     */
    static final int NOT_IN_PLACE = (int) constant("NOT_IN_PLACE");
    static final boolean CHECKS_BUFFERS = checksBuffers();

    private Native() {
    }

    /* A number of the C side's JNI_CONSTANTS; IllegalArgumentException for a name not there. */
    static native long constant(String name);

    static native String journalStateName(int state);

    static native boolean checksBuffers();

    static native long connect(String socket) throws HugepoolException;

    static native void disconnect(long conn);

    static native String lastError(long conn);

    static native String strerror(int errno);

    static native String errnoName(int errno);

    static native int acquire(long conn, String className, int count, long timeoutMillis, long[] out);

    static native int release(long conn, long[] lease);

    static native ByteBuffer wrap(long address, long length);

    static native void unmap(long address, long length);

    static native Status status(long conn) throws HugepoolException;

    static native long writerOpen(String socket, String journal) throws HugepoolException;

    static native void writerClose(long writer);

    static native String writerLastError(long writer);

    static native long append(long writer, ByteBuffer buf, int off, int len, boolean await);

    static native long appendArray(long writer, byte[] a, int off, int len, boolean await);

    /* appendBatch's modes (hugepool_jni.c's): append, append and wait, append lazily */
    static final int BATCH_APPEND = 0, BATCH_WAIT = 1, BATCH_LAZY = 2;

    static native long appendBatch(long writer, Object[] records, int[] offs, int[] lens, int mode);

    static native int await(long writer, long ticket, long timeoutMillis);

    static native int awaitLsn(long writer, long lsn, long timeoutMillis);

    static native long durableLsn(long writer);

    /* mode: JournalWriter.WaitMode's ordinal, hp_journal_wait_mode's value */
    static native int setWaitMode(long writer, int mode);

    static native int truncate(long conn, String journal, long lsn);

    static native long readerOpen(long conn, String journal, long fromLsn);

    static native int readerNext(long reader, ByteBuffer dst, int cap, long[] meta, int max);

    static native void readerClose(long reader);

    static native long spillOpen(long conn, long threshold);

    static native int spillWrite(long spill, ByteBuffer buf, int off, int len);

    static native int spillWriteArray(long spill, byte[] a, int off, int len);

    static native int spillFinish(long spill);

    static native int spillRead(long spill, ByteBuffer dst, int off, int len);

    static native int spillRewind(long spill);

    static native int spillState(long spill);

    static native long spillSize(long spill);

    static native void spillClose(long spill);
}
