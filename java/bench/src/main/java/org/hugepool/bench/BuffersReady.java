/*
 * SPDX-License-Identifier: MIT
 *
 * BuffersReady.java - "A JVM getting its buffers ready" (bench/bench_java.sh, make bench): N
 * buffers of 1 GiB, ready to use, every page touched, three ways in one JVM:
 *   ours      HugePool.connect + acquire of N buffers of a class of hugepoold (pre-faulted at
 *             its boot) + a write of one byte per page of the pool (2 MiB on hugetlb pages); then
 *             release and close; and the same with a write per 4 KiB, for comparison (it
 *             measures the memory's latency, 2 million cache misses, not faults: none happen);
 *   serial    ByteBuffer.allocateDirect of 1 GiB, N times one after another, + a write per 4 KiB
 *             (allocateDirect zeroes the memory, faulting every page: what Druid's processing
 *             buffers cost before its PR 19025);
 *   parallel  the same N allocations and writes as tasks of a ForkJoinPool of one thread per CPU
 *             (what PR 19025 made of it).
 * Best of ROUNDS for each, hugepoold's first (a starting JVM); the direct buffers are freed between
 * rounds (their Cleaner, through sun.misc.Unsafe.invokeCleaner, as Druid and Netty free them).
 * Prints a table: ms and GB/s for each, serial / ours and parallel / ours.
 * Usage: BuffersReady SOCKET CLASS N ROUNDS
 */
package org.hugepool.bench;

import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;

import org.hugepool.HugePool;
import org.hugepool.Lease;

public final class BuffersReady {
    private static final int GIB = 1 << 30;
    private static final int PAGE = 4096;

    private BuffersReady() {
    }

    private static final AtomicLong STAMP = new AtomicLong(); // makes every page written unique

    /*
     * A write per page. Each writes a value no other page holds: pages that were written alike
     * can be merged by the host of a VM (KSM), and the next write is then a copy on the host,
     * tens of microseconds, which measured the host instead of the memory (8 GiB of 2 MiB pages
     * written with one byte each took 5 ms in one round and 170 ms in the next).
     */
    static long touch(ByteBuffer b, int page) {
        long sum = 0, stamp = STAMP.getAndAdd(b.capacity() / page + 1);
        for (int i = 0; i < b.capacity(); i += page) {
            b.putLong(i, ++stamp);
            sum += b.get(i);
        }
        return sum;
    }

    /* page: the stride of the writes, the pool's page size or 4 KiB */
    static long ours(String socket, String cls, int n, int page) throws Exception {
        long t0 = System.nanoTime();
        try (HugePool pool = HugePool.connect(socket); Lease lease = pool.acquire(cls, n, Duration.ofSeconds(60))) {
            long sum = 0;
            for (ByteBuffer b : lease.buffers())
                sum += touch(b, page);
            long t = System.nanoTime() - t0;
            if (sum == Long.MIN_VALUE)
                throw new AssertionError();
            return t;
        }
    }

    static ByteBuffer allocate() {
        ByteBuffer b = ByteBuffer.allocateDirect(GIB);
        touch(b, PAGE);
        return b;
    }

    static long serial(int n, List<ByteBuffer> keep) {
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++)
            keep.add(allocate());
        return System.nanoTime() - t0;
    }

    static long parallel(int n, List<ByteBuffer> keep, ForkJoinPool fj) throws Exception {
        long t0 = System.nanoTime();
        List<Future<ByteBuffer>> f = new ArrayList<>();
        for (int i = 0; i < n; i++)
            f.add(fj.submit(BuffersReady::allocate));
        for (Future<ByteBuffer> x : f)
            keep.add(x.get());
        return System.nanoTime() - t0;
    }

    static void free(List<ByteBuffer> keep) throws Exception {
        Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        f.setAccessible(true);
        sun.misc.Unsafe u = (sun.misc.Unsafe) f.get(null);
        for (ByteBuffer b : keep)
            u.invokeCleaner(b);
        keep.clear();
    }

    public static void main(String[] args) throws Exception {
        String socket = args[0], cls = args[1];
        int n = Integer.parseInt(args[2]), rounds = Integer.parseInt(args[3]);
        int page;
        try (HugePool pool = HugePool.connect(socket)) {
            page = (int) pool.status().pageSize();
        }
        ForkJoinPool fj = new ForkJoinPool(Runtime.getRuntime().availableProcessors());
        long best[] = { Long.MAX_VALUE, Long.MAX_VALUE, Long.MAX_VALUE, Long.MAX_VALUE };
        List<ByteBuffer> keep = new ArrayList<>();
        // hugepoold's rounds first, as a starting JVM gets its buffers: on this VM the first
        // acquire and touch after the same JVM freed gigabytes of direct memory took 4-40 times
        // as long, though no page faulted (the host's doing, not the JVM's: see docs/MEASURED.md)
        for (int r = 0; r < rounds; r++) {
            best[0] = Math.min(best[0], ours(socket, cls, n, page));
            best[3] = Math.min(best[3], ours(socket, cls, n, PAGE));
        }
        for (int r = 0; r < rounds; r++) {
            best[1] = Math.min(best[1], serial(n, keep));
            free(keep);
            best[2] = Math.min(best[2], parallel(n, keep, fj));
            free(keep);
        }
        fj.shutdown();
        double gb = n * (double) GIB / 1e9;
        System.out.printf("%d GiB of buffers ready (%d x 1 GiB, a write per page: %d KiB from hugepoold, 4 KiB from"
                + " allocateDirect), best of %d, Java %s, %d CPUs%n", n, n, page >> 10, rounds,
                System.getProperty("java.version"), Runtime.getRuntime().availableProcessors());
        System.out.println("| from hugepoold | allocateDirect serial | allocateDirect parallel (ForkJoinPool) | serial / ours"
                + " | parallel / ours | from hugepoold, a write per 4 KiB |");
        System.out.println("|---|---|---|---|---|---|");
        System.out.printf("| %.1f ms | %.0f ms (%.1f GB/s) | %.0f ms (%.1f GB/s) | **%.0fx** | **%.0fx** | %.1f ms (%.0fx, %.0fx) |%n",
                best[0] / 1e6, best[1] / 1e6, gb / (best[1] / 1e9), best[2] / 1e6, gb / (best[2] / 1e9),
                (double) best[1] / best[0], (double) best[2] / best[0], best[3] / 1e6, (double) best[1] / best[3],
                (double) best[2] / best[3]);
    }
}
