/*
 * SPDX-License-Identifier: MIT
 *
 * CompletionTest.java - how a HugepoolJournal calls its IOCompletions (hugepool-artemis(7),
 * "Completions"), alone against a real hugepoold. The broker's thread only queues a record; the
 * appender appends each group as one batch and runs the callbacks of a group while the next one
 * syncs, so these are what the broker relies on:
 *  - in order and only once durable: records appended with sync and callbacks, one by one and in
 *    bursts;
 *    each callback is the next in the order the records were appended, and when it runs the
 *    daemon reports the journal durable up to that record's LSN; a lone record with nothing
 *    after it completes too (its group is not held back for a next one);
 *  - a record its caller waits for, appended while the appender is idle, reaches the daemon from
 *    the broker's thread at once, with what was queued before it (a send's message, appended
 *    without a sync): the daemon makes them durable while the appender is held before it
 *    appends anything, and their callbacks still run on the appender, after that, in order;
 *  - so does a record its caller waits for appended while the appender waits for the sync of
 *    the group before (a send during a consumer's acknowledgement): the daemon makes it durable
 *    while the appender is held in its wait; and when the daemon dies during that wait (stopped
 *    with SIGSTOP before either record reached the disk, then killed), both records are appended
 *    again after the reconnect, each callback runs once, and each record is in the journal once;
 *  - a lone record held for a partner (SyncHold, forced here) is not in the daemon's hands while
 *    held; its partner ends the hold and both are made durable by one sync, their callbacks in
 *    order; with no partner it goes when its window ends; one held when the journal stops is
 *    appended by the stop and completes;
 *  - records appended without sync (a transaction's, a consumed message's delete) cost no sync of
 *    their own: the daemon holds them (its max_batch_delay is 10 s here, so one synced alone
 *    shows) and syncs them with the next record appended with a sync; their callbacks (Artemis
 *    passes a no-op one) run once they are in the daemon's hands, as JournalImpl's run once
 *    written, in order;
 *  - a failure reaches every pending callback: the daemon stops under a stream of appends and
 *    does not come back within the journal's reconnect time, and records are appended after
 *    that (whenever the stop lands, some callbacks are pending): every callback is called exactly
 *    once, those done() all before the first onError(), and every record acknowledged with
 *    done() is there when the journal loads again.
 */
package org.hugepool.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.activemq.artemis.core.journal.EncoderPersister;
import org.apache.activemq.artemis.core.journal.IOCompletion;
import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.apache.activemq.artemis.core.journal.impl.dataformat.ByteArrayEncoding;
import org.hugepool.Daemon;
import org.hugepool.HugePool;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class CompletionTest {
    private static final long RECLAIM_AT = 64 << 20; // no reclaim: the test's records take consecutive LSNs

    /* Records what it is told: the order of the calls, and of the errors. */
    private static final class Seen {
        final List<Integer> done = new ArrayList<>(), errors = new ArrayList<>(); // guarded by this
        final List<String> wrong = new ArrayList<>(); // guarded by this
        final CountDownLatch all;
        final AtomicInteger calls = new AtomicInteger();

        Seen(int n) {
            all = new CountDownLatch(n);
        }

        IOCompletion cb(int i) {
            return cb(i, () -> {
            });
        }

        IOCompletion cb(int i, Runnable onDone) {
            AtomicInteger once = new AtomicInteger();
            return new IOCompletion() {
                @Override
                public void storeLineUp() {
                }

                @Override
                public void done() {
                    synchronized (Seen.this) {
                        if (once.getAndIncrement() > 0)
                            wrong.add("callback " + i + " called again (done)");
                        if (!errors.isEmpty())
                            wrong.add("callback " + i + " done after an error");
                        done.add(i);
                    }
                    onDone.run();
                    calls.incrementAndGet();
                    all.countDown();
                }

                @Override
                public void onError(int code, String message) {
                    synchronized (Seen.this) {
                        if (once.getAndIncrement() > 0)
                            wrong.add("callback " + i + " called again (onError)");
                        errors.add(i);
                    }
                    calls.incrementAndGet();
                    all.countDown();
                }
            };
        }
    }

    @Test
    @Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD) // a callback never called
    void inOrderAndDurable() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "16M", 4)).start();
                HugePool status = HugePool.connect(d.socket.toString())) {
            HugepoolJournal j = Workload.hugepool(d.socket.toString(), "j", RECLAIM_AT);
            j.loadInternalOnly();
            long base = status.status().journal("j").nextLsn();
            int n = 400;
            Seen seen = new Seen(n);
            List<String> notDurable = new ArrayList<>();
            byte[] data = new byte[100];
            for (int i = 0; i < n; i++) {
                int k = i;
                long lsn = base + i;
                IOCompletion cb = seen.cb(i, () -> {
                    try {
                        // the daemon sets the rings' durable positions and its status's in one hold of the journal's lock
                        long durable = status.status().journal("j").durableLsn();
                        if (durable < lsn)
                            synchronized (notDurable) {
                                notDurable.add("record " + k + " (LSN " + lsn + ") done, durable only up to " + durable);
                            }
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                });
                add(j, i + 1, data, true, cb);
                if (i % 50 == 0) // a lone record, nothing after it: it completes
                    while (seen.calls.get() <= i)
                        Thread.sleep(1);
            }
            seen.all.await();
            j.stop();
            synchronized (seen) {
                assertEquals(List.of(), seen.wrong);
                assertEquals(List.of(), seen.errors);
                for (int i = 0; i < n; i++)
                    assertEquals(i, seen.done.get(i), "callbacks out of order");
            }
            assertEquals(List.of(), notDurable.subList(0, Math.min(10, notDurable.size())), "acknowledged before durable");
        }
    }

    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void anIdleAppendersWaitedRecordGoesStraightToTheDaemon() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "16M", 4)).start();
                HugePool status = HugePool.connect(d.socket.toString())) {
            HugepoolJournal j = idleJournal(d);
            byte[] data = new byte[100];
            // a lone record with a sync; then a send's two records, the message without a sync and
            // its reference with one, queued while the appender cannot take the first (the test
            // holds the journal's lock across both calls, as a broker thread's two calls usually
            // come before the appender's wake-up)
            for (int round = 0; round < 2; round++) {
                while (!j.appenderIdle()) // it completes what came before, then waits for work
                    Thread.sleep(1);
                // the appender, once woken, is held before it appends anything
                CountDownLatch release = new CountDownLatch(1), took = hold(r -> j.appenderTook = r, release);
                long lsn = status.status().journal("j").nextLsn() + round; // the last record's
                Seen seen = new Seen(round + 1);
                long id = 10 + round;
                j.lock.lock();
                try {
                    if (round == 1)
                        add(j, id, data, false, seen.cb(1));
                    add(j, id + 100, data, true, seen.cb(0));
                } finally {
                    j.lock.unlock();
                }
                assertTrue(took.await(20, TimeUnit.SECONDS), "the appender was not woken");
                // the broker's thread appended the records itself: the daemon makes them durable without the appender
                awaitDurable(status, lsn, "round " + round + ": the records waited for the appender to append them");
                assertEquals(0, seen.calls.get(), "a callback ran before the appender saw its record durable");
                release.countDown();
                seen.all.await();
                synchronized (seen) {
                    assertEquals(round == 0 ? List.of(0) : List.of(1, 0), seen.done);
                    assertEquals(List.of(), seen.wrong);
                }
            }
            j.stop();
        }
    }

    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aHeldRecordSharesItsPartnersSync() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "16M", 4)).start();
                HugePool status = HugePool.connect(d.socket.toString())) {
            HugepoolJournal j = idleJournal(d);
            byte[] data = new byte[100];
            // held far longer than the test takes: only its partner or the stop ends the hold
            j.hold.force(TimeUnit.SECONDS.toNanos(30));
            long syncs = status.status().journal("j").syncs(), first = status.status().journal("j").nextLsn();
            Seen seen = new Seen(2);
            add(j, 2, data, true, seen.cb(0));
            Thread.sleep(200); // alone, it would be durable by now
            assertTrue(status.status().journal("j").durableLsn() < first, "a held record went to the daemon alone");
            assertEquals(0, seen.calls.get());
            add(j, 3, data, true, seen.cb(1));
            assertTrue(seen.all.await(20, TimeUnit.SECONDS), "the partner did not end the hold");
            synchronized (seen) {
                assertEquals(List.of(0, 1), seen.done);
                assertEquals(List.of(), seen.wrong);
            }
            assertTrue(status.status().journal("j").durableLsn() >= first + 1);
            assertEquals(syncs + 1, status.status().journal("j").syncs(), "a held record and its partner took two syncs");
            // a lone record held when the journal stops: the stop appends it, its callback runs
            while (!j.appenderIdle())
                Thread.sleep(1);
            j.hold.force(TimeUnit.SECONDS.toNanos(30));
            Seen last = new Seen(1);
            add(j, 4, data, true, last.cb(0));
            j.stop();
            assertTrue(last.all.await(20, TimeUnit.SECONDS), "a record held at the stop never completed");
            assertEquals(List.of(0), last.done);
            HugepoolJournal again = Workload.hugepool(d.socket.toString(), "j", RECLAIM_AT);
            List<RecordInfo> records = new ArrayList<>();
            again.load(records, new ArrayList<PreparedTransactionInfo>(), null);
            again.stop();
            assertEquals(List.of(1L, 2L, 3L, 4L), records.stream().map(r -> r.id).toList());
        }
    }

    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aHeldRecordWithoutPartnerGoesAtTheWindowsEnd() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "16M", 4)).start();
                HugePool status = HugePool.connect(d.socket.toString())) {
            HugepoolJournal j = Workload.hugepool(d.socket.toString(), "j", RECLAIM_AT);
            j.loadInternalOnly();
            j.hold.force(TimeUnit.MILLISECONDS.toNanos(50));
            byte[] data = new byte[100];
            long first = status.status().journal("j").nextLsn();
            for (int i = 0; i < 3; i++) {
                while (!j.appenderIdle())
                    Thread.sleep(1);
                Seen seen = new Seen(1);
                add(j, i + 1, data, true, seen.cb(0));
                assertTrue(seen.all.await(20, TimeUnit.SECONDS), "a held record with no partner never completed");
                assertTrue(status.status().journal("j").durableLsn() >= first + i);
            }
            j.stop();
        }
    }

    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void unawaitedRecordsGoWithTheNextSync() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "16M", 4) + "max_batch_delay = 10s\n").start();
                HugePool status = HugePool.connect(d.socket.toString())) {
            HugepoolJournal j = Workload.hugepool(d.socket.toString(), "j", RECLAIM_AT);
            j.loadInternalOnly();
            byte[] data = new byte[100];
            long syncs = status.status().journal("j").syncs(), next = status.status().journal("j").nextLsn();
            Seen seen = new Seen(2);
            j.appendAddRecord(1, (byte) 1, data, false);
            j.appendUpdateRecord(1, (byte) 2, EncoderPersister.getInstance(), new ByteArrayEncoding(data), false, seen.cb(0));
            j.appendDeleteRecord(1, false, seen.cb(1));
            assertTrue(seen.all.await(5, TimeUnit.SECONDS), "callbacks of records appended without sync wait for a sync");
            Thread.sleep(300); // the appender has given them to the daemon, which holds them
            synchronized (seen) {
                assertEquals(List.of(0, 1), seen.done);
                assertEquals(List.of(), seen.wrong);
            }
            assertEquals(syncs, status.status().journal("j").syncs(), "records nobody waits for were synced alone");
            assertTrue(status.status().journal("j").durableLsn() < next, "records nobody waits for are durable already");
            j.appendAddRecord(2, (byte) 1, data, true); // returns once durable
            assertEquals(syncs + 1, status.status().journal("j").syncs(), "one sync for the held records and the last");
            assertTrue(status.status().journal("j").durableLsn() >= next + 3);
            j.stop();
        }
    }

    @Test
    @Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD) // a callback never called
    void failureReachesEveryPending() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "16M", 4)).start()) {
            HugepoolJournal j = new HugepoolJournal(d.socket.toString(), "j", RECLAIM_AT, Duration.ofMillis(300), null);
            j.start();
            j.loadInternalOnly();
            Seen seen = new Seen(0);
            byte[] data = new byte[100];
            Thread killer = new Thread(() -> {
                try {
                    while (seen.calls.get() < 200)
                        Thread.sleep(1);
                    d.stop();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            killer.start();
            // appends until 100 after the daemon's end, at most 1000 ahead of the callbacks
            int appended = 0;
            for (int after = 0; after < 100; appended++) {
                if (!killer.isAlive())
                    after++;
                while (appended - seen.calls.get() > 1000)
                    Thread.sleep(1);
                add(j, appended + 1, data, true, seen.cb(appended));
            }
            while (seen.calls.get() < appended)
                Thread.sleep(1);
            killer.join();
            j.stop();
            Set<Long> acked = new HashSet<>();
            synchronized (seen) {
                assertEquals(List.of(), seen.wrong);
                assertTrue(!seen.errors.isEmpty(), "the daemon stopped under load, yet no callback heard of it");
                assertTrue(seen.done.size() >= 200, "fewer than 200 records acknowledged before the stop");
                for (int i : seen.done)
                    acked.add((long) i + 1);
            }
            d.start();
            HugepoolJournal again = Workload.hugepool(d.socket.toString(), "j", RECLAIM_AT);
            List<RecordInfo> records = new ArrayList<>();
            again.load(records, new ArrayList<PreparedTransactionInfo>(), null);
            again.stop();
            Set<Long> loaded = new HashSet<>();
            for (RecordInfo r : records)
                loaded.add(r.id);
            acked.removeAll(loaded);
            assertEquals(0, acked.size(), "records acknowledged with done() but lost, ids " + acked.stream().sorted().limit(10).toList());
        }
    }

    /*
     * Hold the appender at a test hook (set: stores the hook) until release; returns the latch it
     * counts down when it gets there. The hook holds it once.
     */
    private static CountDownLatch hold(java.util.function.Consumer<Runnable> set, CountDownLatch release) {
        CountDownLatch at = new CountDownLatch(1);
        set.accept(() -> {
            set.accept(null);
            at.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        return at;
    }

    /* A journal's add of `data` as record `id` of user type 1. */
    private static void add(HugepoolJournal j, long id, byte[] data, boolean sync, IOCompletion cb) throws Exception {
        j.appendAddRecord(id, (byte) 1, EncoderPersister.getInstance(), new ByteArrayEncoding(data), sync, cb);
    }

    /* A journal "j" on d, loaded, one record made durable and its appender idle again. */
    private static HugepoolJournal idleJournal(Daemon d) throws Exception {
        HugepoolJournal j = Workload.hugepool(d.socket.toString(), "j", RECLAIM_AT);
        j.loadInternalOnly();
        j.appendAddRecord(1, (byte) 1, new byte[100], true);
        while (!j.appenderIdle())
            Thread.sleep(1);
        return j;
    }

    /* Wait, 20 s at most, until the daemon says the journal is durable up to lsn; fails with why. */
    private static void awaitDurable(HugePool status, long lsn, String why) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (status.status().journal("j").durableLsn() < lsn && System.nanoTime() < deadline)
            Thread.sleep(1);
        assertTrue(status.status().journal("j").durableLsn() >= lsn, why);
    }

    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aRecordWaitedForDuringASyncGoesStraightToTheDaemon() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "16M", 4)).start();
                HugePool status = HugePool.connect(d.socket.toString())) {
            HugepoolJournal j = idleJournal(d);
            byte[] data = new byte[100];
            CountDownLatch release = new CountDownLatch(1), in = hold(r -> j.appenderWaits = r, release);
            long first = status.status().journal("j").nextLsn();
            Seen seen = new Seen(2);
            add(j, 2, data, true, seen.cb(0));
            assertTrue(in.await(20, TimeUnit.SECONDS), "the appender did not wait for the record");
            // the appender waits for record 2's sync; a send comes now
            add(j, 3, data, true, seen.cb(1));
            awaitDurable(status, first + 1, "a record appended during the appender's wait waited for the appender to append it");
            assertEquals(0, seen.calls.get(), "a callback ran while the appender was held");
            release.countDown();
            seen.all.await();
            synchronized (seen) {
                assertEquals(List.of(0, 1), seen.done);
                assertEquals(List.of(), seen.wrong);
            }
            j.stop();
        }
    }

    @Test
    @Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aRecordAppendedDuringAWaitSurvivesTheDaemonsEnd() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("j", "16M", 4)).start()) {
            HugepoolJournal j = new HugepoolJournal(d.socket.toString(), "j", RECLAIM_AT, Duration.ofSeconds(60), null);
            j.start();
            j.loadInternalOnly();
            byte[] data = new byte[100];
            j.appendAddRecord(1, (byte) 1, data, true);
            CountDownLatch release = new CountDownLatch(1), in = hold(r -> j.appenderWaits = r, release);
            Seen seen = new Seen(2);
            d.signal("STOP"); // the records below reach its ring, never the disk
            add(j, 2, data, true, seen.cb(0));
            assertTrue(in.await(20, TimeUnit.SECONDS), "the appender did not wait for the record");
            // appended beside the wait: in flight, not durable, when the wait fails
            add(j, 3, data, true, seen.cb(1));
            d.signal("KILL");
            d.start();
            release.countDown();
            assertTrue(seen.all.await(60, TimeUnit.SECONDS), "a record appended during the wait was never made durable");
            synchronized (seen) {
                assertEquals(List.of(0, 1), seen.done);
                assertEquals(List.of(), seen.errors);
                assertEquals(List.of(), seen.wrong);
            }
            j.stop();
            HugepoolJournal again = Workload.hugepool(d.socket.toString(), "j", RECLAIM_AT);
            List<RecordInfo> records = new ArrayList<>();
            again.load(records, new ArrayList<PreparedTransactionInfo>(), null);
            again.stop();
            List<Long> ids = new ArrayList<>();
            for (RecordInfo r : records)
                ids.add(r.id);
            assertEquals(List.of(1L, 2L, 3L), ids, "each record once, in order");
        }
    }
}
