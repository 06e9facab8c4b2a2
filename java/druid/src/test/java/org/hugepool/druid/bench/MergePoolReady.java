/*
 * SPDX-License-Identifier: MIT
 *
 * MergePoolReady.java - the benchmark of bench/bench_druid.sh (make bench): how long a Druid
 * merge pool of N buffers of SIZE bytes takes to be ready, that is built and every 4 KiB of it
 * written once, the shape of Druid's DefaultBlockingPoolConstructorBenchmark (its PR 19025):
 *   serial    Druid 33's way: DefaultBlockingPool over OffheapBufferGenerator, one
 *             ByteBuffer.allocateDirect (which zeroes, so faults in) after another;
 *   parallel  PR 19025's way: the buffers made on a temporary ForkJoinPool of one thread per
 *             core, then the pool over them;
 *   hugepool  the extension's way: HugepoolBuffers leases them from hugepoold in one acquire and
 *             HugepoolDruidModule builds the pool over them (the code a service runs at start).
 * Each round builds the pool (what Druid's benchmark times: the constructor), then writes a long
 * per 4 KiB page of every buffer (a first pass over memory that is resident either way:
 * allocateDirect zeroed it, the daemon faulted it in), then frees it (the direct buffers'
 * cleaners, or the lease's release) before the next. It prints one line per round and mode,
 * "MODE ROUND BUILT_MS WRITTEN_MS" (the second counted from the same start), for the script to
 * set beside each other; nothing is asserted.
 *
 * Usage: MergePoolReady direct N SIZE ROUNDS          (serial and parallel, alternating)
 *        MergePoolReady hugepool SOCKET CLASS N SIZE ROUNDS
 */
package org.hugepool.druid.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.common.base.Supplier;
import com.google.common.collect.ImmutableMap;
import com.google.common.collect.ImmutableSet;
import org.apache.druid.collections.BlockingPool;
import org.apache.druid.collections.DefaultBlockingPool;
import org.apache.druid.collections.ReferenceCountingResourceHolder;
import org.apache.druid.discovery.NodeRole;
import org.apache.druid.jackson.DefaultObjectMapper;
import org.apache.druid.java.util.common.ByteBufferUtils;
import org.apache.druid.java.util.common.HumanReadableBytes;
import org.apache.druid.offheap.OffheapBufferGenerator;
import org.apache.druid.query.DruidProcessingBufferConfig;
import org.apache.druid.query.DruidProcessingConfig;
import org.hugepool.druid.HugepoolBuffers;
import org.hugepool.druid.HugepoolDruidConfig;
import org.hugepool.druid.HugepoolDruidModule;

import java.nio.ByteBuffer;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ForkJoinPool;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

public final class MergePoolReady
{
  private MergePoolReady()
  {
  }

  public static void main(String[] args) throws Exception
  {
    if (args[0].equals("direct")) {
      int n = Integer.parseInt(args[1]);
      int size = Integer.parseInt(args[2]);
      int rounds = Integer.parseInt(args[3]);
      for (int r = 0; r < rounds; r++) {
        report("serial", r, () -> new DefaultBlockingPool<>(new OffheapBufferGenerator("result merging", size), n), n, true);
        report("parallel", r, () -> parallel(n, size), n, true);
      }
    } else {
      String socket = args[1];
      String className = args[2];
      int n = Integer.parseInt(args[3]);
      int size = Integer.parseInt(args[4]);
      int rounds = Integer.parseInt(args[5]);
      ObjectMapper mapper = new DefaultObjectMapper();
      HugepoolDruidConfig config = mapper.convertValue(
          ImmutableMap.of("socket", socket, "mergeClass", className),
          HugepoolDruidConfig.class
      );
      // a broker's: no intermediate buffer made at start, so only the merge pool is leased
      DruidProcessingConfig processing = new DruidProcessingConfig(
          null, 1, n, null, null, new DruidProcessingBufferConfig(HumanReadableBytes.valueOf(size), null, null), null
      );
      for (int r = 0; r < rounds; r++) {
        HugepoolBuffers[] leased = new HugepoolBuffers[1];
        report("hugepool", r, () -> {
          leased[0] = new HugepoolBuffers(config, processing, ImmutableSet.of(NodeRole.BROKER));
          return new HugepoolDruidModule().getMergeBufferPool(leased[0], processing, ImmutableSet.of(NodeRole.BROKER));
        }, n, false);
        leased[0].stop();
      }
    }
  }

  /* PR 19025: the buffers made in parallel on a temporary ForkJoinPool, then the pool over them. */
  private static BlockingPool<ByteBuffer> parallel(int n, int size)
  {
    OffheapBufferGenerator generator = new OffheapBufferGenerator("result merging", size);
    ForkJoinPool fj = new ForkJoinPool(Runtime.getRuntime().availableProcessors());
    try {
      List<ByteBuffer> made = fj.submit(
          () -> IntStream.range(0, n).parallel().mapToObj(i -> generator.get()).collect(Collectors.toList())
      ).join();
      Iterator<ByteBuffer> it = made.iterator();
      Supplier<ByteBuffer> next = it::next;
      return new DefaultBlockingPool<>(next, n);
    }
    finally {
      fj.shutdown();
    }
  }

  /* One round: build, write a long per page of every buffer, print the time; free direct buffers. */
  private static void report(String mode, int round, java.util.function.Supplier<BlockingPool<ByteBuffer>> build, int n,
                             boolean free)
  {
    long t0 = System.nanoTime();
    BlockingPool<ByteBuffer> pool = build.get();
    long built = System.nanoTime() - t0;
    List<ReferenceCountingResourceHolder<ByteBuffer>> all = pool.takeBatch(n, 0);
    long k = 0;
    for (ReferenceCountingResourceHolder<ByteBuffer> h : all) {
      ByteBuffer b = h.get();
      // a value of each page's own: a host that merges pages written alike would otherwise
      // take them back from under the measurement (README, "Measured", the Java binding)
      for (int i = 0; i + 8 <= b.capacity(); i += 4096) {
        b.putLong(i, ++k);
      }
    }
    long written = System.nanoTime() - t0;
    System.out.printf("%s %d %.3f %.3f%n", mode, round, built / 1e6, written / 1e6);
    if (free) {
      for (ReferenceCountingResourceHolder<ByteBuffer> h : all) {
        ByteBufferUtils.free(h.get());
      }
    } else {
      all.forEach(ReferenceCountingResourceHolder::close);
    }
  }
}
