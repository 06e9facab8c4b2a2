/*
 * SPDX-License-Identifier: MIT
 *
 * ReclaimTest.java - a HugepoolJournal's reclaim, alone against a real hugepoold:
 *  - records that are never live (events, which a load does not give back) through twice the
 *    daemon journal's size, so that every reclaim finds nothing to carry forward and the daemon
 *    reuses the truncated segments: the journal loads afterwards, with what is live;
 *  - it copies in proportion to what is appended. A backlog of 4 MiB of records that stay live
 *    (a queue nobody consumes), then 32 MiB of records added and deleted (the traffic that goes
 *    through), all without waiting, into a daemon journal of 32 MiB that blocks when full (twice
 *    the reclaim point of 3 x 4 MiB, and two segments): the appends finish, so the journal stayed
 *    within the daemon's segments; the bytes carried forward are at most half of the bytes
 *    appended (RECLAIM_RATIO 3: a reclaim copies the live bytes, at most a third of those since
 *    the last cut, which are what was appended since and the last reclaim's copies); the backlog
 *    loads whole afterwards;
 *  - a transaction that deletes a record commits while a reclaim carries that record forward
 *    (after its copy, before the reclaim reaches the transaction's delete): the load has the
 *    record deleted, as the broker was told;
 *  - a backlog larger than the daemon journal carries (a producer twice as far ahead of its
 *    consumer as a third of the journal): the producer's adds wait, the journal never blocks full
 *    (when_full = block, where the reclaim's copies would have waited behind the adds that filled
 *    it, and every thread with them), the consumer's deletes go on and the producer with them;
 *    what was added and not deleted loads afterwards;
 *  - the least reclaim floor in a large daemon journal (a window limit below a 64th of it)
 *    reclaims at its floor, not at the 64th (where the broker waited for ever);
 *  - a daemon journal of two segments, which leaves nothing once two are kept spare, is refused
 *    at start, naming the rule.
 */
package org.hugepool.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.activemq.artemis.core.journal.EncoderPersister;
import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.apache.activemq.artemis.core.journal.impl.dataformat.ByteArrayEncoding;
import org.hugepool.Daemon;
import org.hugepool.HugePool;
import org.hugepool.Status;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class ReclaimTest {
    private static final long RECLAIM_AT = 1 << 20;
    private static final int RECORD = 1024;

    /* Load j: its committed records. */
    private static List<RecordInfo> load(Daemon d, String j) throws Exception {
        HugepoolJournal h = Workload.hugepool(d.socket.toString(), j, RECLAIM_AT);
        List<RecordInfo> records = new ArrayList<>();
        h.load(records, new ArrayList<PreparedTransactionInfo>(), null);
        h.stop();
        return records;
    }

    /* d's journal j, loaded (empty, or with what an earlier test left), as a broker's at start. */
    private static HugepoolJournal loaded(Daemon d) throws Exception {
        HugepoolJournal j = Workload.hugepool(d.socket.toString(), "j", RECLAIM_AT);
        j.loadInternalOnly();
        return j;
    }

    @Test
    @Timeout(value = 300, threadMode = Timeout.ThreadMode.SEPARATE_THREAD) // a hang: the journal full, its reclaim stuck
    void nothingLiveToCarry() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "2M", 4)).start()) {
            HugepoolJournal j = loaded(d);
            byte[] data = new byte[RECORD];
            long id = 1;
            for (; id <= (16 << 20) / RECORD; id++)
                j.appendAddEvent(id, (byte) 1, EncoderPersister.getInstance(), new ByteArrayEncoding(data), false, null);
            j.appendAddRecord(id, (byte) 1, data, true); // everything before it durable
            long reclaims = j.reclaims();
            j.stop();
            assertTrue(reclaims > 0, "the journal never reclaimed");

            List<RecordInfo> records = load(d, "j");
            assertEquals(1, records.size(), "records loaded after the reclaims");
            assertEquals(id, records.get(0).id);
        }
    }

    @Test
    @Timeout(value = 300, threadMode = Timeout.ThreadMode.SEPARATE_THREAD) // a hang: the journal full, its reclaim stuck
    void copiesInProportionToAppends() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "2M", 16)).start()) {
            HugepoolJournal j = loaded(d);
            byte[] data = new byte[RECORD];
            long appended = 0, id = 1;
            int backlog = (4 << 20) / RECORD;
            for (int i = 0; i < backlog; i++, id++) {
                j.appendAddRecord(id, (byte) 1, data, false);
                appended += Records.onDisk(Records.HEADER + RECORD);
            }
            for (int i = 0; i < (32 << 20) / RECORD; i++, id++) {
                j.appendAddRecord(id, (byte) 1, data, false);
                j.appendDeleteRecord(id, false);
                appended += Records.onDisk(Records.HEADER + RECORD) + Records.onDisk(Records.HEADER);
            }
            j.appendAddRecord(id, (byte) 1, data, true); // everything before it durable
            appended += Records.onDisk(Records.HEADER + RECORD);
            long reclaims = j.reclaims(), copied = j.copiedBytes();
            long cuts = reclaims * Records.onDisk(Records.HEADER);
            j.stop();

            assertTrue(reclaims > 0, "the journal never reclaimed");
            assertTrue(copied <= (appended + cuts) / (HugepoolJournal.RECLAIM_RATIO - 1), "carried " + copied
                    + " bytes forward in " + reclaims + " reclaims for " + appended + " bytes appended");

            assertEquals(backlog + 1, load(d, "j").size(), "records loaded after the reclaims");
        }
    }

    /*
     * The least reclaim floor (512 KiB) in a daemon journal of 3 x 64 MiB: its window limit, 1.5
     * floors, is below a 64th of the journal, the least an early reclaim gains. With that floor on
     * the reclaim point too (stop 64), the broker waited at 768 KiB for a reclaim due
     * only at 1 MiB, for ever.
     */
    @Test
    @Timeout(value = 300, threadMode = Timeout.ThreadMode.SEPARATE_THREAD) // a hang: waiting at the limit, no reclaim due
    void aSmallReclaimFloorInALargeJournalReclaims() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "64M", 3)).start()) {
            HugepoolJournal j = Workload.hugepool(d.socket.toString(), "j", HugepoolJournal.MIN_RECLAIM_AT);
            j.loadInternalOnly();
            byte[] data = new byte[RECORD];
            long id = 1;
            for (; id <= (4 << 20) / RECORD; id++) {
                j.appendAddRecord(id, (byte) 1, data, false);
                j.appendDeleteRecord(id, false);
            }
            j.appendAddRecord(id, (byte) 1, data, true); // everything before it durable
            long reclaims = j.reclaims();
            j.stop();
            assertTrue(reclaims > 0, "the journal never reclaimed");
            assertEquals(1, load(d, "j").size(), "records loaded after the reclaims");
        }
    }

    @Test
    @Timeout(value = 300, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void transactionsDeleteCommittedDuringItsReclaim() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "2M", 4)).start()) {
            HugepoolJournal j = loaded(d);
            byte[] data = new byte[RECORD];
            long x = 1, tx = 1_000_000;
            j.appendAddRecord(x, (byte) 1, data, false);
            j.appendDeleteRecordTransactional(tx, x);
            // the reclaim copies x's add first (the lowest LSN), then meets the transaction's delete
            AtomicReference<Throwable> commit = new AtomicReference<>();
            j.afterCopy = lsn -> {
                j.afterCopy = null;
                try {
                    j.appendCommitRecord(tx, false);
                } catch (Throwable e) {
                    commit.set(e);
                }
            };
            long id = x + 1;
            while (j.reclaims() == 0) {
                j.appendAddRecord(id, (byte) 1, data, false);
                j.appendDeleteRecord(id++, false);
                if (id % 64 == 0)
                    j.flush(); // lets the reclaimer run
            }
            j.appendAddRecord(id, (byte) 1, data, true); // everything before it durable
            j.stop();
            assertEquals(null, commit.get(), "the commit during the reclaim");
            assertTrue(j.afterCopy == null, "the reclaim copied nothing");

            List<RecordInfo> records = load(d, "j");
            assertEquals(1, records.size(), "records loaded: " + records);
            assertEquals(id, records.get(0).id, "the record left (" + x + " was deleted by transaction " + tx + ")");
        }
    }

    @Test
    @Timeout(value = 300, threadMode = Timeout.ThreadMode.SEPARATE_THREAD) // a hang: the journal full, its reclaim stuck
    void backlogPastWhatTheJournalCarriesWaitsForDeletes() throws Exception {
        // 4 segments of records (6 less two spare): a third of it is 2.7 MiB, the producer runs 6 MiB ahead
        try (Daemon d = new Daemon(Daemon.journal("j", "2M", 6)).start(); HugePool pool = HugePool.connect(d.socket.toString())) {
            HugepoolJournal j = loaded(d);
            byte[] data = new byte[RECORD];
            int n = (12 << 20) / RECORD, ahead = (6 << 20) / RECORD, kept = 100;
            AtomicLong added = new AtomicLong();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread producer = new Thread(() -> {
                try {
                    for (long id = 1; id <= n; id++) {
                        j.appendAddRecord(id, (byte) 1, data, false);
                        added.set(id);
                    }
                } catch (Throwable e) {
                    failed.set(e);
                }
            }, "producer");
            producer.start();
            while (j.backlogWaiters() == 0 && producer.isAlive())
                Thread.sleep(10);
            Status.Journal st = pool.status().journal("j");
            assertEquals(Status.Journal.OK, st.state(), "the daemon's journal while the producer waits: " + st);
            assertTrue(producer.isAlive() && added.get() < ahead, "the producer added " + added.get() + " records ahead"
                    + " of its consumer, " + (added.get() * RECORD >> 20) + " MiB, without waiting; " + failed.get());

            // the consumer: deletes in order, once the producer is `ahead` records ahead, waits, or is done;
            // never a record not yet added (a delete of nothing: the add after it would stay live), which
            // a waiting producer not yet back on a CPU after the last delete woke it would let it do
            // (whether the producer lives is read before what it added: one that ends between the
            // two has added its last, and a consumer still waiting for more then is a failure)
            for (long id = 1; id <= n - kept; id++) {
                for (;;) {
                    boolean alive = producer.isAlive();
                    long a = added.get();
                    if (a >= id && (a >= Math.min(id + ahead, n) || j.backlogWaiters() > 0))
                        break;
                    assertTrue(alive, "the producer stopped at " + a + ": " + failed.get());
                    LockSupport.parkNanos(100_000);
                }
                j.appendDeleteRecord(id, false);
            }
            producer.join();
            assertEquals(null, failed.get(), "the producer");
            j.appendAddRecord(n + 1, (byte) 1, data, true); // everything before it durable
            long reclaims = j.reclaims();
            j.stop();
            assertTrue(reclaims > 0, "the journal never reclaimed");

            List<RecordInfo> records = load(d, "j");
            assertEquals(kept + 1, records.size(), "records loaded");
            for (int i = 0; i <= kept; i++)
                assertEquals(n - kept + 1 + i, records.get(i).id, "record " + i + " loaded");
        }
    }

    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void twoSegmentsAreRefused() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "2M", 2)).start()) {
            HugepoolJournal j = new HugepoolJournal(d.socket.toString(), "j", RECLAIM_AT, Duration.ofSeconds(30), null);
            IllegalStateException e = assertThrows(IllegalStateException.class, j::start); // before any record is read
            j.stop();
            assertTrue(e.getMessage().contains("has 2 segments") && e.getMessage().contains("at least 3"), e.getMessage());
        }
    }
}
