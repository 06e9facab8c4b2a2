/*
 * SPDX-License-Identifier: MIT
 *
 * Native.java - the native methods, one per function of java/src/main/native/hugepool_jni.c (the
 * C side says what each returns). Package-private: the public classes call these under their
 * locks and turn negative errnos into exceptions (HugepoolException.check). Nothing here is
 * thread-safe by itself.
 */
package org.hugepool;

import java.nio.ByteBuffer;

final class Native {
    static {
        NativeLibrary.load();
    }

    private Native() {
    }

    static native long connect(String socket) throws HugepoolException;

    static native void disconnect(long conn);

    static native String lastError(long conn);

    static native String strerror(int errno);

    static native String errnoName(int errno);

    static native int acquire(long conn, String className, int count, long timeoutMillis, long[] out);

    static native int release(long conn, long[] lease);

    static native ByteBuffer wrap(long address, long length);

    static native void unmap(long address, long length);

    static native int status(long conn, Object[] out);

    static native long writerOpen(String socket, String journal) throws HugepoolException;

    static native void writerClose(long writer);

    static native String writerLastError(long writer);

    static native long append(long writer, ByteBuffer buf, int off, int len, boolean await);

    static native long appendArray(long writer, byte[] a, int off, int len, boolean await);

    static native long appendBatch(long writer, Object[] records, int[] offs, int[] lens, boolean await);

    static native int await(long writer, long ticket, long timeoutMillis);

    static native int awaitLsn(long writer, long lsn, long timeoutMillis);

    static native long durableLsn(long writer);

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
