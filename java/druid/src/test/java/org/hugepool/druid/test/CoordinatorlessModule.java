/*
 * SPDX-License-Identifier: MIT
 *
 * CoordinatorlessModule.java - lets tests/druid-tests.sh run a historical without a coordinator:
 * the historical serves the segments SegmentWriter put in its cache, and would otherwise ask the
 * coordinator for broadcast segments and lookups at start and retry until it answers. Loaded
 * from the test classes on the service's class path (Druid's searchCurrentClassloader), never
 * from the extension directory; it touches nothing of the buffers.
 */
package org.hugepool.druid.test;

import com.google.inject.Binder;
import com.google.inject.name.Names;
import org.apache.druid.initialization.DruidModule;
import org.apache.druid.server.coordination.BroadcastDatasourceLoadingSpec;
import org.apache.druid.server.lookup.cache.LookupLoadingSpec;
import org.apache.druid.server.metrics.DataSourceTaskIdHolder;

public class CoordinatorlessModule implements DruidModule
{
  @Override
  public void configure(Binder binder)
  {
    binder.bind(BroadcastDatasourceLoadingSpec.class)
          .annotatedWith(Names.named(DataSourceTaskIdHolder.BROADCAST_DATASOURCES_TO_LOAD_FOR_TASK))
          .toInstance(BroadcastDatasourceLoadingSpec.NONE);
    binder.bind(LookupLoadingSpec.class)
          .annotatedWith(Names.named(DataSourceTaskIdHolder.LOOKUPS_TO_LOAD_FOR_TASK))
          .toInstance(LookupLoadingSpec.NONE);
  }
}
