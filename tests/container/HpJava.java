/*
 * SPDX-License-Identifier: MIT
 *
 * HpJava.java - the Java client tests/container-test.sh runs in the container, as a member of
 * the socket's group, on the packaged jar (libhugepool-java) with the JNI library found where
 * libhugepool-jni put it (no property: java.library.path): leases COUNT buffers of CLASS, writes
 * and reads them, appends a record to JOURNAL and waits for it, replays it, and prints one line.
 * Usage: java -cp /usr/share/java/hugepool.jar:DIR HpJava CLASS COUNT JOURNAL
 */
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

import org.hugepool.HugePool;
import org.hugepool.JournalReader;
import org.hugepool.JournalRecord;
import org.hugepool.JournalWriter;
import org.hugepool.Lease;

public final class HpJava {
    private HpJava() {
    }

    public static void main(String[] args) throws Exception {
        int count = Integer.parseInt(args[1]);
        try (HugePool pool = HugePool.connect(); Lease lease = pool.acquire(args[0], count, Duration.ofSeconds(10))) {
            for (ByteBuffer b : lease.buffers()) {
                b.putLong(0, 0x5eed);
                b.putLong(b.capacity() - 8, 0x5eed);
                if (b.getLong(0) + b.getLong(b.capacity() - 8) != 2 * 0x5eed)
                    throw new AssertionError("a buffer does not hold what was written");
            }
            long lsn;
            byte[] rec = "from java".getBytes(StandardCharsets.US_ASCII);
            try (JournalWriter w = pool.openJournalWriter(args[2])) {
                lsn = w.appendAndWait(rec);
            }
            try (JournalReader r = pool.openJournalReader(args[2], lsn)) {
                JournalRecord got = r.next();
                if (got == null || got.lsn() != lsn || !new String(got.bytes(), StandardCharsets.US_ASCII).equals("from java"))
                    throw new AssertionError("the record did not come back");
            }
            System.out.println("java: " + lease.count() + " buffers of " + lease.bufferSize(0) + " bytes, record at LSN "
                    + lsn);
        }
    }
}
