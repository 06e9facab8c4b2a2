/*
 * SPDX-License-Identifier: MIT
 *
 * HugepoolDruidModule.java - the Druid extension druid-hugepool: registered through
 * META-INF/services/org.apache.druid.initialization.DruidModule, loaded by Druid from its
 * extension directory when "druid-hugepool" is in druid.extensions.loadList.
 *
 * How it takes over (docs/ARCHITECTURE.md, "Druid extension"): Druid builds a service's injector
 * as Modules.override(service modules).with(extension modules) (ExtensionInjectorBuilder), so the
 * two pools provided here, the @Global NonBlockingPool<ByteBuffer> of intermediate processing
 * buffers and the @Merging BlockingPool<ByteBuffer> of merge buffers, replace those of
 * DruidProcessingModule (historical, indexer) and BrokerProcessingModule (broker). They are
 * Druid's own pool classes, StupidPool and DefaultBlockingPool, built over the leased buffers of
 * HugepoolBuffers instead of OffheapBufferGenerator's allocateDirect, so taking, blocking,
 * timeouts and ResourceHolder.close() (which gives a buffer back to the pool, never to the daemon)
 * are Druid's. Leased buffers are not the JVM's direct memory, so the direct-memory check of
 * Druid's providers, which these replace, does not apply to them; when the buffers are not leased
 * (druid.hugepool.required=false) the providers call Druid's own, check included.
 *
 * @LoadScope keeps the module to the services that have processing pools: elsewhere (coordinator,
 * overlord, router, middle manager, peon) it is not loaded at all, so it leases nothing there.
 */
package org.hugepool.druid;

import com.google.common.base.Supplier;
import com.google.inject.Binder;
import com.google.inject.Provides;
import org.apache.druid.collections.BlockingPool;
import org.apache.druid.collections.DefaultBlockingPool;
import org.apache.druid.collections.NonBlockingPool;
import org.apache.druid.collections.StupidPool;
import org.apache.druid.discovery.NodeRole;
import org.apache.druid.guice.BrokerProcessingModule;
import org.apache.druid.guice.DruidProcessingModule;
import org.apache.druid.guice.JsonConfigProvider;
import org.apache.druid.guice.LazySingleton;
import org.apache.druid.guice.LifecycleModule;
import org.apache.druid.guice.annotations.Global;
import org.apache.druid.guice.annotations.LoadScope;
import org.apache.druid.guice.annotations.Merging;
import org.apache.druid.guice.annotations.Self;
import org.apache.druid.initialization.DruidModule;
import org.apache.druid.java.util.common.ISE;
import org.apache.druid.offheap.OffheapBufferGenerator;
import org.apache.druid.query.DruidProcessingConfig;

import java.nio.ByteBuffer;
import java.util.Iterator;
import java.util.List;
import java.util.Set;

/** The extension: Druid's processing and merge pools over buffers leased from hugepoold. */
@LoadScope(roles = {NodeRole.HISTORICAL_JSON_NAME, NodeRole.BROKER_JSON_NAME, NodeRole.INDEXER_JSON_NAME})
public class HugepoolDruidModule implements DruidModule
{
  /** The prefix of the extension's runtime properties. */
  public static final String PROPERTY_PREFIX = "druid.hugepool";

  @Override
  public void configure(Binder binder)
  {
    JsonConfigProvider.bind(binder, PROPERTY_PREFIX, HugepoolDruidConfig.class);
    // made when the lifecycle starts, not when a query first needs a buffer: a service that
    // cannot have its buffers fails its start
    LifecycleModule.register(binder, HugepoolBuffers.class);
  }

  /** Replaces DruidProcessingModule's and BrokerProcessingModule's intermediate pool. */
  @Provides
  @LazySingleton
  @Global
  public NonBlockingPool<ByteBuffer> getIntermediateResultsPool(
      HugepoolBuffers buffers,
      DruidProcessingConfig config,
      @Self Set<NodeRole> roles
  )
  {
    if (!buffers.isLeased()) {
      return roles.contains(NodeRole.BROKER)
             ? new BrokerProcessingModule().getIntermediateResultsPool(config)
             : DruidProcessingModule.createIntermediateResultsPool(config);
    }
    List<ByteBuffer> leased = buffers.processingBuffers();
    // a non-blocking pool never waits: past its leased buffers (more takers at once than it was
    // sized for) it makes one as Druid's does
    Supplier<ByteBuffer> more = new OffheapBufferGenerator("intermediate processing", buffers.bufferBytes());
    return new StupidPool<>(
        "intermediate processing pool",
        new LeasedSupplier(leased, more),
        leased.size(),
        config.poolCacheMaxCount()
    );
  }

  /** Replaces DruidProcessingModule's and BrokerProcessingModule's merge pool. */
  @Provides
  @LazySingleton
  @Merging
  public BlockingPool<ByteBuffer> getMergeBufferPool(
      HugepoolBuffers buffers,
      DruidProcessingConfig config,
      @Self Set<NodeRole> roles
  )
  {
    if (!buffers.isLeased()) {
      return roles.contains(NodeRole.BROKER)
             ? new BrokerProcessingModule().getMergeBufferPool(config)
             : DruidProcessingModule.createMergeBufferPool(config);
    }
    List<ByteBuffer> leased = buffers.mergeBuffers();
    return new DefaultBlockingPool<>(new LeasedSupplier(leased, null), leased.size());
  }

  /** Hands out the leased buffers once each, then `more`'s (null: none, an error). */
  private static final class LeasedSupplier implements Supplier<ByteBuffer>
  {
    private final Iterator<ByteBuffer> leased;
    private final Supplier<ByteBuffer> more;

    LeasedSupplier(List<ByteBuffer> leased, Supplier<ByteBuffer> more)
    {
      this.leased = leased.iterator();
      this.more = more;
    }

    @Override
    public synchronized ByteBuffer get()
    {
      if (leased.hasNext()) {
        return leased.next();
      }
      if (more == null) {
        throw new ISE("druid-hugepool: the merge pool asked for more buffers than it leased");
      }
      return more.get();
    }
  }
}
