/*
 * SPDX-License-Identifier: MIT
 *
 * DurableAppends.java - "Durable appends from Java" (bench/bench_java.sh, make bench): W threads
 * each append a record of S bytes and wait until it is durable, in a loop, for SECONDS per cell,
 * in one JVM, on the same file system, the methods taking turns:
 *   ours       hugepoold's journal through org.hugepool: a JournalWriter per thread,
 *              appendAndWait;
 *   artemis    ActiveMQ Artemis's own journal (artemis-journal): JournalImpl with the NIO
 *              factory and with the ASYNCIO (libaio) factory, both buffered (the TimedBuffer)
 *              with the buffer timeout `artemis create` would pick on this disk (one block
 *              written and synced at a time, its mean time: SyncCalculation's rule), each thread
 *              appendAddRecord(..., sync = true); Artemis's defaults otherwise (10 MiB files, 2
 *              minimum, a pool of 10, 490 KiB buffer, max IO 1 for NIO and 4096 for ASYNCIO);
 *   C          the same cell of bench_journal's "ours" (a C writer per thread against the same
 *              daemon, measured by the script just before), passed as -Dc.W.S=appends/s: what
 *              the JNI crossing costs the Java writer.
 * Prints appends/s for each (best of REPEAT runs, the methods taking turns), ours / best Artemis
 * and Java / C.
 * Usage: DurableAppends SOCKET JOURNAL DIR WRITERS SIZES SECONDS [REPEAT]   (WRITERS, SIZES: comma lists)
 */
package org.hugepool.bench;

import java.io.File;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.activemq.artemis.core.io.SequentialFileFactory;
import org.apache.activemq.artemis.core.io.aio.AIOSequentialFileFactory;
import org.apache.activemq.artemis.core.io.nio.NIOSequentialFileFactory;
import org.apache.activemq.artemis.core.journal.impl.JournalImpl;
import org.hugepool.HugePool;
import org.hugepool.JournalWriter;

public final class DurableAppends {
    private static final int BUFFER_SIZE = 490 * 1024; // journal-buffer-size's default
    private static final int FILE_SIZE = 10 * 1024 * 1024;

    private DurableAppends() {
    }

    interface Appender {
        void appendAndWait(byte[] rec) throws Exception;
    }

    interface Method {
        Appender open(int thread) throws Exception;
    }

    /* W threads appending for `seconds`: appends per second. */
    static double run(int w, int size, double seconds, Method m) throws Exception {
        AtomicLong total = new AtomicLong();
        CyclicBarrier start = new CyclicBarrier(w + 1);
        List<Thread> threads = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        long[] window = new long[2];
        for (int i = 0; i < w; i++) {
            final Appender a = m.open(i);
            Thread t = new Thread(() -> {
                byte[] rec = new byte[size];
                long n = 0;
                try {
                    start.await();
                    long end = System.nanoTime() + (long) (seconds * 1e9);
                    while (System.nanoTime() < end) {
                        a.appendAndWait(rec);
                        n++;
                    }
                } catch (Throwable e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
                total.addAndGet(n);
            });
            threads.add(t);
            t.start();
        }
        start.await();
        window[0] = System.nanoTime();
        for (Thread t : threads)
            t.join();
        window[1] = System.nanoTime();
        if (!errors.isEmpty())
            throw new RuntimeException(errors.get(0));
        return total.get() / ((window[1] - window[0]) / 1e9);
    }

    /* SyncCalculation's rule for journal-buffer-timeout: ns per block written and synced, one at a time. */
    static int syncTimeoutNs(File dir) throws Exception {
        File f = new File(dir, "sync-calculation");
        try (RandomAccessFile raf = new RandomAccessFile(f, "rw"); FileChannel ch = raf.getChannel()) {
            raf.setLength(4096L * 4096);
            ByteBuffer block = ByteBuffer.allocateDirect(4096);
            ch.force(true);
            long t0 = System.nanoTime(), n = 0;
            while (System.nanoTime() - t0 < 500_000_000L) {
                block.clear();
                ch.write(block, (n % 4096) * 4096);
                ch.force(false);
                n++;
            }
            return (int) ((System.nanoTime() - t0) / n);
        } finally {
            f.delete();
        }
    }

    static final class Artemis implements AutoCloseable {
        final SequentialFileFactory factory;
        final JournalImpl journal;
        final AtomicLong ids = new AtomicLong();

        Artemis(File dir, boolean aio, int timeoutNs) throws Exception {
            dir.mkdirs();
            factory = aio ? new AIOSequentialFileFactory(dir, BUFFER_SIZE, timeoutNs, 4096, false)
                    : new NIOSequentialFileFactory(dir, true, BUFFER_SIZE, timeoutNs, 1, false);
            journal = new JournalImpl(FILE_SIZE, 2, 10, 0, 0, factory, "activemq-data", "amq", aio ? 4096 : 1);
            factory.start();
            journal.start();
            journal.loadInternalOnly();
        }

        @Override
        public void close() throws Exception {
            journal.stop();
            factory.stop();
        }
    }

    static void rmrf(File f) {
        File[] k = f.listFiles();
        if (k != null)
            for (File c : k)
                rmrf(c);
        f.delete();
    }

    public static void main(String[] args) throws Exception {
        String socket = args[0], jname = args[1];
        File dir = new File(args[2]);
        String[] ws = args[3].split(","), ss = args[4].split(",");
        double seconds = Double.parseDouble(args[5]);
        int repeat = args.length > 6 ? Integer.parseInt(args[6]) : 1;
        int timeout = syncTimeoutNs(dir);
        boolean aioOk = AIOSequentialFileFactory.isSupported(dir);
        System.out.printf("durable appends from Java, %.1f s per cell, best of %d, Java %s; Artemis %s, buffer timeout %d us"
                + " (artemis create's rule on this disk)%s%n", seconds, repeat, System.getProperty("java.version"), "2.40.0",
                timeout / 1000,
                aioOk ? "" : "; ASYNCIO unsupported here: NIO only");
        System.out.println("| writers x record | ours (Java) | Artemis NIO | Artemis ASYNCIO | ours / best Artemis | C writer | Java / C |");
        System.out.println("|---|---|---|---|---|---|---|");
        int run = 0;
        try (HugePool pool = HugePool.connect(socket)) {
            for (String s : ss)
                for (String w : ws) {
                    int nw = Integer.parseInt(w), size = Integer.parseInt(s);
                    double ours = 0;
                    double[] art = new double[2];
                    // the methods take turns, `repeat` times; each keeps its best
                    for (int rep = 0; rep < repeat; rep++) {
                        List<JournalWriter> writers = new ArrayList<>();
                        ours = Math.max(ours, run(nw, size, seconds, i -> {
                            JournalWriter jw = pool.openJournalWriter(jname);
                            writers.add(jw);
                            return jw::appendAndWait;
                        }));
                        for (JournalWriter jw : writers)
                            jw.close();
                        for (int k = 0; k < (aioOk ? 2 : 1); k++) {
                            File d = new File(dir, "artemis-" + run++);
                            try (Artemis a = new Artemis(d, k == 1, timeout)) {
                                art[k] = Math.max(art[k], run(nw, size, seconds,
                                        i -> rec -> a.journal.appendAddRecord(a.ids.incrementAndGet(), (byte) 1, rec, true)));
                            } finally {
                                rmrf(d);
                            }
                        }
                    }
                    double best = Math.max(art[0], art[1]);
                    String c = System.getProperty("c." + nw + "." + size);
                    double cv = c != null ? Double.parseDouble(c) : 0;
                    System.out.printf("| %d x %d B | %,.0f | %,.0f | %s | **%.2fx** | %s | %s |%n", nw, size, ours, art[0],
                            aioOk ? String.format("%,.0f", art[1]) : "-", ours / best,
                            cv > 0 ? String.format("%,.0f", cv) : "-", cv > 0 ? String.format("%.2fx", ours / cv) : "-");
                }
        }
    }
}
