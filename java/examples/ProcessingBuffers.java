/*
 * SPDX-License-Identifier: MIT
 *
 * ProcessingBuffers.java - a Druid-shaped example of the Java binding: the blocking pool of
 * processing buffers a query engine's workers take a buffer from for each task and give back
 * after it, with its buffers leased from hugepoold in one call at start instead of made one by
 * one with ByteBuffer.allocateDirect and touched page by page (the loop Apache Druid's PR 19025
 * parallelised: DruidProcessingModule's DefaultBlockingPool over an OffheapBufferGenerator).
 * hugepoold faulted them in at boot; here they are ready in milliseconds, warm across restarts.
 *
 * Run: java -cp hugepool.jar:. ProcessingBuffers [SOCKET [CLASS [BUFFERS [TASKS]]]]
 * It starts as many workers as there are buffers plus two, so some wait for a buffer, runs
 * TASKS tasks (each fills its buffer and sums it), and prints one line with what it did.
 * tests: java/src/test/java/org/hugepool/ExampleTest.java builds and runs it.
 */

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.ArrayList;
import java.util.List;

import org.hugepool.HugePool;
import org.hugepool.HugepoolException;
import org.hugepool.Lease;

public final class ProcessingBuffers implements AutoCloseable {
    private final HugePool pool;
    private final Lease lease;
    private final BlockingQueue<ByteBuffer> free;

    /** A buffer taken from the pool; close it to give it back. */
    public final class Holder implements AutoCloseable {
        private final ByteBuffer buffer;

        Holder(ByteBuffer buffer) {
            this.buffer = buffer;
        }

        public ByteBuffer get() {
            return buffer;
        }

        @Override
        public void close() {
            buffer.clear();
            free.add(buffer);
        }
    }

    /** Lease `count` buffers of `className` at once: all or none, within `timeout`. */
    public ProcessingBuffers(String socket, String className, int count, Duration timeout) throws HugepoolException {
        pool = HugePool.connect(socket);
        try {
            lease = pool.acquire(className, count, timeout);
        } catch (HugepoolException e) {
            pool.close();
            throw e;
        }
        free = new ArrayBlockingQueue<>(count, true);
        free.addAll(lease.buffers());
    }

    /** Take a buffer, waiting at most `timeout` for a worker to give one back. */
    public Holder take(Duration timeout) throws InterruptedException, TimeoutException {
        ByteBuffer b = free.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
        if (b == null)
            throw new TimeoutException("no processing buffer free within " + timeout);
        return new Holder(b);
    }

    public int capacity() {
        return lease.count();
    }

    /** Give the buffers back to hugepoold (a worker's buffer kept past this reads zeroes). */
    @Override
    public void close() throws HugepoolException {
        pool.close();
    }

    public static void main(String[] args) throws Exception {
        String socket = args.length > 0 ? args[0] : null;
        String className = args.length > 1 ? args[1] : "processing";
        int buffers = args.length > 2 ? Integer.parseInt(args[2]) : 4;
        int tasks = args.length > 3 ? Integer.parseInt(args[3]) : 64;
        long t0 = System.nanoTime();
        try (ProcessingBuffers pb = new ProcessingBuffers(socket, className, buffers, Duration.ofSeconds(10))) {
            long ready = System.nanoTime() - t0;
            AtomicLong checksum = new AtomicLong();
            ExecutorService workers = Executors.newFixedThreadPool(buffers + 2);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < tasks; t++) {
                final long task = t;
                done.add(workers.submit(() -> {
                    try (Holder h = pb.take(Duration.ofSeconds(30))) {
                        ByteBuffer b = h.get();
                        long sum = 0;
                        for (int i = 0; i + 8 <= b.capacity(); i += 4096) {
                            b.putLong(i, task + i);
                            sum += b.getLong(i);
                        }
                        checksum.addAndGet(sum);
                    }
                    return null;
                }));
            }
            for (Future<?> f : done)
                f.get();
            workers.shutdown();
            System.out.printf("ProcessingBuffers: %d buffers of %d bytes ready in %.1f ms, %d tasks, checksum %d%n",
                    pb.capacity(), pb.lease.bufferSize(0), ready / 1e6, tasks, checksum.get());
        }
    }
}
