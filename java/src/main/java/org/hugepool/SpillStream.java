/*
 * SPDX-License-Identifier: MIT
 *
 * SpillStream.java - a spill stream (hp_spill) through the HugePool's connection.
 *
 * Reading goes through `window`, a direct buffer this object owns: hp_spill_read fills it (a
 * file's bytes straight from the kernel, in-memory bytes with one copy), and rows are handed out
 * as read-only views of it. hp_spill_next's own views would point into the library's malloc'd
 * memory, which its close frees (and, for buffers of 128 KiB and more, unmaps): a view kept past
 * that would fault the JVM. All calls run under the pool's lock, which guards `pos` and `window`
 * (the handle and its close: PoolHandle).
 */
package org.hugepool;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * Somewhere to put a run of bytes (a sorted run, a partial aggregate) that may be tiny or huge, to
 * read it back later: from {@link HugePool#openSpill()}. The bytes stay in this process's memory
 * up to the stream's threshold (the daemon's {@code spill_threshold}, 1 MiB by default); only a
 * write that would pass it gets a file from hugepoold, an unnamed one that disappears with the
 * stream, the process or the daemon, charged against the daemon's spill limits.
 *
 * <pre>{@code
 * try (SpillStream s = pool.openSpill()) {
 *     s.write(run);                          // memory, then a file past the threshold
 *     s.finish();
 *     for (ByteBuffer rows; (rows = s.nextRows(16)) != null; )
 *         consume(rows);                     // whole 16-byte rows
 * }                                          // the file (if any) is gone, its quota back
 * }</pre>
 *
 * <p>A stream is written, {@linkplain #finish() finished}, then read (any number of times, with
 * {@link #rewind()}) as an {@link InputStream} or as views of whole rows. Over a limit
 * ({@link LimitExceededException}: the daemon's words name it) or on a file system error a write
 * fails and the stream keeps what it held: {@link #size()} says how much, and it can still be
 * finished and read.
 *
 * <p><b>Threads.</b> Thread-safe (its calls are serialised on the HugePool's connection); a
 * stream is one sequence of bytes, so write and read it from one thread at a time.
 */
public final class SpillStream extends PoolHandle {
    /** A threshold for {@link HugePool#openSpill(long)}: a file from the first byte. */
    public static final long ALWAYS_FILE = -1;
    /** The largest row {@link #nextRows(int)} takes: 64 KiB. */
    public static final int ROW_MAX = 64 << 10;

    private static final int WINDOW = 256 << 10;

    private final ByteBuffer window = ByteBuffer.allocateDirect(WINDOW);
    private long pos; // read position, from finish() on
    private boolean finished;

    SpillStream(HugePool pool, long handle) {
        super(pool, handle, "the spill stream");
    }

    /**
     * Append bytes.
     *
     * @param b the bytes
     * @throws LimitExceededException a spill limit (the daemon's words name it)
     * @throws HugepoolException a file system error (ENOSPC, EIO), written after finish (EINVAL),
     *         a closed stream
     */
    public void write(byte[] b) throws HugepoolException {
        write(b, 0, b.length);
    }

    /**
     * Append {@code len} bytes of {@code b} from {@code off}.
     *
     * @param b the array
     * @param off where the bytes start
     * @param len how many
     * @throws HugepoolException as {@link #write(byte[])}
     * @throws IndexOutOfBoundsException the range is not within the array
     */
    public void write(byte[] b, int off, int len) throws HugepoolException {
        Objects.checkFromIndexSize(off, len, b.length);
        pool.lock.lock();
        try {
            long h = handleOrZero();
            if (h == 0)
                throw closed(writing(len));
            int r = Native.spillWriteArray(h, b, off, len);
            if (r < 0)
                throw pool.failure(r, writing(len));
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Append the bytes between {@code src}'s position and limit; the position moves to the limit.
     *
     * @param src the bytes
     * @throws HugepoolException as {@link #write(byte[])}
     */
    public void write(ByteBuffer src) throws HugepoolException {
        if (src.isDirect() && (Native.CHECKS_BUFFERS || BufferViews.inPlace(src))) {
            pool.lock.lock();
            try {
                long h = handleOrZero();
                if (h == 0)
                    throw closed(writing(src.remaining()));
                int r = Native.spillWrite(h, src, src.position(), src.remaining());
                if (r != Native.NOT_IN_PLACE) {
                    if (r < 0)
                        throw pool.failure(r, writing(src.remaining()));
                    src.position(src.limit());
                    return;
                }
            } finally {
                pool.lock.unlock();
            }
        }
        // a heap buffer, or one native code may not read in place: through an array
        if (src.hasArray()) {
            write(src.array(), src.arrayOffset() + src.position(), src.remaining());
        } else {
            byte[] a = new byte[src.remaining()];
            src.duplicate().get(a);
            write(a);
        }
        src.position(src.limit());
    }

    /**
     * End writing: flush to the file if there is one, and start reading from the first byte.
     *
     * @throws HugepoolException a file system error, a closed stream
     */
    public void finish() throws HugepoolException {
        pool.lock.lock();
        try {
            pool.check(Native.spillFinish(handle("finishing a spill stream")), "finishing a spill stream");
            finished = true;
            pos = 0;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * The next whole rows of {@code rowSize} bytes: a read-only view of as many as the stream's
     * read window holds (at least one), valid until the next call on this stream, which reuses
     * the memory (a view kept longer reads other bytes, never faults). A file's bytes are read by
     * the kernel straight into that window, never through the Java heap.
     *
     * @param rowSize bytes per row, 1 to {@link #ROW_MAX}; rows written whole come back whole
     * @return the rows, or null at the end
     * @throws HugepoolException fewer than {@code rowSize} bytes remain (EBADMSG: read them with
     *         {@link #inputStream()}), a read error (EIO), not finished (EINVAL), a closed stream
     */
    public ByteBuffer nextRows(int rowSize) throws HugepoolException {
        if (rowSize < 1 || rowSize > ROW_MAX)
            throw new IllegalArgumentException("row size " + rowSize + ": 1 to " + ROW_MAX);
        pool.lock.lock();
        try {
            long h = handleOrZero();
            if (h == 0 || !finished)
                throw unreadable(h, readingRows(rowSize));
            long left = Native.spillSize(h) - pos;
            if (left == 0)
                return null;
            if (left < rowSize)
                throw HugepoolException.create(Native.EBADMSG, false, readingRows(rowSize),
                        left + " bytes remain, less than a row", "");
            int want = (int) Math.min(WINDOW - WINDOW % rowSize, left - left % rowSize);
            int n = Native.spillRead(h, window, 0, want);
            if (n < 0)
                throw pool.failure(n, readingRows(rowSize));
            pos += n;
            ByteBuffer view = window.duplicate();
            view.position(0).limit(n);
            return view.slice().asReadOnlyBuffer();
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Read from the current position; the stream's position moves with it.
     *
     * @param b where to
     * @param off from
     * @param len at most this many
     * @return how many bytes, -1 at the end
     * @throws HugepoolException a read error (EIO), not finished (EINVAL), a closed stream
     */
    public int read(byte[] b, int off, int len) throws HugepoolException {
        if (off < 0 || len < 0 || len > b.length - off)
            throw new IndexOutOfBoundsException();
        if (len == 0)
            return 0;
        pool.lock.lock();
        try {
            String what = "reading a spill stream";
            int n = (int) pool.check(Native.spillRead(readable(what), window, 0, Math.min(len, WINDOW)), what);
            if (n == 0)
                return -1;
            window.get(0, b, off, n);
            pos += n;
            return n;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * The stream from its current position as an InputStream, for code that reads streams. Closing
     * the InputStream does not close this stream.
     *
     * @return the InputStream
     */
    public InputStream inputStream() {
        return new InputStream() {
            @Override
            public int read() throws IOException {
                byte[] one = new byte[1];
                return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                return SpillStream.this.read(b, off, len);
            }

            @Override
            public int available() throws IOException {
                pool.lock.lock();
                try {
                    long h = readable("reading a spill stream");
                    return (int) Math.min(Integer.MAX_VALUE, Native.spillSize(h) - pos);
                } finally {
                    pool.lock.unlock();
                }
            }
        };
    }

    /**
     * Read again from the first byte.
     *
     * @throws HugepoolException not finished (EINVAL), a closed stream
     */
    public void rewind() throws HugepoolException {
        pool.lock.lock();
        try {
            pool.check(Native.spillRewind(readable("rewinding a spill stream")), "rewinding a spill stream");
            pos = 0;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Whether the stream is in a file.
     *
     * @return true once the stream moved to a file (it passed its threshold)
     * @throws ClosedException a closed stream
     */
    public boolean inFile() throws ClosedException {
        pool.lock.lock();
        try {
            return Native.spillState(handle("reading a spill stream's state")) == Native.SPILL_FILE;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * The stream's size.
     *
     * @return the bytes the stream holds
     * @throws ClosedException a closed stream
     */
    public long size() throws ClosedException {
        pool.lock.lock();
        try {
            return Native.spillSize(handle("reading a spill stream's size"));
        } finally {
            pool.lock.unlock();
        }
    }

    private static String writing(int len) {
        return "writing " + len + " bytes to a spill stream";
    }

    @Override
    void nativeClose(long handle) {
        Native.spillClose(handle);
    }

    private long readable(String what) throws HugepoolException {
        long h = handleOrZero();
        if (h == 0 || !finished)
            throw unreadable(h, what);
        return h;
    }

    /* Why a read cannot start: h is 0 (closed) or the stream is not finished. */
    private HugepoolException unreadable(long h, String what) {
        if (h == 0)
            return closed(what);
        return HugepoolException.create(Native.EINVAL, false, what, Native.strerror(Native.EINVAL),
                "the stream is read only after finish()");
    }

    private static String readingRows(int rowSize) {
        return "reading rows of " + rowSize + " bytes from a spill stream";
    }

    /** @return "SpillStream" */
    @Override
    public String toString() {
        return "SpillStream";
    }
}
