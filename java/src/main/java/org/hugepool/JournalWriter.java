/*
 * SPDX-License-Identifier: MIT
 *
 * JournalWriter.java - one writer of a journal: an hp_journal on a connection of its own.
 *
 * Why its own connection: a writer that waits looks at its connection to tell a dead daemon
 * from a slow sync (libhugepool's journal.c), so a reply to another thread's request on a shared
 * connection would look like the daemon's end; and a restart of the daemon closes writers'
 * connections (their rings' fate is the recovery's), which on a shared connection would take the
 * leases with it. The writer's monitor guards `handle` and serialises its calls, but for the
 * waits: those run in native code without it (libhugepool allows waits beside the one thread
 * that appends), counted in `waiters`, which close() waits to see at 0 before it frees the
 * handle. Appends of direct ByteBuffers are read in place, arrays copied once into the
 * writer's native area.
 */
package org.hugepool;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * A writer of a durable journal ({@code [journal NAME]} in hugepoold.conf), from
 * {@link HugePool#openJournalWriter(String)}. Records are numbered by LSN (1, 2, ...) in the order
 * the daemon writes them, and are durable (written and synced) once a wait for them returned. The
 * daemon batches the appends of every writer and process into as few writes and syncs as it can.
 *
 * <pre>{@code
 * try (JournalWriter w = pool.openJournalWriter("orders")) {
 *     long lsn = w.appendAndWait(order);                 // on disk when it returns
 *     long ticket = w.append(a);  w.append(b);
 *     w.await(w.append(c), Duration.ofSeconds(1));       // a, b and c durable
 * }
 * }</pre>
 *
 * <p>An append copies the record into a ring in shared memory and costs no system call while
 * the daemon is busy; a record is 0 to 1 MiB. A {@code ticket} names everything this writer
 * appended up to it: waiting for it waits for all of them.
 *
 * <p><b>Threads.</b> Thread-safe. Appends are serialised; waits ({@link #await},
 * {@link #awaitLsn}) are not: a thread may wait for one group while another appends the next,
 * which the daemon then takes during the first group's sync. An append that waits
 * ({@code appendAndWait}...) holds the writer while it waits, so for parallel appends use one
 * writer per thread (a writer is a connection, a ring and a few pages). Each writer is a
 * connection of its own, counted by the daemon's {@code max_connections_per_uid} (64 by
 * default) beside the HugePool's own connection and every other connection of the same user,
 * and {@code max_journal_writers_per_uid} (64 by default) bounds the writers: under the
 * defaults one HugePool opens at most 63 writers. Past a limit
 * {@link HugePool#openJournalWriter} throws {@link LimitExceededException}, whose message names it.
 *
 * <p><b>The daemon's restart</b> recovers the journal from disk and closes writers: the next call
 * throws {@link DaemonGoneException}, whose message says up to which LSN the journal is durable;
 * open a new writer, read on from there with a {@link JournalReader}, and append what is missing.
 */
public final class JournalWriter implements AutoCloseable {
    /** The most records {@link #appendBatch} takes at once. */
    public static final int BATCH_MAX = Native.BATCH_MAX;

    private final HugePool pool;
    private final String journal;
    private long handle; // guarded by this; 0 once closed
    private int waiters; // guarded by this: threads waiting in native code without the monitor

    JournalWriter(HugePool pool, String journal, long handle) {
        this.pool = pool;
        this.journal = journal;
        this.handle = handle;
    }

    /**
     * The journal this writer appends to.
     *
     * @return the journal's name
     */
    public String journal() {
        return journal;
    }

    /**
     * Append a record without waiting for it to be durable. Blocks only while the ring is full.
     *
     * @param record the bytes
     * @return the ticket for {@link #await}
     * @throws HugepoolException the journal failed (EIO, read-only now), a record too large
     *         (EMSGSIZE), the daemon went away ({@link DaemonGoneException}), a closed writer
     */
    public long append(byte[] record) throws HugepoolException {
        return append(record, 0, record.length);
    }

    /**
     * Append {@code len} bytes of {@code record} from {@code off}, without waiting.
     *
     * @param record the array
     * @param off where the record starts
     * @param len its length
     * @return the ticket
     * @throws HugepoolException as {@link #append(byte[])}
     * @throws IndexOutOfBoundsException the range is not within the array
     */
    public synchronized long append(byte[] record, int off, int len) throws HugepoolException {
        Objects.checkFromIndexSize(off, len, record.length);
        return check(Native.appendArray(handle("appending"), record, off, len, false), "appending");
    }

    /**
     * Append the bytes between {@code record}'s position and limit, without waiting; the position
     * moves to the limit. A direct buffer is read in place, unless it is a view of a
     * {@code MemorySegment} of an Arena or of a file mapping: those are copied
     * through Java's own accessors, which throw {@link IllegalStateException} once the Arena is
     * closed and {@link InternalError} where the file no longer covers the mapping.
     *
     * @param record the bytes
     * @return the ticket
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public long append(ByteBuffer record) throws HugepoolException {
        return appendBuffer(record, false, "appending");
    }

    /**
     * Append records as one group: consecutive LSNs, durable together. Without waiting.
     *
     * @param records 1 to {@link #BATCH_MAX} arrays
     * @return the ticket
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public long appendBatch(byte[]... records) throws HugepoolException {
        return batch(records, Native.BATCH_APPEND, "appending a batch");
    }

    /**
     * Append records (each between its position and limit; positions move to the limits) as one
     * group. Without waiting.
     *
     * @param records 1 to {@link #BATCH_MAX} buffers
     * @return the ticket
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public long appendBatch(ByteBuffer... records) throws HugepoolException {
        return batch(records, Native.BATCH_APPEND, "appending a batch");
    }

    /**
     * Append records as one group. Without waiting.
     *
     * @param records 1 to {@link #BATCH_MAX} arrays
     * @return the ticket
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public long appendBatch(List<byte[]> records) throws HugepoolException {
        return appendBatch(records.toArray(new byte[0][]));
    }

    /**
     * Append records as one group that nobody waits for yet: the daemon need not sync them at
     * once, and holds them up to the journal's {@code max_batch_delay} for records someone waits
     * for, to sync them together (hp_journal_appendv_flags(3), HP_JOURNAL_APPEND_LAZY). A wait
     * for them ({@link #await}, {@link #awaitLsn}, {@link #close}) asks for them at once. They
     * are the daemon's once appended: this process may die without losing them.
     *
     * @param records 1 to {@link #BATCH_MAX} arrays
     * @return the ticket
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public long appendBatchLazy(List<byte[]> records) throws HugepoolException {
        return batch(records.toArray(new byte[0][]), Native.BATCH_LAZY, "appending a lazy batch");
    }

    /**
     * Append a record and wait until it is durable.
     *
     * @param record the bytes
     * @return its LSN
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public synchronized long appendAndWait(byte[] record) throws HugepoolException {
        return check(Native.appendArray(handle("appending"), record, 0, record.length, true), "appending");
    }

    /**
     * Append a buffer's remaining bytes and wait until they are durable; its position moves to
     * its limit.
     *
     * @param record the bytes
     * @return its LSN
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public long appendAndWait(ByteBuffer record) throws HugepoolException {
        return appendBuffer(record, true, "appending");
    }

    /**
     * Append records as one group and wait until they are durable.
     *
     * @param records 1 to {@link #BATCH_MAX} arrays
     * @return the first record's LSN (the others follow it)
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public long appendBatchAndWait(byte[]... records) throws HugepoolException {
        return batch(records, Native.BATCH_WAIT, "appending a batch");
    }

    /**
     * Append buffers as one group and wait until they are durable.
     *
     * @param records 1 to {@link #BATCH_MAX} buffers
     * @return the first record's LSN
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public long appendBatchAndWait(ByteBuffer... records) throws HugepoolException {
        return batch(records, Native.BATCH_WAIT, "appending a batch");
    }

    /**
     * Wait until everything this writer appended up to {@code ticket} is durable.
     *
     * @param ticket from an append
     * @param timeout null or negative: no limit
     * @throws HugepoolTimeoutException not durable within the timeout
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public void await(long ticket, Duration timeout) throws HugepoolException {
        waitFor(false, ticket, timeout, "waiting for ticket " + ticket);
    }

    /**
     * Wait until the journal is durable up to {@code lsn}, whoever appended it.
     *
     * @param lsn an LSN
     * @param timeout null or negative: no limit
     * @throws HugepoolTimeoutException not durable within the timeout
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public void awaitLsn(long lsn, Duration timeout) throws HugepoolException {
        waitFor(true, lsn, timeout, "waiting for LSN " + lsn);
    }

    /* A wait for a ticket or (isLsn) an LSN, without the monitor: counted in `waiters`. */
    private void waitFor(boolean isLsn, long what, Duration timeout, String doing) throws HugepoolException {
        long h = enter("waiting");
        try {
            long ms = HugePool.millis(timeout);
            int r = isLsn ? Native.awaitLsn(h, what, ms) : Native.await(h, what, ms);
            if (r < 0)
                throw failed(h, r, doing);
        } finally {
            leave();
        }
    }

    /** How a writer's waits wait for the sync that makes their records durable. */
    public enum WaitMode {
        /**
         * The default: first poll, yielding the CPU, for as long as the daemon hints it pays
         * (about two syncs, when the daemon's own thread writes the batch), then sleep.
         */
        SPIN,
        /**
         * Sleep at once. For a thread whose process has other work for the CPUs while it waits
         * (a broker's appender, whose broker makes the next group meanwhile): polling takes the
         * CPU time that work needs.
         */
        SLEEP
    }

    /**
     * Choose how this writer's waits ({@link #await}, {@link #awaitLsn}, the {@code ...AndWait}
     * appends) wait; hp_journal_set_wait_mode(3).
     *
     * @param mode {@link WaitMode#SPIN} or {@link WaitMode#SLEEP}
     * @throws ClosedException the writer is closed
     * @throws HugepoolException as {@link #append(byte[])}
     */
    public synchronized void setWaitMode(WaitMode mode) throws HugepoolException {
        int r = Native.setWaitMode(handle("choosing how to wait"), Objects.requireNonNull(mode, "mode").ordinal());
        if (r < 0)
            throw failed(handle, r, "choosing how to wait");
    }

    /**
     * The journal's durable LSN.
     *
     * @return the highest LSN known durable (0: none yet)
     * @throws ClosedException the writer is closed
     */
    public synchronized long durableLsn() throws ClosedException {
        return Native.durableLsn(handle("reading the durable LSN"));
    }

    /**
     * Whether the writer is open.
     *
     * @return false once closed
     */
    public synchronized boolean isOpen() {
        return handle != 0;
    }

    /**
     * Close the writer and its connection; what it appended is still written. Closing twice is
     * fine. Waits for the calls of other threads in progress (a wait without a timeout included).
     */
    @Override
    public void close() {
        synchronized (this) {
            boolean interrupted = false;
            while (waiters > 0 && handle != 0) {
                try {
                    wait();
                } catch (InterruptedException e) {
                    interrupted = true; // the waits end by themselves: close when they have
                }
            }
            if (interrupted)
                Thread.currentThread().interrupt();
            if (handle == 0)
                return;
            Native.writerClose(handle);
            handle = 0;
        }
        pool.forget(this);
    }

    /* A call that waits without the monitor: the handle stays open until its leave(). */
    private synchronized long enter(String what) throws ClosedException {
        long h = handle(what);
        waiters++;
        return h;
    }

    /* Tests only: the threads in a wait without the monitor. */
    synchronized int waiters() {
        return waiters;
    }

    private synchronized void leave() {
        if (--waiters == 0)
            notifyAll();
    }

    /*
     * Between enter and leave, or with the monitor held (h: handle): the exception for r, a
     * negative errno. The monitor orders the reading of the daemon's words after an appending
     * thread's writing of them.
     */
    private synchronized HugepoolException failed(long h, long r, String what) {
        return HugepoolException.create((int) -r, what + " (journal \"" + journal + "\")", Native.writerLastError(h));
    }

    private synchronized long appendBuffer(ByteBuffer record, boolean wait, String what) throws HugepoolException {
        int pos = record.position(), len = record.remaining();
        long r;
        if (record.isDirect() && (Native.CHECKS_BUFFERS || BufferViews.inPlace(record))) {
            r = Native.append(handle(what), record, pos, len, wait);
            if (r == Native.NOT_IN_PLACE)
                r = Native.appendArray(handle(what), copy(record), 0, len, wait);
        } else if (record.hasArray())
            r = Native.appendArray(handle(what), record.array(), record.arrayOffset() + pos, len, wait);
        else
            r = Native.appendArray(handle(what), copy(record), 0, len, wait);
        check(r, what);
        record.position(pos + len);
        return r;
    }

    private synchronized long batch(Object[] records, int mode, String what) throws HugepoolException {
        int n = records.length;
        if (n < 1 || n > BATCH_MAX)
            throw new IllegalArgumentException("a batch of " + n + " records: 1 to " + BATCH_MAX);
        Object[] recs = new Object[n];
        int[] offs = new int[n], lens = new int[n];
        for (int i = 0; i < n; i++) {
            Object o = records[i];
            if (o instanceof byte[]) {
                recs[i] = o;
                lens[i] = ((byte[]) o).length;
            } else {
                ByteBuffer b = (ByteBuffer) o;
                lens[i] = b.remaining();
                if (b.isDirect() && (Native.CHECKS_BUFFERS || BufferViews.inPlace(b))) {
                    recs[i] = b;
                    offs[i] = b.position();
                } else if (b.hasArray()) {
                    recs[i] = b.array();
                    offs[i] = b.arrayOffset() + b.position();
                } else {
                    recs[i] = copy(b);
                }
            }
        }
        long r = Native.appendBatch(handle(what), recs, offs, lens, mode);
        if (r == Native.NOT_IN_PLACE) { // a buffer native code may not read: copy them all, once
            for (int i = 0; i < n; i++) {
                if (recs[i] instanceof ByteBuffer) {
                    ByteBuffer b = (ByteBuffer) recs[i];
                    recs[i] = copy(b.duplicate().position(offs[i]).limit(offs[i] + lens[i]));
                    offs[i] = 0;
                }
            }
            r = Native.appendBatch(handle(what), recs, offs, lens, mode);
        }
        check(r, what);
        for (Object o : records)
            if (o instanceof ByteBuffer)
                ((ByteBuffer) o).position(((ByteBuffer) o).limit());
        return r;
    }

    private static byte[] copy(ByteBuffer b) {
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return a;
    }

    /* With this writer's monitor held. */
    private long handle(String what) throws ClosedException {
        if (handle == 0)
            throw new ClosedException(what + " (journal \"" + journal + "\")", "the writer");
        return handle;
    }

    /* With this writer's monitor held: the value, or the exception with the daemon's words. */
    private long check(long r, String what) throws HugepoolException {
        if (r < 0)
            throw failed(handle, r, what);
        return r;
    }

    /** @return "JournalWriter(NAME)" */
    @Override
    public String toString() {
        return "JournalWriter(" + journal + ")";
    }
}
