/*
 * SPDX-License-Identifier: MIT
 *
 * Lease.java - buffers leased through a HugePool, as direct ByteBuffers over the mapped memory.
 *
 * The stale-buffer rule (docs/ARCHITECTURE.md, "Java binding"): a ByteBuffer handed out cannot
 * be taken back, so the memory under it must stay mapped for as long as the buffer is reachable,
 * and must stop being the buffer's once the lease ends. Release goes through
 * hp_release_keep_range: the range is replaced in place by private anonymous memory before the
 * daemon hears of it, and stays mapped. Each range is covered by "roots", ByteBuffers made by JNI
 * when a view of that buffer is first asked for (an acquire makes none: it costs what the C call
 * costs); every buffer handed out is a duplicate of a root, and a duplicate keeps its root
 * reachable (DirectByteBuffer's attachment), so a root becomes unreachable only once no view of
 * its range is left. Then the Cleaner unmaps the range, and only if it was released (a lease of
 * a HugePool never closed stays mapped until the JVM exits); a buffer that never had a root is
 * unmapped at the release itself, as no ByteBuffer can point into it. The lease's monitor guards
 * `roots`, `ranges` and the step from open to released, so a root is made before the release
 * marks its range released, or not at all. On Java 22 and later a buffer is also
 * served as one MemorySegment of a shared Arena of the lease (Segments), which the release closes
 * before the range is replaced: from then on the segment throws, as any closed Arena's does, so
 * it needs no root. `open` is read without the pool's lock; release, the arena and the ranges'
 * `released` flags are written under it.
 */
package org.hugepool;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * Buffers leased from hugepoold, all of one class, as direct {@link ByteBuffer}s in native byte
 * order over the daemon's pre-faulted (hugepage) memory. Close the lease to give them back.
 *
 * <p>A buffer of at most {@link Integer#MAX_VALUE} bytes is one ByteBuffer ({@link #buffer(int)});
 * a larger one is served as consecutive slices of {@link #SLICE_BYTES} (the last one shorter),
 * {@link #slices(int)}. On Java 22 and later any buffer is also one
 * {@code java.lang.foreign.MemorySegment}, {@link #segment(int, Class)}.
 *
 * <p><b>After the lease ends</b> (close, or the HugePool's close), a ByteBuffer the program kept
 * is harmless: its memory was replaced by private zero pages before the daemon took the buffer
 * back, so it reads zeroes, its writes go to pages of this process only, and neither ever
 * reaches the buffer's next holder; the JVM never faults on it. Its address range is unmapped
 * once the garbage collector finds no view of it left. A MemorySegment of the lease is closed
 * with it: from then on every access to it, or to a ByteBuffer it made, throws
 * {@link IllegalStateException}, in any thread, as for a closed {@code Arena}'s.
 *
 * <p><b>Threads.</b> The ByteBuffers are ordinary direct buffers: share them between threads as
 * any memory (a ByteBuffer's position and limit are not thread-safe; each call of
 * {@link #buffer(int)} returns a new view with its own). The Lease's methods are thread-safe.
 */
public final class Lease implements AutoCloseable {
    /** The size of the slices a buffer larger than {@link Integer#MAX_VALUE} bytes is served in: 1 GiB. */
    public static final long SLICE_BYTES = 1L << 30;

    private static final Cleaner CLEANER = Cleaner.create();

    static {
        // Range's class and the Cleaner's registration path readied with Lease (HugePool's
        // initialiser), not by the first acquire: a Range never released unmaps nothing
        CLEANER.register(new Object(), new Range(0, 0));
    }

    private final HugePool pool;
    private final String className;
    private final long[] description; // addr, size, lease id of each buffer: what release sends
    private final ByteBuffer[][] roots; // guarded by this: per buffer, its slices once asked for
    private final List<Range> ranges = new ArrayList<>(); // guarded by this
    private final Object[] segments; // guarded by pool.lock: per buffer, its MemorySegment once made
    private Object arena; // guarded by pool.lock: the shared Arena of the segments, made with the first
    private volatile boolean open = true;

    /* The memory under one root; unmapped by the Cleaner once released and unreachable. */
    private static final class Range implements Runnable {
        final long address, length;
        volatile boolean released;

        Range(long address, long length) {
            this.address = address;
            this.length = length;
        }

        @Override
        public void run() {
            if (released)
                Native.unmap(address, length);
        }
    }

    Lease(HugePool pool, String className, long[] description) {
        this.pool = pool;
        this.className = className;
        this.description = description;
        int n = description.length / 3;
        roots = new ByteBuffer[n][];
        segments = new Object[n];
    }

    /* Buffer i's roots, made at the first call; ClosedException once the lease was released. */
    private synchronized ByteBuffer[] roots(int i, String what) throws ClosedException {
        if (!open)
            throw closed(what, i);
        if (roots[i] == null) {
            long addr = description[3 * i], size = description[3 * i + 1];
            long step = size <= Integer.MAX_VALUE ? size : SLICE_BYTES;
            ByteBuffer[] r = new ByteBuffer[(int) ((size + step - 1) / step)];
            for (int j = 0; j < r.length; j++) {
                long len = Math.min(step, size - j * step);
                Range range = new Range(addr + j * step, len);
                r[j] = Native.wrap(range.address, len);
                CLEANER.register(r[j], range);
                ranges.add(range);
            }
            roots[i] = r;
        }
        return roots[i];
    }

    /**
     * The name of the class the buffers are of.
     *
     * @return the buffer class
     */
    public String className() {
        return className;
    }

    /**
     * How many buffers this lease holds.
     *
     * @return how many buffers this lease holds
     */
    public int count() {
        return description.length / 3;
    }

    /**
     * The size of buffer {@code i}.
     *
     * @param i which buffer, 0 to {@link #count()} - 1
     * @return its size in bytes
     */
    public long bufferSize(int i) {
        return description[3 * index(i) + 1];
    }

    /**
     * The daemon's lease id of buffer {@code i}.
     *
     * @param i which buffer
     * @return the daemon's id of its lease, as hugepoolctl leases shows it
     */
    public long leaseId(int i) {
        return description[3 * index(i) + 2];
    }

    /**
     * A new view of buffer {@code i}: direct, native order, position 0, limit and capacity the
     * buffer's size.
     *
     * @param i which buffer
     * @return the view
     * @throws ClosedException the lease was closed
     * @throws IllegalStateException the buffer is larger than a ByteBuffer can be: use {@link #slices(int)}
     */
    public ByteBuffer buffer(int i) throws ClosedException {
        if (bufferSize(i) > Integer.MAX_VALUE) {
            if (!open)
                throw closed("buffer(", i);
            throw new IllegalStateException("buffer " + i + " of " + this + " has " + bufferSize(i)
                    + " bytes, more than a ByteBuffer holds: use slices(" + i + ")");
        }
        return view(roots(i, "buffer(")[0]);
    }

    /**
     * New views of buffer {@code i} in consecutive slices of {@link #SLICE_BYTES} (the last one
     * shorter), or one view of it all when it fits a ByteBuffer.
     *
     * @param i which buffer
     * @return the views, in address order
     * @throws ClosedException the lease was closed
     */
    public List<ByteBuffer> slices(int i) throws ClosedException {
        List<ByteBuffer> l = new ArrayList<>();
        for (ByteBuffer root : roots(index(i), "slices("))
            l.add(view(root));
        return Collections.unmodifiableList(l);
    }

    /**
     * Buffer {@code i}, whatever its size, as one {@code java.lang.foreign.MemorySegment}, on Java
     * 22 and later: {@code MemorySegment s = lease.segment(0, MemorySegment.class);} (the class is
     * passed because the jar runs on Java 17 too, where MemorySegment does not exist). Every call
     * returns the same segment; share it between threads as any segment of a shared Arena.
     *
     * <p>The segment belongs to an Arena of this lease, which {@link #close()} closes before the
     * daemon takes the buffer back: from then on every access to the segment, or to a ByteBuffer
     * made from it, throws {@link IllegalStateException}, in any thread. The segment is made by a
     * restricted method ({@code MemorySegment.reinterpret}), which needs
     * {@code --enable-native-access} for the jar's module ({@code ALL-UNNAMED} on the class path)
     * or Java warns once, as it does for the JNI library's loading from Java 24 on.
     *
     * @param <T> MemorySegment
     * @param i which buffer
     * @param type {@code MemorySegment.class}
     * @return the segment, {@link #bufferSize(int)} bytes long
     * @throws ClosedException the lease was closed
     * @throws UnsupportedOperationException this Java is older than 22: use {@link #buffer(int)} or
     *         {@link #slices(int)}
     * @throws IllegalArgumentException type is not MemorySegment
     */
    public <T> T segment(int i, Class<T> type) throws ClosedException {
        Segments.check(type);
        int k = index(i);
        pool.lock.lock();
        try {
            if (!open)
                throw closed("segment(", i);
            if (arena == null)
                arena = Segments.newArena();
            if (segments[k] == null)
                segments[k] = Segments.segment(arena, description[3 * k], description[3 * k + 1]);
            return type.cast(segments[k]);
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * A view of every buffer, for buffers of at most {@link Integer#MAX_VALUE} bytes.
     *
     * @return {@link #buffer(int)} of each, in order
     * @throws ClosedException the lease was closed
     */
    public List<ByteBuffer> buffers() throws ClosedException {
        List<ByteBuffer> l = new ArrayList<>();
        for (int i = 0; i < count(); i++)
            l.add(buffer(i));
        return Collections.unmodifiableList(l);
    }

    /**
     * Whether the lease still holds its buffers.
     *
     * @return false once the lease was released
     */
    public boolean isOpen() {
        return open;
    }

    /**
     * Give the buffers back to the daemon. Views taken from this lease read zeroes from now on
     * and never reach the next holder. Closing twice is fine.
     *
     * @throws HugepoolException the release failed (the map count limit): the lease stays open
     *         (its segments, if any, are closed; {@link #segment(int, Class)} makes new ones)
     * @throws IllegalStateException a segment of the lease is in use by an asynchronous channel's
     *         operation, so its Arena cannot close: the lease stays open
     */
    @Override
    public void close() throws HugepoolException {
        if (open)
            pool.release(this);
        Reference.reachabilityFence(this);
    }

    long[] nativeDescription() {
        return description;
    }

    /* With the pool's lock held, before the release: the segments closed, or IllegalStateException. */
    void closeSegments() {
        if (arena == null)
            return;
        Segments.close(arena);
        arena = null;
        Arrays.fill(segments, null);
    }

    /* With the pool's lock held, once the daemon has them back. */
    /*
     * With the pool's lock held, once the daemon has them back: the ranges of views are the
     * Cleaner's to unmap; a buffer no view was made of is unmapped now.
     */
    synchronized void released() {
        for (Range r : ranges)
            r.released = true;
        open = false;
        for (int i = 0; i < roots.length; i++)
            if (roots[i] == null)
                Native.unmap(description[3 * i], description[3 * i + 1]);
    }

    private static ByteBuffer view(ByteBuffer root) {
        // a duplicate keeps its root reachable; its order is big-endian until set
        return root.duplicate().order(ByteOrder.nativeOrder());
    }

    private int index(int i) {
        if (i < 0 || i >= roots.length)
            throw new IndexOutOfBoundsException("buffer " + i + " of a lease of " + roots.length);
        return i;
    }

    /* The exception of a call on a closed lease: what(i). */
    private static ClosedException closed(String what, int i) {
        return new ClosedException(what + i + ")", "the lease");
    }

    /** @return "Lease(N x CLASS)" */
    @Override
    public String toString() {
        return "Lease(" + count() + " x " + className + ")";
    }
}
