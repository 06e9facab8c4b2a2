/*
 * SPDX-License-Identifier: MIT
 *
 * SegmentWriter.java - writes the Druid segments tests/druid-tests.sh queries, straight into a
 * historical's segment cache as if the historical had loaded them from deep storage: each
 * segment's files in the cache location's storage directory, and its descriptor in info_dir, which
 * the historical reads at start (SegmentLocalCacheManager.getCachedSegments) and serves without a
 * coordinator. Druid's own writer (IncrementalIndex, IndexMergerV9) makes them.
 *
 * The data: datasource "hp", SEGMENTS segments of ROWS rows, one day each; row r of segment s
 * has key "k" + (s * ROWS / 2 + r) (consecutive segments share half their keys, so the merge
 * combines rows from two segments) and value r % 1000. A groupBy on key has then about
 * SEGMENTS * ROWS / 2 groups: far more than a small merge buffer holds, so it spills.
 *
 * Usage: java -cp DRUID_CLASSPATH:TEST_CLASSES org.hugepool.druid.test.SegmentWriter CACHE_DIR SEGMENTS ROWS
 */
package org.hugepool.druid.test;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.common.collect.ImmutableList;
import com.google.common.collect.ImmutableMap;
import org.apache.druid.data.input.MapBasedInputRow;
import org.apache.druid.data.input.impl.DimensionsSpec;
import org.apache.druid.data.input.impl.StringDimensionSchema;
import org.apache.druid.jackson.DefaultObjectMapper;
import org.apache.druid.java.util.common.DateTimes;
import org.apache.druid.java.util.common.Intervals;
import org.apache.druid.java.util.common.granularity.Granularities;
import org.apache.druid.query.aggregation.CountAggregatorFactory;
import org.apache.druid.query.aggregation.LongSumAggregatorFactory;
import org.apache.druid.segment.IndexIO;
import org.apache.druid.segment.IndexMergerV9;
import org.apache.druid.segment.IndexSpec;
import org.apache.druid.segment.column.ColumnConfig;
import org.apache.druid.segment.incremental.IncrementalIndex;
import org.apache.druid.segment.incremental.IncrementalIndexSchema;
import org.apache.druid.segment.incremental.OnheapIncrementalIndex;
import org.apache.druid.segment.loading.DataSegmentPusher;
import org.apache.druid.segment.writeout.OffHeapMemorySegmentWriteOutMediumFactory;
import org.apache.druid.timeline.DataSegment;
import org.apache.druid.timeline.partition.NumberedShardSpec;
import org.joda.time.DateTime;
import org.joda.time.Interval;

import java.io.File;
import java.nio.file.Files;
import java.util.Map;

public final class SegmentWriter
{
  private SegmentWriter()
  {
  }

  public static void main(String[] args) throws Exception
  {
    File cache = new File(args[0]);
    int segments = Integer.parseInt(args[1]);
    int rows = Integer.parseInt(args[2]);
    ObjectMapper mapper = new DefaultObjectMapper();
    IndexMergerV9 merger = new IndexMergerV9(
        mapper,
        new IndexIO(mapper, ColumnConfig.DEFAULT),
        OffHeapMemorySegmentWriteOutMediumFactory.instance(),
        true
    );
    File infoDir = new File(cache, "info_dir");
    Files.createDirectories(infoDir.toPath());
    DateTime day0 = DateTimes.of("2026-01-01");
    for (int s = 0; s < segments; s++) {
      Interval day = new Interval(day0.plusDays(s), day0.plusDays(s + 1));
      IncrementalIndex index = new OnheapIncrementalIndex.Builder()
          .setIndexSchema(
              new IncrementalIndexSchema.Builder()
                  .withMinTimestamp(day.getStartMillis())
                  .withQueryGranularity(Granularities.NONE)
                  .withDimensionsSpec(new DimensionsSpec(ImmutableList.of(new StringDimensionSchema("key"))))
                  .withMetrics(new CountAggregatorFactory("count"), new LongSumAggregatorFactory("value", "value"))
                  .withRollup(false)
                  .build()
          )
          .setMaxRowCount(rows + 1)
          .build();
      for (int r = 0; r < rows; r++) {
        long t = day.getStartMillis() + r;
        Map<String, Object> event = ImmutableMap.of("key", "k" + (s * rows / 2 + r), "value", (long) (r % 1000));
        index.add(new MapBasedInputRow(t, ImmutableList.of("key"), event));
      }
      DataSegment segment = DataSegment.builder()
          .dataSource("hp")
          .interval(day)
          .version("2026-01-01T00:00:00.000Z")
          .shardSpec(new NumberedShardSpec(0, 1))
          .dimensions(ImmutableList.of("key"))
          .metrics(ImmutableList.of("count", "value"))
          .binaryVersion(9)
          .loadSpec(ImmutableMap.of("type", "local", "path", "/nonexistent/index.zip"))
          .size(0)
          .build();
      File dir = new File(cache, DataSegmentPusher.getDefaultStorageDir(segment, false));
      merger.persist(index, day, dir, IndexSpec.DEFAULT, null);
      index.close();
      mapper.writeValue(new File(infoDir, segment.getId().toString()), segment);
    }
    System.out.println("SegmentWriter: " + segments + " segments of " + rows + " rows in " + cache);
  }
}
