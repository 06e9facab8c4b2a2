/*
 * SPDX-License-Identifier: MIT
 *
 * FirstCalls.java - one fresh JVM's first calls (bench/bench_java.sh, make bench), as a newcomer's
 * program makes them at boot, each timed from the call to its return, class loading and the
 * library's loading included (that is what a starting engine pays):
 *   ours SOCKET CLASS N PAGE JOURNAL   HugePool.connect, acquire of N buffers of CLASS, a write
 *                                      per PAGE bytes of every buffer (the touch), the lease's
 *                                      close (release), openJournalWriter, the first append (no
 *                                      wait), the wait for it, the pool's close;
 *   alloc N                            N ByteBuffer.allocateDirect of 1 GiB as tasks of a
 *                                      ForkJoinPool of one thread per CPU (Druid's processing
 *                                      buffers since its PR 19025), then a write per 4 KiB.
 * Prints one line of NAME=NANOSECONDS pairs, only once everything is timed, so that nothing the
 * printing loads is paid by a call. bench_first_calls.c prints the same names for the C client;
 * bench_java.sh runs the three in turn, each process fresh, and prints their medians side by side.
 * Usage: FirstCalls ours SOCKET CLASS N PAGE JOURNAL | FirstCalls alloc N
 */
package org.hugepool.bench;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.Future;

import org.hugepool.HugePool;
import org.hugepool.JournalWriter;
import org.hugepool.Lease;

public final class FirstCalls {
    private static final int GIB = 1 << 30;

    private FirstCalls() {
    }

    /* A write per page, each a value no other page holds (see BuffersReady.touch). */
    private static long touch(ByteBuffer b, int page, long stamp) {
        long sum = 0;
        for (int i = 0; i < b.capacity(); i += page) {
            b.putLong(i, ++stamp);
            sum += b.get(i);
        }
        return sum;
    }

    public static void main(String[] args) throws Exception {
        String[] names;
        long[] t;
        long sum = 0;
        if (args[0].equals("ours")) {
            String socket = args[1], cls = args[2], journal = args[5];
            int n = Integer.parseInt(args[3]), page = Integer.parseInt(args[4]);
            names = new String[] { "connect", "acquire", "touch", "release", "journal_open", "append", "append_wait",
                    "close" };
            t = new long[names.length + 1];
            t[0] = System.nanoTime();
            HugePool pool = HugePool.connect(socket);
            t[1] = System.nanoTime();
            Lease lease = pool.acquire(cls, n, Duration.ofSeconds(60));
            t[2] = System.nanoTime();
            for (int i = 0; i < n; i++)
                sum += touch(lease.buffer(i), page, (long) i << 32);
            t[3] = System.nanoTime();
            lease.close();
            t[4] = System.nanoTime();
            JournalWriter w = pool.openJournalWriter(journal);
            t[5] = System.nanoTime();
            long ticket = w.append(new byte[100]);
            t[6] = System.nanoTime();
            w.await(ticket, null);
            t[7] = System.nanoTime();
            pool.close();
            t[8] = System.nanoTime();
        } else {
            int n = Integer.parseInt(args[1]);
            names = new String[] { "alloc", "touch" };
            t = new long[names.length + 1];
            t[0] = System.nanoTime();
            ForkJoinPool fj = new ForkJoinPool(Runtime.getRuntime().availableProcessors());
            List<Future<ByteBuffer>> f = new ArrayList<>();
            for (int i = 0; i < n; i++)
                f.add(fj.submit(() -> ByteBuffer.allocateDirect(GIB)));
            List<ByteBuffer> bufs = new ArrayList<>();
            for (Future<ByteBuffer> x : f)
                bufs.add(x.get());
            t[1] = System.nanoTime();
            for (int i = 0; i < n; i++)
                sum += touch(bufs.get(i), 4096, (long) i << 32);
            t[2] = System.nanoTime();
            fj.shutdown();
        }
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < names.length; i++)
            out.append(i == 0 ? "" : " ").append(names[i]).append('=').append(t[i + 1] - t[i]);
        System.out.println(sum == Long.MIN_VALUE ? "" : out);
    }
}
