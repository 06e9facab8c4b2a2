/*
 * SPDX-License-Identifier: MIT
 *
 * HugePool.java - a connection to hugepoold (an hp_conn) and everything that belongs to it: the
 * leases, journal readers and spill streams made through it, and the journal writers opened
 * from it (each on a connection of its own, see JournalWriter).
 *
 * Locking: `lock` guards the native connection and every native call on it (hp_conn is not
 * thread-safe), the lease and child sets and `conn`; Lease, JournalReader and SpillStream take it
 * for each of their calls. A writer has its own lock and is closed from here only with `lock`
 * released (the writer takes its own lock, then this one to forget itself). close() releases
 * every lease with hp_release_keep_range before hp_disconnect, so no ByteBuffer handed out ever
 * points at unmapped memory (Lease says what such a buffer reads).
 */
package org.hugepool;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A connection to hugepoold, the pool's daemon: lease buffers ({@link #acquire}), open journal
 * writers and readers, spill streams, and read the daemon's status.
 *
 * <pre>{@code
 * try (HugePool pool = HugePool.connect();
 *      Lease lease = pool.acquire("processing", 8, Duration.ofSeconds(1))) {
 *     ByteBuffer buf = lease.buffer(0);   // direct, native order, pre-faulted
 *     buf.putLong(0, 42);
 * }                                       // released, then disconnected
 * }</pre>
 *
 * <p><b>Threads.</b> A HugePool is thread-safe: its calls, and those of the leases, journal
 * readers and spill streams made through it, are serialised on its one connection. A waiting
 * {@link #acquire} holds the connection for as long as it waits, so a thread that waits for
 * buffers while another thread releases some should use a HugePool of its own (a connection costs
 * a socket and a round trip). Journal writers have a connection each and never wait for this one.
 *
 * <p><b>Lifetime.</b> Leases end with {@link Lease#close()}, with {@link #close()}, and when the
 * JVM exits or dies, even by SIGKILL: the daemon sees the connection close and takes the buffers
 * back. A HugePool that is never closed keeps its leases until the JVM exits. A warm restart of
 * the daemon keeps the connection and its leases (hugepoold(8), WARM RESTART).
 */
public final class HugePool implements AutoCloseable {
    /** The socket libhugepool connects to when neither a path nor {@code $HUGEPOOL_SOCKET} is given. */
    public static final String DEFAULT_SOCKET = "/run/hugepool/hugepoold.sock";

    /*
     * What every program's first calls need, made ready by the first connect, which loads the
     * native library anyway: the classes of a lease (verified, and initialised: Lease starts its
     * Cleaner's thread) and of a journal writer. So that in a fresh JVM the first acquire, release
     * or journal open costs what the C call costs plus the crossing, not its classes' loading.
     */
    static {
        try {
            ClassLoader loader = HugePool.class.getClassLoader();
            Class.forName("org.hugepool.Lease", true, loader);
            Class.forName("org.hugepool.JournalWriter", true, loader);
        } catch (ClassNotFoundException e) {
            throw new ExceptionInInitializerError(e); // they are in this jar
        }
    }

    final ReentrantLock lock = new ReentrantLock();
    private long conn; // guarded by lock; 0 once closed
    private final String socket; // as given: null for $HUGEPOOL_SOCKET or the default
    private final Set<Lease> leases = new LinkedHashSet<>(); // guarded by lock
    private final Set<AutoCloseable> children = new LinkedHashSet<>(); // guarded by lock

    private HugePool(long conn, String socket) {
        this.conn = conn;
        this.socket = socket;
    }

    /**
     * Connect to the daemon at {@code $HUGEPOOL_SOCKET}, or at {@link #DEFAULT_SOCKET} when it is
     * not set.
     *
     * @return the connection
     * @throws NoDaemonException no daemon listens there
     * @throws PermissionDeniedException the socket's permissions refuse this user
     * @throws LimitExceededException the daemon refuses more connections (of this uid, or at all)
     * @throws HugepoolException any other failure (a daemon of another protocol version: EPROTONOSUPPORT)
     */
    public static HugePool connect() throws HugepoolException {
        return connect(null);
    }

    /**
     * Connect to the daemon at {@code socketPath}.
     *
     * @param socketPath the daemon's socket; null for {@code $HUGEPOOL_SOCKET} or {@link #DEFAULT_SOCKET}
     * @return the connection
     * @throws HugepoolException as {@link #connect()}
     */
    public static HugePool connect(String socketPath) throws HugepoolException {
        return new HugePool(Native.connect(socketPath), socketPath);
    }

    /**
     * Lease {@code count} buffers of a class, all or none, waiting as long as it takes (the
     * daemon's {@code max_acquire_wait} bounds it). See {@link #acquire(String, int, Duration)}.
     *
     * @param className the buffer class, as configured in hugepoold.conf
     * @param count how many buffers, 1 to 1024
     * @return the lease
     * @throws HugepoolException as {@link #acquire(String, int, Duration)}
     */
    public Lease acquire(String className, int count) throws HugepoolException {
        return acquire(className, count, -1);
    }

    /**
     * Lease {@code count} buffers of a class, all or none. Waiters of a class are served in order
     * of arrival. The buffers come mapped, faulted in and with their page tables filled; they hold
     * what this user's previous holder left there (a warm restart of the program finds its data),
     * or zeroes when they come from another user.
     *
     * @param className the buffer class, as configured in hugepoold.conf
     * @param count how many buffers, 1 to 1024
     * @param timeout {@link Duration#ZERO}: only if they are free now; positive: wait at most that
     *        long; null or negative: as long as it takes
     * @return the lease; close it to give the buffers back
     * @throws NotFoundException no such class
     * @throws LimitExceededException more buffers than the class has, or this user's byte limit
     * @throws HugepoolTimeoutException not free now (timeout zero) or within the timeout
     * @throws DaemonGoneException the daemon went away
     * @throws ClosedException this HugePool is closed
     * @throws HugepoolException any other failure
     */
    public Lease acquire(String className, int count, Duration timeout) throws HugepoolException {
        return acquire(className, count, millis(timeout));
    }

    /*
     * A timeout for the library: -1 (no limit) for null, negative, or about as many milliseconds
     * as a long holds (292 million years); 0 for zero; else its milliseconds, at least 1.
     */
    static long millis(Duration timeout) {
        if (timeout == null || timeout.isNegative() || timeout.getSeconds() >= Long.MAX_VALUE / 1000)
            return -1;
        return timeout.isZero() ? 0 : Math.max(timeout.toMillis(), 1);
    }

    private Lease acquire(String className, int count, long timeoutMillis) throws HugepoolException {
        if (className == null)
            throw new NullPointerException("className");
        if (count < 1 || count > Native.ACQUIRE_MAX)
            throw new IllegalArgumentException("count " + count + " is not within 1.." + Native.ACQUIRE_MAX);
        long[] v = new long[3 * count];
        lock.lock();
        try {
            if (conn == 0)
                throw new ClosedException(acquiring(className, count), "the HugePool");
            int r = Native.acquire(conn, className, count, timeoutMillis, v);
            if (r < 0)
                throw failure(r, acquiring(className, count));
            Lease lease = new Lease(this, className, v);
            leases.add(lease);
            return lease;
        } finally {
            lock.unlock();
        }
    }

    /* What an acquire's exception says it was doing: built only when one is thrown. */
    private static String acquiring(String className, int count) {
        return "acquiring " + count + " buffer" + (count == 1 ? "" : "s") + " of class \"" + className + "\"";
    }

    /* Lease.close: give its buffers back, their ranges left as private zeroes. */
    void release(Lease lease) throws HugepoolException {
        lock.lock();
        try {
            if (!leases.contains(lease))
                return; // released already
            lease.closeSegments(); // before the memory under them stops being the lease's
            int r = Native.release(conn, lease.nativeDescription());
            if (r < 0)
                throw failure(r, "releasing " + lease);
            leases.remove(lease);
            lease.released();
        } finally {
            lock.unlock();
        }
    }

    /**
     * The daemon's state: its pool, classes, journals.
     *
     * @return a snapshot
     * @throws DaemonGoneException the daemon went away
     * @throws ClosedException this HugePool is closed
     * @throws HugepoolException any other failure
     */
    public Status status() throws HugepoolException {
        lock.lock();
        try {
            return Native.status(handle("reading the status"));
        } finally {
            lock.unlock();
        }
    }

    /**
     * Open a writer of a journal ({@code [journal NAME]} in hugepoold.conf), on a connection of its
     * own to the same socket. See {@link JournalWriter}.
     *
     * @param journal the journal's name
     * @return the writer; close it when done (closing this HugePool closes it too)
     * @throws NotFoundException no such journal
     * @throws PermissionDeniedException not in the journal's {@code append} list
     * @throws LimitExceededException too many writers (of this user, or of the journal), or too
     *         many connections of this user: the writer's connection counts against the daemon's
     *         {@code max_connections_per_uid} (64 by default) beside this HugePool's
     * @throws ClosedException this HugePool is closed
     * @throws HugepoolException any other failure
     */
    public JournalWriter openJournalWriter(String journal) throws HugepoolException {
        if (journal == null)
            throw new NullPointerException("journal");
        lock.lock();
        try {
            if (conn == 0)
                throw new ClosedException("opening a writer of journal \"" + journal + "\"", "the HugePool");
            JournalWriter w = new JournalWriter(this, journal, Native.writerOpen(socket, journal));
            children.add(w);
            return w;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Open a reader that replays a journal's durable records from {@code fromLsn} on. See
     * {@link JournalReader}.
     *
     * @param journal the journal's name
     * @param fromLsn the first LSN wanted (1 for the whole journal that is kept)
     * @return the reader
     * @throws NotFoundException no such journal
     * @throws PermissionDeniedException not in the journal's {@code read} list
     * @throws ClosedException this HugePool is closed
     * @throws HugepoolException any other failure
     */
    public JournalReader openJournalReader(String journal, long fromLsn) throws HugepoolException {
        lock.lock();
        try {
            if (conn == 0)
                throw new ClosedException(openingReader(journal, fromLsn), "the HugePool");
            long r = Native.readerOpen(conn, journal, fromLsn);
            if (r < 0)
                throw failure(r, openingReader(journal, fromLsn));
            JournalReader reader = new JournalReader(this, journal, r);
            children.add(reader);
            return reader;
        } finally {
            lock.unlock();
        }
    }

    private static String openingReader(String journal, long fromLsn) {
        return "opening a reader of journal \"" + journal + "\" from LSN " + fromLsn;
    }

    /**
     * Declare the records of a journal below {@code lsn} no longer needed: their segments may be
     * reused.
     *
     * @param journal the journal's name
     * @param lsn the first LSN still needed
     * @throws NotFoundException no such journal
     * @throws PermissionDeniedException not in the journal's {@code truncate} list
     * @throws ClosedException this HugePool is closed
     * @throws HugepoolException any other failure
     */
    public void truncateJournal(String journal, long lsn) throws HugepoolException {
        lock.lock();
        try {
            if (conn == 0)
                throw new ClosedException(truncating(journal, lsn), "the HugePool");
            int r = Native.truncate(conn, journal, lsn);
            if (r < 0)
                throw failure(r, truncating(journal, lsn));
        } finally {
            lock.unlock();
        }
    }

    private static String truncating(String journal, long lsn) {
        return "truncating journal \"" + journal + "\" below LSN " + lsn;
    }

    /**
     * A new spill stream whose bytes stay in this process's memory up to the daemon's
     * {@code spill_threshold} (1 MiB by default). See {@link SpillStream}.
     *
     * @return the stream
     * @throws ClosedException this HugePool is closed
     * @throws HugepoolException any other failure
     */
    public SpillStream openSpill() throws HugepoolException {
        return openSpill(0);
    }

    /**
     * A new spill stream with its own threshold.
     *
     * @param threshold bytes kept in memory before the stream moves to a file: 0 for the daemon's
     *        {@code spill_threshold}, {@link SpillStream#ALWAYS_FILE} for a file from the first byte,
     *        at most 1 GiB
     * @return the stream
     * @throws IllegalArgumentException threshold is negative and not {@link SpillStream#ALWAYS_FILE}
     * @throws ClosedException this HugePool is closed
     * @throws HugepoolException any other failure
     */
    public SpillStream openSpill(long threshold) throws HugepoolException {
        if (threshold < 0 && threshold != SpillStream.ALWAYS_FILE)
            throw new IllegalArgumentException("spill threshold " + threshold + ": 0, ALWAYS_FILE or a size");
        lock.lock();
        try {
            long s = check(Native.spillOpen(handle("opening a spill stream"), threshold), "opening a spill stream");
            SpillStream stream = new SpillStream(this, s);
            children.add(stream);
            return stream;
        } finally {
            lock.unlock();
        }
    }

    /**
     * The socket path this pool was connected with.
     *
     * @return the socket path given to {@link #connect(String)}, or null for the default
     */
    public String socketPath() {
        return socket;
    }

    /**
     * Whether the connection is open.
     *
     * @return false once {@link #close()} was called
     */
    public boolean isOpen() {
        lock.lock();
        try {
            return conn != 0;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Close the connection: journal writers opened from it are closed, then readers and spill
     * streams, then every lease still held is released (its ByteBuffers read zeroes from then on,
     * its MemorySegments throw) and the connection closed. Closing twice is fine.
     *
     * @throws HugepoolException a lease could not be released (the process's map count limit):
     *         the connection then stays open with that lease, since closing it would unmap the
     *         lease's memory under its ByteBuffers
     * @throws IllegalStateException a lease's segment is in use by an asynchronous channel's
     *         operation (see {@link Lease#close()}): the connection stays open with that lease
     */
    @Override
    public void close() throws HugepoolException {
        List<AutoCloseable> writers = new ArrayList<>();
        lock.lock();
        try {
            for (AutoCloseable ch : children)
                if (ch instanceof JournalWriter)
                    writers.add(ch);
        } finally {
            lock.unlock();
        }
        for (AutoCloseable w : writers)
            ((JournalWriter) w).close(); // takes the writer's lock, then ours to forget it
        lock.lock();
        try {
            if (conn == 0)
                return;
            for (AutoCloseable ch : children)
                if (ch instanceof PoolHandle)
                    ((PoolHandle) ch).closeLocked();
            children.clear();
            for (Lease l : new ArrayList<>(leases))
                release(l);
            Native.disconnect(conn);
            conn = 0;
        } finally {
            lock.unlock();
        }
    }

    /* With lock held. */
    boolean isOpenLocked() {
        return conn != 0;
    }

    /* The native connection for `what`, or ClosedException; with lock held. */
    long handle(String what) throws ClosedException {
        if (conn == 0)
            throw new ClosedException(what, "the HugePool");
        return conn;
    }

    /* A native result on this connection: the value, or the exception with the daemon's words. */
    long check(long r, String what) throws HugepoolException {
        if (r < 0)
            throw failure(r, what);
        return r;
    }

    /* The exception for r, a negative errno of a call on this connection, with the daemon's words. */
    HugepoolException failure(long r, String what) {
        return HugepoolException.create((int) -r, what, conn != 0 ? Native.lastError(conn) : "");
    }

    void forget(AutoCloseable child) {
        lock.lock();
        try {
            children.remove(child);
        } finally {
            lock.unlock();
        }
    }

    /** @return "HugePool(SOCKET)" */
    @Override
    public String toString() {
        return "HugePool(" + (socket != null ? socket : "default socket") + ")";
    }
}
