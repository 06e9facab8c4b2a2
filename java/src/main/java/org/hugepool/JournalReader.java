/*
 * SPDX-License-Identifier: MIT
 *
 * JournalReader.java - replays a journal's durable records (hp_journal_reader) through the
 * HugePool's connection. The native side copies up to 64 whole records per call out of the
 * read-only mapped segments into `window`, a direct buffer this object owns, so a record's view
 * is Java-owned memory: a view kept too long reads later records' bytes but never a segment the
 * library unmapped (which would be SIGSEGV). All calls run under the pool's lock, which also
 * guards `window` and the batch fields (the handle and its close: PoolHandle).
 */
package org.hugepool;

import java.nio.ByteBuffer;

/**
 * Replays a journal's durable records from an LSN on, from
 * {@link HugePool#openJournalReader(String, long)}. The records are read from the journal's
 * segment files, checked (CRC) by libhugepool; the daemon's durable LSN bounds what is returned.
 *
 * <pre>{@code
 * try (JournalReader r = pool.openJournalReader("orders", 1)) {
 *     for (JournalRecord rec; (rec = r.next()) != null; )
 *         apply(rec.lsn(), rec.data());
 * }
 * }</pre>
 *
 * <p><b>Threads.</b> Thread-safe (its calls are serialised on the HugePool's connection), but a
 * replay is one sequence: read it from one thread.
 */
public final class JournalReader extends PoolHandle {
    private static final int EOVERFLOW = Native.EOVERFLOW;
    private static final int BATCH = Native.READ_MAX;

    private final String journal;
    private ByteBuffer window = ByteBuffer.allocateDirect(256 << 10);
    private final long[] meta = new long[3 * BATCH];
    private int have, next; // records in the window, and the next one to hand out

    JournalReader(HugePool pool, String journal, long handle) {
        super(pool, handle, "the reader");
        this.journal = journal;
    }

    /**
     * The journal this reader reads.
     *
     * @return the journal's name
     */
    public String journal() {
        return journal;
    }

    /**
     * The next durable record.
     *
     * @return the record, or null when no more records are durable right now (call again later
     *         for newer ones)
     * @throws HugepoolException the records were recycled while being read (ESTALE: truncated
     *         under the reader), a segment is damaged before the durable end (EUCLEAN), a closed
     *         reader or HugePool ({@link ClosedException})
     */
    public JournalRecord next() throws HugepoolException {
        pool.lock.lock();
        try {
            if (next == have) {
                long h = handleOrZero();
                if (h == 0)
                    throw closed(reading());
                int n;
                while ((n = Native.readerNext(h, window, window.capacity(), meta, BATCH)) == -EOVERFLOW)
                    window = ByteBuffer.allocateDirect((int) Math.max(meta[0], 2L * window.capacity()));
                if (n < 0)
                    throw pool.failure(n, reading());
                have = n;
                next = 0;
                if (have == 0)
                    return null;
            }
            int i = next++;
            ByteBuffer view = window.duplicate();
            view.limit((int) (meta[3 * i + 1] + meta[3 * i + 2])).position((int) meta[3 * i + 1]);
            return new JournalRecord(meta[3 * i], view.slice().asReadOnlyBuffer());
        } finally {
            pool.lock.unlock();
        }
    }

    private String reading() {
        return "reading journal \"" + journal + "\"";
    }

    @Override
    void nativeClose(long handle) {
        Native.readerClose(handle);
    }

    /** @return "JournalReader(NAME)" */
    @Override
    public String toString() {
        return "JournalReader(" + journal + ")";
    }
}
