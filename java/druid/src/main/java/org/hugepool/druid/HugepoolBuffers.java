/*
 * SPDX-License-Identifier: MIT
 *
 * HugepoolBuffers.java - the service's processing and merge buffers as two hugepool leases, taken
 * once when the service starts and given back when it stops (or by the daemon, when the JVM dies
 * even by SIGKILL: the lease ends with the connection). HugepoolDruidModule registers it with
 * Druid's lifecycle as eager, so it is made at start and any failure is a failure of the start;
 * the module's pool providers take their buffers from it.
 *
 * How many and how large is Druid's own arithmetic (DruidProcessingConfig): the intermediate pool
 * pre-creates numThreads buffers on a historical or indexer, poolCacheInitialCount on a broker;
 * the merge pool holds numMergeBuffers; every buffer is intermediateComputeSizeBytes(), which is
 * druid.processing.buffer.sizeBytes when set. Each class must have exactly that size, checked
 * against the daemon's status before anything is leased, so every misconfiguration fails the start
 * with a message that names the property to change. When required is false any failure instead
 * leaves `leased` false, says so once in the log, and the module gives Druid's own pools.
 *
 * The stale-buffer rule (docs/ARCHITECTURE.md, "Druid extension"): stop() ends the leases while
 * Druid's pools still hold ByteBuffers over them; the binding replaces the memory under each by
 * private zero pages before the daemon takes the buffer back, so a buffer touched after the stop
 * reads zeroes and never reaches the buffer's next holder.
 */
package org.hugepool.druid;

import com.google.inject.Inject;
import org.apache.druid.discovery.NodeRole;
import org.apache.druid.guice.ManageLifecycle;
import org.apache.druid.guice.annotations.Self;
import org.apache.druid.java.util.common.ISE;
import org.apache.druid.java.util.common.StringUtils;
import org.apache.druid.java.util.common.lifecycle.LifecycleStop;
import org.apache.druid.java.util.common.logger.Logger;
import org.apache.druid.query.DruidProcessingConfig;
import org.hugepool.HugePool;
import org.hugepool.HugepoolException;
import org.hugepool.HugepoolTimeoutException;
import org.hugepool.Lease;
import org.hugepool.LimitExceededException;
import org.hugepool.NoDaemonException;
import org.hugepool.Status;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/** The service's processing and merge buffers, leased from hugepoold at start. */
@ManageLifecycle
public class HugepoolBuffers
{
  private static final Logger log = new Logger(HugepoolBuffers.class);

  private final HugepoolDruidConfig config;
  private final int bufferBytes;
  private final int processingCount;
  private final int mergeCount;
  private final List<ByteBuffer> processing;
  private final List<ByteBuffer> merge;
  private final boolean leased;
  private HugePool pool; // null when not leased, and after stop()

  /** A reason the buffers cannot be had, in words for the operator. */
  private static final class Unavailable extends Exception
  {
    private static final long serialVersionUID = 1L;

    Unavailable(String message, Throwable cause)
    {
      super(message, cause);
    }
  }

  @Inject
  public HugepoolBuffers(HugepoolDruidConfig config, DruidProcessingConfig processingConfig, @Self Set<NodeRole> roles)
  {
    this.config = config;
    this.bufferBytes = processingConfig.intermediateComputeSizeBytes();
    // as DruidProcessingModule and BrokerProcessingModule size their intermediate pools
    this.processingCount = roles.contains(NodeRole.BROKER)
                           ? processingConfig.getNumInitalBuffersForIntermediatePool()
                           : processingConfig.getNumThreads();
    this.mergeCount = processingConfig.getNumMergeBuffers();
    List<ByteBuffer> p = Collections.emptyList();
    List<ByteBuffer> m = Collections.emptyList();
    boolean ok = false;
    long t0 = System.nanoTime();
    try {
      Status status = connect();
      checkClasses(status);
      p = lease(config.getProcessingClass(), processingCount);
      m = lease(config.getMergeClass(), mergeCount);
      ok = true;
      log.info(
          "druid-hugepool: %d processing buffers of class[%s] and %d merge buffers of class[%s], [%,d] bytes each, "
          + "leased from hugepoold at [%s] in %.1f ms (%s)",
          processingCount,
          config.getProcessingClass(),
          mergeCount,
          config.getMergeClass(),
          bufferBytes,
          socketName(),
          (System.nanoTime() - t0) / 1e6,
          pages(status)
      );
    }
    catch (Unavailable e) {
      closeQuietly();
      // a processing lease taken before the merge lease failed is released: keep no view of it
      p = Collections.emptyList();
      m = Collections.emptyList();
      if (config.isRequired()) {
        throw new ISE(e, "%s; the service does not start (druid.hugepool.required=true)", e.getMessage());
      }
      log.warn(
          "%s; druid.hugepool.required=false, so Druid allocates its own processing and merge buffers",
          e.getMessage()
      );
    }
    this.processing = p;
    this.merge = m;
    this.leased = ok;
  }

  /* A connection and the daemon's status, or why not. */
  private Status connect() throws Unavailable
  {
    try {
      pool = HugePool.connect(config.getSocket());
      return pool.status();
    }
    catch (HugepoolException | UnsatisfiedLinkError e) {
      throw unavailable(e);
    }
  }

  /* The classes exist, have Druid's buffer size and enough buffers, before anything is leased. */
  private void checkClasses(Status status) throws Unavailable
  {
    String pc = config.getProcessingClass();
    String mc = config.getMergeClass();
    if (pc.equals(mc)) {
      checkClass(status, pc, "druid.hugepool.processingClass and druid.hugepool.mergeClass", processingCount + mergeCount,
                 StringUtils.format("%d processing + %d merge buffers", processingCount, mergeCount));
    } else {
      if (processingCount > 0) {
        checkClass(status, pc, "druid.hugepool.processingClass", processingCount,
                   processingCount + " processing buffers (druid.processing.numThreads)");
      }
      if (mergeCount > 0) {
        checkClass(status, mc, "druid.hugepool.mergeClass", mergeCount,
                   mergeCount + " merge buffers (druid.processing.numMergeBuffers)");
      }
    }
  }

  private void checkClass(Status status, String name, String property, int needed, String what) throws Unavailable
  {
    Status.BufferClass c = status.bufferClass(name);
    if (c == null || c.retired()) {
      throw new Unavailable(StringUtils.format(
          "druid-hugepool: hugepoold at [%s] has no buffer class [%s] (%s); its classes: %s. "
          + "Add a [class %s] of size = %,d (druid.processing.buffer.sizeBytes) and count = %d to hugepoold.conf, "
          + "or name one of those",
          socketName(), name, property, describe(status), name, bufferBytes, needed), null);
    }
    if (c.size() != bufferBytes) {
      throw new Unavailable(StringUtils.format(
          "druid-hugepool: buffer class [%s] (%s) has buffers of [%,d] bytes, but druid.processing.buffer.sizeBytes "
          + "is [%,d]: set druid.processing.buffer.sizeBytes=%d, or give the class size = %d",
          name, property, c.size(), bufferBytes, c.size(), bufferBytes), null);
    }
    if (c.total() < needed) {
      throw new Unavailable(StringUtils.format(
          "druid-hugepool: buffer class [%s] (%s) has %d buffers, but the service needs %d: %s. "
          + "Raise the class's count in hugepoold.conf, or lower Druid's",
          name, property, c.total(), needed, what), null);
    }
  }

  private List<ByteBuffer> lease(String className, int count) throws Unavailable
  {
    if (count == 0) {
      return Collections.emptyList();
    }
    Duration timeout = Duration.ofMillis(config.getAcquireTimeout().toStandardDuration().getMillis());
    try {
      Lease lease = pool.acquire(className, count, timeout);
      List<ByteBuffer> l = new ArrayList<>(count);
      for (ByteBuffer b : lease.buffers()) {
        // the byte order ByteBuffer.allocateDirect gives, which Druid's own buffers have
        l.add(b.order(ByteOrder.BIG_ENDIAN));
      }
      return Collections.unmodifiableList(l);
    }
    catch (HugepoolTimeoutException e) {
      throw new Unavailable(StringUtils.format(
          "druid-hugepool: %d buffers of class [%s] were not free within druid.hugepool.acquireTimeout[%s]: "
          + "other processes hold them (hugepoolctl leases): %s",
          count, className, config.getAcquireTimeout(), e.getMessage()), e);
    }
    catch (LimitExceededException e) {
      throw new Unavailable(StringUtils.format(
          "druid-hugepool: hugepoold refused %d buffers of class [%s], [%,d] bytes, to this user: %s "
          + "(a limit of hugepoold.conf, max_bytes_per_uid most often)",
          count, className, (long) count * bufferBytes, e.getMessage()), e);
    }
    catch (HugepoolException e) {
      throw unavailable(e);
    }
  }

  /* HugePool.connect and status: the daemon or its library cannot be reached. */
  private Unavailable unavailable(Throwable e)
  {
    if (e instanceof NoDaemonException) {
      return new Unavailable(StringUtils.format(
          "druid-hugepool: no hugepoold listens at [%s] (druid.hugepool.socket): %s",
          socketName(), e.getMessage()), e);
    }
    return new Unavailable("druid-hugepool: " + e.getMessage(), e);
  }

  private static String pages(Status status)
  {
    if (status.hugetlb()) {
      return StringUtils.format("hugetlb pages of [%,d] bytes", status.pageSize());
    }
    String why = status.fallbackReason();
    return "regular pages" + (why == null || why.isEmpty() ? "" : ": " + why);
  }

  private static String describe(Status status)
  {
    if (status.classes().isEmpty()) {
      return "none";
    }
    return status.classes().stream()
                 .map(c -> StringUtils.format("%s (%d x [%,d] bytes)", c.name(), c.total(), c.size()))
                 .collect(Collectors.joining(", "));
  }

  private String socketName()
  {
    String s = config.getSocket();
    if (s != null) {
      return s;
    }
    String env = System.getenv("HUGEPOOL_SOCKET");
    return env != null && !env.isEmpty() ? env : HugePool.DEFAULT_SOCKET;
  }

  private void closeQuietly()
  {
    if (pool == null) {
      return;
    }
    try {
      pool.close();
    }
    catch (HugepoolException e) {
      log.warn("druid-hugepool: closing the connection to hugepoold: %s", e.getMessage());
    }
    pool = null;
  }

  /** @return true: the buffers below are leased; false: Druid allocates its own */
  public boolean isLeased()
  {
    return leased;
  }

  /** @return the intermediate processing buffers, big-endian as allocateDirect's */
  public List<ByteBuffer> processingBuffers()
  {
    return processing;
  }

  /** @return the merge buffers, big-endian as allocateDirect's */
  public List<ByteBuffer> mergeBuffers()
  {
    return merge;
  }

  /** @return how many bytes each buffer has: druid.processing.buffer.sizeBytes */
  public int bufferBytes()
  {
    return bufferBytes;
  }

  /** Give the buffers back to hugepoold; a buffer Druid touches after this reads zeroes. */
  @LifecycleStop
  public void stop()
  {
    if (pool != null) {
      closeQuietly();
      log.info("druid-hugepool: gave %d buffers back to hugepoold", processingCount + mergeCount);
    }
  }
}
