/*
 * SPDX-License-Identifier: MIT
 *
 * SegmentColumn.java - the Java binding on Java 22 and later: a leased buffer, whatever its size,
 * as one java.lang.foreign.MemorySegment (a column of longs here, as an engine's off-heap column
 * would be), and what a segment kept past its lease does: it throws, as a closed Arena's does.
 *
 * Run: java --enable-native-access=ALL-UNNAMED -cp hugepool.jar:. SegmentColumn [SOCKET [CLASS]]
 * It fills the class's first buffer with 0, 1, 2, ... as longs, sums them back, closes the lease
 * and touches the segment again, printing one line for each step.
 * tests: java/src/test/java/org/hugepool/ExampleTest.java builds and runs it on Java 22 and later.
 */

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;

import org.hugepool.HugePool;
import org.hugepool.Lease;

public final class SegmentColumn {
    public static void main(String[] args) throws Exception {
        String socket = args.length > 0 ? args[0] : null; // null: $HUGEPOOL_SOCKET or the default
        String cls = args.length > 1 ? args[1] : "processing";
        MemorySegment column;
        try (HugePool pool = HugePool.connect(socket); Lease lease = pool.acquire(cls, 1, Duration.ofSeconds(5))) {
            column = lease.segment(0, MemorySegment.class);
            long n = column.byteSize() / Long.BYTES;
            for (long i = 0; i < n; i++)
                column.setAtIndex(ValueLayout.JAVA_LONG, i, i);
            long sum = 0;
            for (long i = 0; i < n; i++)
                sum += column.getAtIndex(ValueLayout.JAVA_LONG, i);
            System.out.println(n + " longs, sum " + sum);
        }
        try {
            column.getAtIndex(ValueLayout.JAVA_LONG, 0);
            System.out.println("the segment outlived its lease");
        } catch (IllegalStateException e) {
            System.out.println("closed with the lease: " + e.getMessage());
        }
    }
}
