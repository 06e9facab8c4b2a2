/*
 * SPDX-License-Identifier: MIT
 *
 * Status.java - the daemon's status as HugePool.status() reads it: built by the JNI side
 * (hugepool_jni.c, Native_status) from struct hp_status, each record through its canonical
 * constructor and the whole through of(), whose arguments are described once, by the rows of
 * STATUS_ARGS, STATUS_CLASS_ARGS and STATUS_JOURNAL_ARGS there (a record whose components differ
 * from its rows makes the library refuse to load). A component is added here and as a row there.
 */
package org.hugepool;

import java.util.List;

/**
 * A snapshot of the daemon's state, as {@code hugepoolctl status} shows it.
 *
 * @param daemonVersion the daemon's version
 * @param daemonPid its process id
 * @param pageSize the smallest page size of any class, in bytes (each class's: {@link BufferClass#pageSize()})
 * @param hugetlb true when every class is on hugetlb pages
 * @param fallbackReason why a class has other pages than it asked for (the first such class, after its
 *        name); "" when none has
 * @param poolBytes the pool's bytes
 * @param clients connections the daemon serves (only this user's unless an administrator asks)
 * @param leases leases held (likewise)
 * @param spillFiles spill files open
 * @param classes the buffer classes
 * @param journals the journals
 */
public record Status(String daemonVersion, int daemonPid, long pageSize, boolean hugetlb, String fallbackReason,
        long poolBytes, int clients, int leases, long spillFiles, List<BufferClass> classes, List<Journal> journals) {

    /**
     * A buffer class.
     *
     * @param name its name in hugepoold.conf
     * @param size bytes per buffer
     * @param total buffers in the class
     * @param free buffers free now
     * @param leased buffers leased now
     * @param waiters acquires waiting
     * @param retired no longer configured (held across a restart, then gone)
     * @param pageSize bytes of each page its buffers are on: 2 MiB or 1 GiB for hugetlb pages, 4096 for
     *        regular shared memory (its page_size in hugepoold.conf, auto as the daemon picked)
     * @param hugetlb true when its buffers are on hugetlb pages
     * @param fallbackReason why it has other pages than it asked for (too few were free); "" when it has
     *        those
     */
    public record BufferClass(String name, long size, int total, int free, int leased, int waiters, boolean retired,
            long pageSize, boolean hugetlb, String fallbackReason) {
    }

    /**
     * A journal.
     *
     * @param name its name in hugepoold.conf
     * @param backend how it writes: io_uring, libaio or sync
     * @param note why that backend, or what failed
     * @param state {@link #OK}, {@link #FULL} (waits for a truncate) or {@link #FAILED} (read-only)
     * @param nextLsn the LSN the next record gets
     * @param durableLsn the highest durable LSN
     * @param retainLsn records below it may be reused (truncated)
     * @param appends records appended since the daemon started
     * @param syncs syncs since the daemon started
     * @param writers writers open
     * @param segments its segment files ({@code segments} in hugepoold.conf)
     * @param segmentSize the bytes of each ({@code segment_size}), its 4096-byte header included
     * @param direct its segments are written with O_DIRECT ({@code direct}): each batch padded to 4096 bytes
     * @param recycle {@code when_full = recycle}: once every segment holds records not truncated, the
     *        oldest segment is reused and the records in it are lost; false for {@code block} (the
     *        default), where appends wait for a truncate. A program that keeps records until it
     *        truncates them must refuse such a journal.
     */
    public record Journal(String name, String backend, String note, int state, long nextLsn, long durableLsn,
            long retainLsn, long appends, long syncs, int writers, int segments, long segmentSize,
            boolean direct, boolean recycle) {
        /** {@link #state()}: appends are written. */
        public static final int OK = Native.JOURNAL_OK;
        /** {@link #state()}: every segment holds records not yet truncated; appends wait for a truncate. */
        public static final int FULL = Native.JOURNAL_FULL;
        /** {@link #state()}: a write or sync failed; read-only until the daemon restarts. */
        public static final int FAILED = Native.JOURNAL_FAILED;

        /**
         * The name of {@link #state()}.
         *
         * @return the state's name, as hugepoolctl status prints it: "ok", "full", "failed"
         */
        public String stateName() {
            return Native.journalStateName(state);
        }
    }

    /* Called by the JNI side (hugepool_jni.c, Native_status): the arguments of STATUS_ARGS. */
    static Status of(String daemonVersion, int daemonPid, long pageSize, boolean hugetlb, String fallbackReason,
            long poolBytes, int clients, int leases, long spillFiles, BufferClass[] classes, Journal[] journals) {
        return new Status(daemonVersion, daemonPid, pageSize, hugetlb, fallbackReason, poolBytes, clients, leases,
                spillFiles, List.of(classes), List.of(journals));
    }

    /**
     * The buffer class of that name.
     *
     * @param name a class name
     * @return that class, or null
     */
    public BufferClass bufferClass(String name) {
        for (BufferClass c : classes)
            if (c.name().equals(name))
                return c;
        return null;
    }

    /**
     * The journal of that name.
     *
     * @param name a journal name
     * @return that journal, or null
     */
    public Journal journal(String name) {
        for (Journal j : journals)
            if (j.name().equals(name))
                return j;
        return null;
    }
}
