/*
 * SPDX-License-Identifier: MIT
 *
 * BuffersReady.java - "A JVM getting its buffers ready" (bench/bench_java.sh, make bench): N
 * buffers of 1 GiB, ready to use, every page touched, three ways in one JVM:
 *   ours      HugePool.connect + acquire of N buffers of a class of hugepoold (pre-faulted at
 *             its boot) + a write of one byte per 4 KiB page; then release and close;
 *   serial    ByteBuffer.allocateDirect of 1 GiB, N times one after another, + the same writes
 *             (allocateDirect zeroes the memory, faulting every page: what Druid's processing
 *             buffers cost before its PR 19025);
 *   parallel  the same N allocations and writes as tasks of a ForkJoinPool of one thread per CPU
 *             (what PR 19025 made of it).
 * Best of ROUNDS for each, the methods taking turns; the direct buffers are freed between rounds
 * (their Cleaner, through sun.misc.Unsafe.invokeCleaner, as Druid and Netty free them).
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

import org.hugepool.HugePool;
import org.hugepool.Lease;

public final class BuffersReady {
    private static final int GIB = 1 << 30;
    private static final int PAGE = 4096;

    private BuffersReady() {
    }

    static long touch(ByteBuffer b) {
        long sum = 0;
        for (int i = 0; i < b.capacity(); i += PAGE) {
            b.put(i, (byte) 1);
            sum += b.get(i);
        }
        return sum;
    }

    static long ours(String socket, String cls, int n) throws Exception {
        long t0 = System.nanoTime();
        try (HugePool pool = HugePool.connect(socket); Lease lease = pool.acquire(cls, n, Duration.ofSeconds(60))) {
            long sum = 0;
            for (ByteBuffer b : lease.buffers())
                sum += touch(b);
            long t = System.nanoTime() - t0;
            if (sum == 0)
                throw new AssertionError();
            return t;
        }
    }

    static ByteBuffer allocate() {
        ByteBuffer b = ByteBuffer.allocateDirect(GIB);
        touch(b);
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
        ForkJoinPool fj = new ForkJoinPool(Runtime.getRuntime().availableProcessors());
        long best[] = { Long.MAX_VALUE, Long.MAX_VALUE, Long.MAX_VALUE };
        List<ByteBuffer> keep = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
            best[0] = Math.min(best[0], ours(socket, cls, n));
            best[1] = Math.min(best[1], serial(n, keep));
            free(keep);
            best[2] = Math.min(best[2], parallel(n, keep, fj));
            free(keep);
        }
        fj.shutdown();
        double gb = n * (double) GIB / 1e9;
        System.out.printf("%d GiB of buffers ready (%d x 1 GiB, a write per 4 KiB page), best of %d, Java %s, %d CPUs%n", n, n,
                rounds, System.getProperty("java.version"), Runtime.getRuntime().availableProcessors());
        System.out.println("| from hugepoold | allocateDirect serial | allocateDirect parallel (ForkJoinPool) | serial / ours | parallel / ours |");
        System.out.println("|---|---|---|---|---|");
        System.out.printf("| %.1f ms (%.0f GB/s) | %.0f ms (%.1f GB/s) | %.0f ms (%.1f GB/s) | **%.0fx** | **%.0fx** |%n",
                best[0] / 1e6, gb / (best[0] / 1e9), best[1] / 1e6, gb / (best[1] / 1e9), best[2] / 1e6,
                gb / (best[2] / 1e9), (double) best[1] / best[0], (double) best[2] / best[0]);
    }
}
