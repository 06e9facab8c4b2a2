/*
 * SPDX-License-Identifier: MIT
 *
 * Status.java - the daemon's status as HugePool.status() reads it: hp_status flattened by the
 * JNI side (hugepool_jni.c, Native_status) into strings and numbers, decoded here in the same
 * order (keep the two in step).
 */
package org.hugepool;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A snapshot of the daemon's state, as {@code hugepoolctl status} shows it.
 *
 * @param daemonVersion the daemon's version
 * @param daemonPid its process id
 * @param pageSize the pool's page size in bytes (2 MiB for hugetlb pages of 2 MiB)
 * @param hugetlb true when the pool is hugetlb memory
 * @param fallbackReason why hugepages were preferred but not used; "" when they were
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
     */
    public record BufferClass(String name, long size, int total, int free, int leased, int waiters, boolean retired) {
    }

    /**
     * A journal.
     *
     * @param name its name in hugepoold.conf
     * @param backend how it writes: io_uring, libaio or sync
     * @param note why that backend, or what failed
     * @param state 0 ok, 1 full (waits for a truncate), 2 failed (read-only)
     * @param nextLsn the LSN the next record gets
     * @param durableLsn the highest durable LSN
     * @param retainLsn records below it may be reused (truncated)
     * @param appends records appended since the daemon started
     * @param syncs syncs since the daemon started
     * @param writers writers open
     */
    public record Journal(String name, String backend, String note, int state, long nextLsn, long durableLsn,
            long retainLsn, long appends, long syncs, int writers) {
    }

    static Status decode(String[] s, long[] v) {
        int is = 0, iv = 0;
        String version = s[is++], fallback = s[is++];
        int pid = (int) v[iv++];
        long pageSize = v[iv++];
        boolean hugetlb = v[iv++] != 0;
        iv++; // fallback: the reason says it
        long poolBytes = v[iv++];
        int nclasses = (int) v[iv++], njournals = (int) v[iv++], clients = (int) v[iv++], leases = (int) v[iv++];
        long spillFiles = v[iv++];
        List<BufferClass> classes = new ArrayList<>();
        for (int i = 0; i < nclasses; i++, iv += 6)
            classes.add(new BufferClass(s[is++], v[iv], (int) v[iv + 1], (int) v[iv + 2], (int) v[iv + 3],
                    (int) v[iv + 4], v[iv + 5] != 0));
        List<Journal> journals = new ArrayList<>();
        for (int i = 0; i < njournals; i++, is += 3, iv += 7)
            journals.add(new Journal(s[is], s[is + 1], s[is + 2], (int) v[iv], v[iv + 1], v[iv + 2], v[iv + 3],
                    v[iv + 4], v[iv + 5], (int) v[iv + 6]));
        return new Status(version, pid, pageSize, hugetlb, fallback, poolBytes, clients, leases, spillFiles,
                Collections.unmodifiableList(classes), Collections.unmodifiableList(journals));
    }

    /**
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
