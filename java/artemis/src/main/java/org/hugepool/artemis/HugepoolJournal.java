/*
 * SPDX-License-Identifier: MIT
 *
 * HugepoolJournal.java - ActiveMQ Artemis's Journal over one hugepoold journal (hugepool-artemis(7),
 * docs/ARCHITECTURE.md "Artemis on hugepool"). Each operation is one record (Records); the daemon's
 * group commit makes them durable; load is JournalImpl's load (Replay); space is reclaimed by
 * carrying live records forward and truncating the prefix (reclaim).
 *
 * Threads. A broker thread encodes its record and, under `lock`, checks it against the Live model
 * (JournalImpl's rules: an update of an id not live is not written...), gives it its LSN (we are
 * the journal's one writer, so our records take consecutive LSNs: `nextLsn`) and queues it (or,
 * when the caller waits for a sync and the appender is idle or waiting for a sync, appends the
 * queue to the ring itself: appendNow; alone with an idle appender, such a record may first
 * wait up to half a sync for a partner to share it: SyncHold). One appender thread owns the
 * JournalWriter otherwise:
 * it takes everything queued, appends it to the ring as one batch without waiting, completes
 * the callbacks of the group before (durable by then) in the order of the records, and then
 * waits once for the last record when anyone needs durability (an IOCompletion, a caller
 * blocked on sync). While it waits, the next group gathers in the queue, or reaches the daemon
 * during the sync through appendNow: one wait per group, never one per record. One
 * reclaimer thread, woken when the journal's bytes from the cut on (`windowBytes`) pass
 * RECLAIM_RATIO times the bytes of the records still needed (`live.bytes`), and `reclaimAt` at
 * least, cuts everything queued so far: reads it back, queues copies of what is still live
 * (checked again under the lock, so a record deleted meanwhile is not brought back), then a CUT
 * record, and truncates below the cut once both are durable. A reclaim copies at most a third of
 * the bytes since the last cut, and those are what was appended since plus the last reclaim's
 * copies: so everything a journal ever copies is at most half of what was appended to it, in a
 * daemon journal sized for the reclaim point (hugepool-artemis(7)). In a smaller one the window
 * stays where a reclaim's copies fit, reclaims come earlier and copy more, and a new record waits
 * while the live bytes are a third of the journal (Capacity's arithmetic, awaitRoom's wait).
 *
 * The daemon going away (a restart, warm or not) closes the writer: the appender connects again
 * within `reconnect`, reads what became durable after the last LSN it knew, checks it is its own
 * records byte for byte, appends the rest again, and goes on; no acknowledged record is lost and
 * none is written twice. Any other failure (the journal failed read-only, records of another
 * writer) fails every waiting callback and calls the broker's IOCriticalErrorListener, which stops
 * the broker, with the cause in the message.
 */
package org.hugepool.artemis;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQBuffers;
import org.apache.activemq.artemis.api.core.ActiveMQExceptionType;
import org.apache.activemq.artemis.api.core.ActiveMQShutdownException;
import org.apache.activemq.artemis.core.io.DummyCallback;
import org.apache.activemq.artemis.core.io.IOCriticalErrorListener;
import org.apache.activemq.artemis.core.io.SequentialFileFactory;
import org.apache.activemq.artemis.core.journal.EncoderPersister;
import org.apache.activemq.artemis.core.journal.EncodingSupport;
import org.apache.activemq.artemis.core.journal.IOCompletion;
import org.apache.activemq.artemis.core.journal.Journal;
import org.apache.activemq.artemis.core.journal.JournalLoadInformation;
import org.apache.activemq.artemis.core.journal.JournalUpdateCallback;
import org.apache.activemq.artemis.core.journal.LoaderCallback;
import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.apache.activemq.artemis.core.journal.TransactionFailureCallback;
import org.apache.activemq.artemis.core.journal.impl.JournalFile;
import org.apache.activemq.artemis.core.journal.impl.SimpleWaitIOCallback;
import org.apache.activemq.artemis.core.journal.impl.dataformat.ByteArrayEncoding;
import org.apache.activemq.artemis.core.persistence.Persister;
import org.apache.activemq.artemis.utils.collections.SparseArrayLinkedList;
import org.hugepool.DaemonGoneException;
import org.hugepool.HugePool;
import org.hugepool.HugepoolException;
import org.hugepool.JournalReader;
import org.hugepool.JournalRecord;
import org.hugepool.JournalWriter;
import org.hugepool.NoDaemonException;
import org.hugepool.Status;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An Artemis {@link Journal} whose records are kept by hugepoold, in the journal {@code name} of its
 * configuration. Made and wired by {@link HugepoolJournals}; usable alone, as JournalImpl is:
 * {@code start()}, one of the {@code load} calls, appends, {@code stop()}.
 *
 * <p>A hugepool journal serves one Artemis journal: this class is its only writer. Replication,
 * backup synchronisation and the journal's files do not apply: those calls throw
 * {@link UnsupportedOperationException} saying so.
 */
public final class HugepoolJournal implements Journal {
    private static final Logger log = LoggerFactory.getLogger(HugepoolJournal.class);

    /**
     * The largest record: half the daemon's default ring (1 MiB), less the headers. Artemis stores a
     * larger message as a large message, in a file of its own.
     */
    public static final int MAX_RECORD = (512 << 10) - 1024;
    /*
     * A reclaim runs once the bytes from the cut on are this many times the live bytes: it then
     * copies at most 1 / (RATIO - 1) of what was appended since the last one. 3 is Artemis's own
     * measure (JournalImpl compacts files less than 30% live): half of what is appended copied
     * at most, a journal of three times the live bytes and the reclaim-at floor.
     */
    static final int RECLAIM_RATIO = 3;
    /* the smallest reclaim-at: below it an empty journal would reclaim every few records */
    static final long MIN_RECLAIM_AT = 512 << 10;
    /* Status.Journal.state() of a journal that a write or sync error made read-only */
    private static final int STATE_FAILED = 2;
    /*
     * The most bytes the appender gives the daemon in one batch, a record larger than it alone:
     * a quarter of the daemon's default ring, so that a batch fits its ring (half of it at most)
     * and its default max_batch_bytes (1 MiB) with the headers of BATCH_MAX records.
     */
    private static final long BATCH_BYTES = 256 << 10;
    /* the appender waits for durability at the latest after this many bytes appended unawaited */
    private static final long UNAWAITED_BYTES = 4 << 20;

    private final String socket, name;
    private final long reclaimAt;
    private final long reconnectNanos;
    private volatile IOCriticalErrorListener critical;
    private final Set<Byte> replaceable = ConcurrentHashMap.newKeySet();

    private volatile JournalState state = JournalState.STOPPED;

    /** One queued operation. */
    private static final class Op {
        final byte[] rec; // null: nothing to write (not found, or a barrier)
        final IOCompletion cb;
        final boolean sync; // its caller asked for a sync: cb (if any) waits for durability
        final long lsn;
        final int size; // on disk
        Throwable error; // what its callback gets instead of done()
        CompletableFuture<Void> durable; // completed with its callback (reclaim, flush)

        Op(byte[] rec, IOCompletion cb, boolean sync, long lsn) {
            this.rec = rec;
            this.cb = cb;
            this.sync = sync;
            this.lsn = lsn;
            this.size = rec == null ? 0 : Records.onDisk(rec.length);
        }

        /*
         * Whether anyone waits for this record's durability: a caller that asked for a sync, or
         * a barrier. A callback of a record appended without sync is JournalImpl's "written":
         * it runs once the record is in the daemon's hands (Artemis passes one to nearly every
         * call, a no-op context where it wants no sync).
         */
        boolean needsWait() {
            return sync || durable != null;
        }

        /* Whether it goes to the daemon: a record, not failed before it went. */
        boolean writes() {
            return rec != null && error == null;
        }
    }

    final ReentrantLock lock = new ReentrantLock(); // package-private: CompletionTest holds it across two calls
    private final Condition work = lock.newCondition(), reclaimWork = lock.newCondition(), room = lock.newCondition();
    // guarded by lock
    private ArrayDeque<Op> queue = new ArrayDeque<>();
    private Live live = new Live();
    private long nextLsn; // the LSN our next record gets
    private long cut = 1; // the records below it are no longer needed
    private long windowBytes; // on disk from the cut on
    private long reclaimFrom; // windowBytes when the reclaim under way began
    private boolean running, reclaimRunning, reclaiming;
    private boolean appenderIdle; // the appender waits for work with nothing in flight
    private boolean appenderWaiting; // the appender waits for a group's sync (in awaitLsn)
    private long holdUntil; // a lone record waits for a partner until then (SyncHold); 0: none
    final SyncHold hold = new SyncHold(); // package-private: CompletionTest forces holds
    private volatile long lastAppendAt; // System.nanoTime() of the last append to the ring
    // appended by a broker thread (appendNow), in LSN order, not yet taken by the appender
    private final List<Op> handed = new ArrayList<>();
    private Throwable failure; // the journal failed: every later operation fails with it
    private Capacity capacity; // the daemon's journal's, as its status said at load or the last reconnect
    private int backlogWaiters; // broker threads waiting in awaitRoom for the live bytes to fall
    private long backlogWaits; // new records that waited for them since the start
    private long backlogSaidAt; // System.nanoTime() when that was last logged
    private long reclaims, copiedBytes; // done and carried forward, for tests and logs
    private volatile int liveRecords;

    private volatile Thread appender, reclaimer;
    /* Tests only: called on the reclaimer, without the lock, after it queued a copy of the record
     * that lay at this LSN (ReclaimTest makes a broker's operation land between two copies). */
    volatile java.util.function.LongConsumer afterCopy;
    /* Tests only: called on the appender, without the lock, once it took a group from the queue
     * (CompletionTest holds the appender there to see what reached the daemon without it). */
    volatile Runnable appenderTook;
    /* Tests only: called on the appender, without the lock, as it starts waiting for a group's
     * sync (CompletionTest holds it there, in the waiting state). */
    volatile Runnable appenderWaits;
    // the appender's; a lock holder appends with `writer` while the appender is idle or waits
    private HugePool pool;
    private JournalWriter writer;
    private final ArrayDeque<Op> unacked = new ArrayDeque<>(); // appended, not yet known durable

    /**
     * @param socket hugepoold's socket; null for $HUGEPOOL_SOCKET or the default
     * @param name the journal's name in hugepoold.conf
     * @param reclaimAt the least the journal holds from its oldest needed record on before a reclaim:
     *        one runs when it holds this much and {@value #RECLAIM_RATIO} times the records still needed
     * @param reconnect how long to wait for the daemon to come back after it went away
     * @param critical told of a failure the journal cannot go on from (the broker stops); may be null
     */
    public HugepoolJournal(String socket, String name, long reclaimAt, Duration reconnect, IOCriticalErrorListener critical) {
        if (name == null)
            throw new NullPointerException("name");
        if (reclaimAt < MIN_RECLAIM_AT)
            throw new IllegalArgumentException("reclaimAt " + reclaimAt + ": at least " + MIN_RECLAIM_AT + " bytes");
        this.socket = socket;
        this.name = name;
        this.reclaimAt = reclaimAt;
        this.reconnectNanos = reconnect.toNanos();
        this.critical = critical;
    }

    /** @return the hugepool journal's name */
    public String name() {
        return name;
    }

    /** @return how many reclaims ran since the start (for tests and monitoring) */
    public long reclaims() {
        lock.lock();
        try {
            return reclaims;
        } finally {
            lock.unlock();
        }
    }

    /** @return the bytes the journal holds from its oldest needed record on, as the reclaim counts them */
    public long windowBytes() {
        lock.lock();
        try {
            return windowBytes;
        } finally {
            lock.unlock();
        }
    }

    /** @return the bytes of the records reclaims carried forward since the start (for tests and monitoring) */
    public long copiedBytes() {
        lock.lock();
        try {
            return copiedBytes;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        return "HugepoolJournal(" + name + ")";
    }

    // --- life cycle ----------------------------------------------------------------------------

    private HugePool connect() throws HugepoolException {
        return socket == null ? HugePool.connect() : HugePool.connect(socket);
    }

    /* The journal, as messages name it. */
    String where() {
        return "hugepoold journal \"" + name + "\" (socket " + (socket == null ? "default" : socket) + ")";
    }

    /*
     * Started: refuse `bytes` of live records in this journal when the broker would wait for room
     * with them (new records wait at Capacity.maxLive, for consumers that an import does not
     * have), with the sizing the journal needs.
     */
    void checkRoomFor(long bytes) throws HugepoolException {
        Capacity c = Capacity.of(pool.status().journal(name), reclaimAt, where());
        if (bytes >= c.maxLive() || c.overfull(bytes))
            throw c.cannotCarry(bytes);
    }

    /*
     * Loaded: every record so far dead, durably (Import's redo of an import cut short): a CUT at
     * the LSN it gets itself, which the next load reads from; the daemon's journal is truncated
     * there by the next reclaim.
     */
    void discardAll() throws Exception {
        lock.lock();
        try {
            queue(Records.make(Records.CUT, (byte) 0, nextLsn, 0, 0), null, false);
        } finally {
            lock.unlock();
        }
        flush();
    }

    /* Started: the daemon's journal has never had a record (a load would give nothing). */
    boolean fresh() throws HugepoolException {
        return pool.status().journal(name).nextLsn() <= 1;
    }

    private String failedText(Status.Journal j) {
        return where() + " failed and is read-only until hugepoold restarts: " + j.note();
    }

    @Override
    public synchronized void start() throws Exception {
        if (state != JournalState.STOPPED)
            return;
        try {
            pool = connect();
            Status.Journal j = pool.status().journal(name);
            if (j == null)
                throw new IllegalStateException(where() + ": the daemon has no such journal; add a [journal " + name
                        + "] section to hugepoold.conf (hugepool-artemis(7))");
            if (j.state() == STATE_FAILED)
                throw new IllegalStateException(failedText(j));
            Capacity.of(j, reclaimAt, where()); // a journal the broker cannot keep records in: refused before any is read
            writer = openWriter(pool);
            awaitSoleWriter();
        } catch (HugepoolException e) {
            closeConnection();
            throw new IllegalStateException(where() + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeConnection();
            throw e;
        }
        state = JournalState.STARTED;
    }

    /*
     * The appender's writer. Its waits sleep: while the appender waits for a group's sync, the
     * broker's threads make the next group and answer producers, on the CPUs a polling wait would
     * share with them (hp_journal_set_wait_mode(3); on two CPUs the broker spent 17-31% less CPU
     * per durable send, its JIT compiler aside, and its sends/s moved within the noise:
     * docs/MEASURED.md).
     */
    private JournalWriter openWriter(HugePool p) throws HugepoolException {
        JournalWriter w = p.openJournalWriter(name);
        try {
            w.setWaitMode(JournalWriter.WaitMode.SLEEP);
        } catch (HugepoolException | RuntimeException e) {
            w.close();
            throw e;
        }
        return w;
    }

    /*
     * Wait until ours is the journal's one writer, then until everything its earlier writers gave
     * it is durable: a broker killed a moment ago leaves a writer whose ring the daemon still
     * empties, and those records must come before what this one reads and appends. The daemon
     * says nothing when a closed writer is gone, so its status is asked again, a few times a
     * second, for at most 10 s: then it is another live writer, which is an error.
     */
    private void awaitSoleWriter() throws HugepoolException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (long pause = 2;; pause = Math.min(2 * pause, 100)) {
            Status.Journal j = pool.status().journal(name);
            if (j.writers() == 1) {
                if (j.nextLsn() > 1)
                    writer.awaitLsn(j.nextLsn() - 1, Duration.ofSeconds(60));
                return;
            }
            if (System.nanoTime() > deadline)
                throw new IllegalStateException(where() + " has " + j.writers() + " writers: another broker or program"
                        + " appends to it; each Artemis journal needs a hugepool journal of its own");
            Thread.sleep(pause);
        }
    }

    private void closeConnection() {
        if (writer != null)
            writer.close();
        writer = null;
        if (pool != null) {
            try {
                pool.close();
            } catch (HugepoolException e) {
                log.debug("closing the connection of {}", name, e);
            }
        }
        pool = null;
    }

    @Override
    public synchronized void stop() throws Exception {
        if (state == JournalState.STOPPED)
            return;
        // the reclaimer first: a reclaim under way needs the appender to finish
        lock.lock();
        try {
            reclaimRunning = false;
            reclaimWork.signalAll();
            room.signalAll();
        } finally {
            lock.unlock();
        }
        if (reclaimer != null)
            reclaimer.join();
        lock.lock();
        try {
            running = false;
            work.signalAll();
            room.signalAll();
        } finally {
            lock.unlock();
        }
        if (appender != null)
            appender.join();
        appender = reclaimer = null;
        closeConnection();
        state = JournalState.STOPPED;
    }

    @Override
    public boolean isStarted() {
        return state != JournalState.STOPPED;
    }

    // --- load ----------------------------------------------------------------------------------

    @Override
    public synchronized JournalLoadInformation load(LoaderCallback cb) throws Exception {
        if (state != JournalState.STARTED)
            throw new IllegalStateException(this + " must be started and not loaded to load, was " + state);
        Replay.Result r;
        try (JournalReader reader = pool.openJournalReader(name, 1)) {
            r = new Replay(name, replaceable).run(reader, cb);
        }
        Status.Journal j = pool.status().journal(name);
        if (j.nextLsn() != r.lastLsn + 1 && !(r.lastLsn == 0 && j.nextLsn() <= 1))
            throw new IllegalStateException(where() + ": read up to LSN " + r.lastLsn + " but the journal's next LSN is "
                    + j.nextLsn() + ": another program appends to it");
        Capacity c = Capacity.of(j, reclaimAt, where());
        if (c.overfull(r.live.bytes))
            throw c.cannotCarry(r.live.bytes);
        lock.lock();
        try {
            capacity = c;
            live = r.live;
            nextLsn = Math.max(j.nextLsn(), 1);
            cut = r.cut;
            windowBytes = r.windowBytes;
            liveRecords = live.records.size();
            running = reclaimRunning = true;
            failure = null;
        } finally {
            lock.unlock();
        }
        appender = new Thread(this::appendLoop, "hugepool journal " + name);
        appender.setDaemon(true);
        appender.start();
        reclaimer = new Thread(this::reclaimLoop, "hugepool journal " + name + " reclaim");
        reclaimer.setDaemon(true);
        reclaimer.start();
        state = JournalState.LOADED;
        // JournalImpl's: an uncommitted transaction found at load is rolled back in the journal
        for (long tx : r.failed) {
            log.warn("{}: transaction {} was neither prepared nor committed when the broker stopped: rolled back", name, tx);
            appendRollbackRecord(tx, false, null);
        }
        log.info("{}: loaded {} live records and {} open transactions from LSN {} to {} ({} bytes)", where(),
                liveRecords, live.txs.size(), r.cut, r.lastLsn, r.windowBytes);
        return new JournalLoadInformation(liveRecords, r.maxId);
    }

    @Override
    public JournalLoadInformation load(List<RecordInfo> committed, List<PreparedTransactionInfo> prepared,
            TransactionFailureCallback failure, boolean fixBadTx) throws Exception {
        Set<Long> deletes = new java.util.HashSet<>();
        JournalLoadInformation info = load(Replay.into(committed, prepared, failure, deletes));
        if (!deletes.isEmpty())
            committed.removeIf(Replay.deleted(deletes));
        return info;
    }

    @Override
    public JournalLoadInformation load(SparseArrayLinkedList<RecordInfo> committed, List<PreparedTransactionInfo> prepared,
            TransactionFailureCallback failure, boolean fixBadTx) throws Exception {
        List<RecordInfo> list = new ArrayList<>();
        JournalLoadInformation info = load(list, prepared, failure, fixBadTx);
        for (RecordInfo ri : list)
            committed.add(ri);
        return info;
    }

    @Override
    public JournalLoadInformation loadInternalOnly() throws Exception {
        return load(new LoaderCallback() {
            @Override
            public void addPreparedTransaction(PreparedTransactionInfo info) {
            }

            @Override
            public void addRecord(RecordInfo info) {
            }

            @Override
            public void deleteRecord(long id) {
            }

            @Override
            public void updateRecord(RecordInfo info) {
            }

            @Override
            public void failedTransaction(long transactionID, List<RecordInfo> records, List<RecordInfo> recordsToDelete) {
            }
        });
    }

    @Override
    public JournalLoadInformation loadSyncOnly(JournalState syncState) {
        throw unsupported("replication (loadSyncOnly)");
    }

    // --- appends -------------------------------------------------------------------------------

    private static byte[] encode(byte kind, byte userType, long id, long txId, Persister persister, Object record) {
        @SuppressWarnings("unchecked")
        Persister<Object> p = (Persister<Object>) persister;
        int size = record == null ? 0 : p.getEncodeSize(record);
        if (size > MAX_RECORD)
            throw new IllegalArgumentException("a record of " + size + " bytes: a hugepool journal's records are at most "
                    + MAX_RECORD + " bytes (Artemis keeps a larger message as a large message)");
        byte[] r = Records.make(kind, userType, id, txId, size);
        if (size > 0) {
            ActiveMQBuffer b = ActiveMQBuffers.wrappedBuffer(r);
            b.writerIndex(Records.HEADER);
            p.encode(b, record);
            if (b.writerIndex() != r.length)
                throw new IllegalStateException("Artemis's persister " + persister + " wrote " + (b.writerIndex() - Records.HEADER)
                        + " bytes, having announced " + size);
        }
        return r;
    }

    private static byte[] encode(byte kind, byte userType, long id, long txId, EncodingSupport e) {
        return encode(kind, userType, id, txId, EncoderPersister.getInstance(), e);
    }

    private void checkLoaded() throws ActiveMQShutdownException {
        if (state != JournalState.LOADED)
            throw new ActiveMQShutdownException("Journal must be in state=" + JournalState.LOADED + ", was [" + state + "]");
    }

    /* With the lock: queue a record (null: nothing to write) taking the next LSN. */
    private Op queue(byte[] rec, IOCompletion cb, boolean sync) {
        Op op = new Op(rec, cb, sync, rec == null ? 0 : nextLsn);
        if (failure != null) {
            op.error = failure;
        } else if (rec != null) {
            nextLsn++;
            windowBytes += op.size;
            if (!reclaiming && (reclaimDue() || overfull()))
                reclaimWork.signal();
        }
        queue.add(op);
        if (running && op.writes() && op.sync) {
            // alone, it may wait for a partner (SyncHold); one that comes during a hold ends it
            long until = hold.arrive(System.nanoTime(), appenderIdle && holdUntil == 0);
            if (until != 0) {
                holdUntil = until; // the appender, signalled below, appends it then if no one has
            } else if (appenderIdle || appenderWaiting) {
                holdUntil = 0;
                appendNow();
            }
        }
        work.signal();
        return op;
    }

    /*
     * With the lock, the caller waiting for a sync, and the appender either idle (nothing in
     * flight, and it has not yet taken what was queued since it woke) or waiting for a group's
     * sync: the broker thread appends what is queued, its record last, to the ring itself, as one
     * batch, so the daemon starts on it at once (or takes it as soon as the sync under way ends),
     * not a thread's wake-up later, and hands it to the appender, which waits for it and
     * completes it. A durable send is two records, the message appended without a sync and its
     * reference with one, so the batch usually holds both (at one producer the appender's
     * wake-up was 70-120 us of a send's path, and a send that came during the sync of a consumer's
     * acknowledgement waited for that sync, then for the appender's wake-up). Only for a record
     * that waits: one nobody waits for gains nothing from the haste. The appender owns everything
     * else: a batch larger than one of the appender's, or an append that fails here, stays queued
     * for the appender, which meets the failure again and reconnects or fails the journal. The
     * writer is the appender's: while it is idle, a lock holder is its one user; while it waits,
     * a lock holder is its one appending thread (JournalWriter's waits run beside appends).
     */
    private void appendNow() {
        appenderIdle = false; // idle: the appender, woken, takes what is handed (waiting: it will)
        List<byte[]> recs = new ArrayList<>(queue.size());
        long bytes = 0;
        for (Op o : queue) {
            if (o.error != null)
                return;
            if (o.rec != null) {
                recs.add(o.rec);
                bytes += o.size;
            }
        }
        if (recs.size() > JournalWriter.BATCH_MAX || (recs.size() > 1 && bytes > BATCH_BYTES))
            return;
        try {
            if (recs.size() == 1)
                writer.append(recs.get(0));
            else
                writer.appendBatch(recs);
        } catch (HugepoolException | RuntimeException e) {
            return;
        }
        lastAppendAt = System.nanoTime();
        handed.addAll(queue);
        queue.clear();
    }

    private static void lineUp(IOCompletion cb) {
        if (cb != null)
            cb.storeLineUp();
    }

    private static SimpleWaitIOCallback syncCallback(boolean sync) {
        return sync ? new SimpleWaitIOCallback() : null;
    }

    private static void waitFor(SimpleWaitIOCallback cb) throws Exception {
        if (cb != null)
            cb.waitCompletion();
    }

    @Override
    public void appendAddRecord(long id, byte recordType, byte[] record, boolean sync) throws Exception {
        appendAddRecord(id, recordType, new ByteArrayEncoding(record), sync);
    }

    @Override
    public void appendAddRecord(long id, byte recordType, Persister persister, Object record, boolean sync) throws Exception {
        SimpleWaitIOCallback cb = syncCallback(sync);
        appendAddRecord(id, recordType, persister, record, sync, cb);
        waitFor(cb);
    }

    @Override
    public void appendAddRecord(long id, byte recordType, Persister persister, Object record, boolean sync,
            IOCompletion cb) throws Exception {
        checkLoaded();
        lineUp(cb);
        byte[] rec = encode(Records.ADD, recordType, id, 0, persister, record);
        lock.lock();
        try {
            awaitRoom(true);
            Op op = queue(rec, cb, sync);
            live.add(id, new Live.Entry(Records.ADD, op.lsn, 0, 0, op.size, op.lsn));
            liveRecords = live.records.size();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void appendAddEvent(long id, byte recordType, Persister persister, Object record, boolean sync, IOCompletion cb)
            throws Exception {
        checkLoaded();
        lineUp(cb);
        byte[] rec = encode(Records.EVENT, recordType, id, 0, persister, record);
        lock.lock();
        try {
            awaitRoom(false);
            queue(rec, cb, sync);
        } finally {
            lock.unlock();
        }
    }

    /*
     * An update: written only while the id is live. found.get() tells the caller (JournalImpl's
     * "Cannot find add info"); updateCallback hears it too.
     */
    private boolean update(long id, byte recordType, Persister persister, Object record, boolean sync, IOCompletion cb,
            JournalUpdateCallback updateCallback) throws Exception {
        checkLoaded();
        lineUp(cb);
        byte[] rec = encode(Records.UPDATE, recordType, id, 0, persister, record);
        boolean found;
        lock.lock();
        try {
            awaitRoom(false);
            found = live.contains(id) && failure == null;
            Op op = queue(found ? rec : null, cb, sync);
            if (found)
                live.update(id, new Live.Entry(Records.UPDATE, op.lsn, 0, 0, op.size, op.lsn));
        } finally {
            lock.unlock();
        }
        if (updateCallback != null)
            updateCallback.onUpdate(id, found);
        return found;
    }

    private boolean delete(long id, boolean sync, IOCompletion cb, JournalUpdateCallback updateCallback) throws Exception {
        checkLoaded();
        lineUp(cb);
        byte[] rec = Records.make(Records.DELETE, (byte) 0, id, 0, 0);
        boolean found;
        lock.lock();
        try {
            awaitRoom(false);
            found = live.contains(id) && failure == null;
            queue(found ? rec : null, cb, sync);
            if (found)
                live.delete(id);
            liveRecords = live.records.size();
            liveFell();
        } finally {
            lock.unlock();
        }
        if (updateCallback != null)
            updateCallback.onUpdate(id, found);
        return found;
    }

    private static boolean strict(boolean sync, IOCompletion cb) {
        return sync || (cb != null && cb != DummyCallback.getInstance());
    }

    @Override
    public void appendUpdateRecord(long id, byte recordType, byte[] record, boolean sync) throws Exception {
        appendUpdateRecord(id, recordType, new ByteArrayEncoding(record), sync);
    }

    @Override
    public void appendUpdateRecord(long id, byte recordType, Persister persister, Object record, boolean sync) throws Exception {
        SimpleWaitIOCallback cb = syncCallback(sync);
        appendUpdateRecord(id, recordType, persister, record, sync, cb);
        waitFor(cb);
    }

    @Override
    public void appendUpdateRecord(long id, byte recordType, Persister persister, Object record, boolean sync,
            IOCompletion cb) throws Exception {
        if (!update(id, recordType, persister, record, sync, cb, null) && strict(sync, cb))
            throw new IllegalStateException("Cannot find add info " + id);
    }

    @Override
    public void tryAppendUpdateRecord(long id, byte recordType, byte[] record, JournalUpdateCallback updateCallback,
            boolean sync, boolean replaceableRecord) throws Exception {
        tryAppendUpdateRecord(id, recordType, new ByteArrayEncoding(record), updateCallback, sync, replaceableRecord);
    }

    @Override
    public void tryAppendUpdateRecord(long id, byte recordType, Persister persister, Object record,
            JournalUpdateCallback updateCallback, boolean sync, boolean replaceableUpdate) throws Exception {
        SimpleWaitIOCallback cb = syncCallback(sync);
        tryAppendUpdateRecord(id, recordType, persister, record, sync, replaceableUpdate, updateCallback, cb);
        waitFor(cb);
    }

    @Override
    public void tryAppendUpdateRecord(long id, byte recordType, Persister persister, Object record, boolean sync,
            boolean replaceableUpdate, JournalUpdateCallback updateCallback, IOCompletion cb) throws Exception {
        update(id, recordType, persister, record, sync, cb, updateCallback);
    }

    @Override
    public void appendDeleteRecord(long id, boolean sync) throws Exception {
        SimpleWaitIOCallback cb = syncCallback(sync);
        appendDeleteRecord(id, sync, cb);
        waitFor(cb);
    }

    @Override
    public void appendDeleteRecord(long id, boolean sync, IOCompletion cb) throws Exception {
        if (!delete(id, sync, cb, null) && strict(sync, cb))
            throw new IllegalStateException("Cannot find add info " + id);
    }

    @Override
    public void tryAppendDeleteRecord(long id, JournalUpdateCallback updateCallback, boolean sync) throws Exception {
        SimpleWaitIOCallback cb = syncCallback(sync);
        tryAppendDeleteRecord(id, sync, updateCallback, cb);
        waitFor(cb);
    }

    @Override
    public void tryAppendDeleteRecord(long id, boolean sync, JournalUpdateCallback updateCallback, IOCompletion cb)
            throws Exception {
        delete(id, sync, cb, updateCallback);
    }

    // --- transactions --------------------------------------------------------------------------

    private void txRecord(byte kind, long txId, long id, byte[] rec) throws Exception {
        checkLoaded();
        lock.lock();
        try {
            awaitRoom(kind == Records.ADD_TX);
            Live.Tx tx = live.tx(txId);
            int idx = tx.nextIdx++;
            Records.setIdx(rec, idx);
            Op op = queue(rec, null, false);
            live.txRecord(tx, new Live.TxEntry(kind, id, op.lsn, idx, txId, op.size, op.lsn));
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void appendAddRecordTransactional(long txID, long id, byte recordType, byte[] record) throws Exception {
        appendAddRecordTransactional(txID, id, recordType, new ByteArrayEncoding(record));
    }

    @Override
    public void appendAddRecordTransactional(long txID, long id, byte recordType, Persister persister, Object record)
            throws Exception {
        txRecord(Records.ADD_TX, txID, id, encode(Records.ADD_TX, recordType, id, txID, persister, record));
    }

    @Override
    public void appendUpdateRecordTransactional(long txID, long id, byte recordType, byte[] record) throws Exception {
        appendUpdateRecordTransactional(txID, id, recordType, new ByteArrayEncoding(record));
    }

    @Override
    public void appendUpdateRecordTransactional(long txID, long id, byte recordType, Persister persister, Object record)
            throws Exception {
        txRecord(Records.UPDATE_TX, txID, id, encode(Records.UPDATE_TX, recordType, id, txID, persister, record));
    }

    @Override
    public void appendDeleteRecordTransactional(long txID, long id, byte[] record) throws Exception {
        appendDeleteRecordTransactional(txID, id, new ByteArrayEncoding(record));
    }

    @Override
    public void appendDeleteRecordTransactional(long txID, long id, EncodingSupport record) throws Exception {
        txRecord(Records.DELETE_TX, txID, id, encode(Records.DELETE_TX, (byte) 0, id, txID, record));
    }

    @Override
    public void appendDeleteRecordTransactional(long txID, long id) throws Exception {
        txRecord(Records.DELETE_TX, txID, id, Records.make(Records.DELETE_TX, (byte) 0, id, txID, 0));
    }

    @Override
    public void appendPrepareRecord(long txID, EncodingSupport transactionData, boolean sync) throws Exception {
        SimpleWaitIOCallback cb = syncCallback(sync);
        appendPrepareRecord(txID, transactionData, sync, cb);
        waitFor(cb);
    }

    @Override
    public void appendPrepareRecord(long txID, byte[] transactionData, boolean sync) throws Exception {
        appendPrepareRecord(txID, new ByteArrayEncoding(transactionData), sync);
    }

    @Override
    public void appendPrepareRecord(long txID, EncodingSupport transactionData, boolean sync, IOCompletion cb)
            throws Exception {
        checkLoaded();
        lineUp(cb);
        byte[] rec = encode(Records.PREPARE, (byte) 0, 0, txID, transactionData);
        lock.lock();
        try {
            awaitRoom(false);
            Live.Tx tx = live.tx(txID);
            Op op = queue(rec, cb, sync);
            live.prepare(tx, new Live.Entry(Records.PREPARE, op.lsn, 0, txID, op.size, op.lsn));
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void appendCommitRecord(long txID, boolean sync) throws Exception {
        SimpleWaitIOCallback cb = syncCallback(sync);
        appendCommitRecord(txID, sync, cb, true);
        waitFor(cb);
    }

    @Override
    public void appendCommitRecord(long txID, boolean sync, IOCompletion cb) throws Exception {
        appendCommitRecord(txID, sync, cb, true);
    }

    @Override
    public void appendCommitRecord(long txID, boolean sync, IOCompletion cb, boolean lineUpContext) throws Exception {
        checkLoaded();
        if (lineUpContext)
            lineUp(cb);
        completeTx(txID, Records.COMMIT, cb, sync);
    }

    @Override
    public void appendRollbackRecord(long txID, boolean sync) throws Exception {
        SimpleWaitIOCallback cb = syncCallback(sync);
        appendRollbackRecord(txID, sync, cb);
        waitFor(cb);
    }

    @Override
    public void appendRollbackRecord(long txID, boolean sync, IOCompletion cb) throws Exception {
        checkLoaded();
        lineUp(cb);
        completeTx(txID, Records.ROLLBACK, cb, sync);
    }

    /* Commit or roll back: JournalImpl's "Cannot find tx" for a transaction with no record. */
    private void completeTx(long txID, byte kind, IOCompletion cb, boolean sync) throws Exception {
        IllegalStateException missing = null;
        lock.lock();
        try {
            awaitRoom(false);
            Live.Tx tx = live.txs.get(txID);
            if (tx == null) {
                missing = new IllegalStateException("Cannot find tx with id " + txID);
                Op op = queue(null, cb, sync);
                op.error = missing;
            } else {
                Op op = queue(Records.make(kind, (byte) 0, 0, txID, 0), cb, sync);
                if (kind == Records.COMMIT)
                    live.commit(tx, op.lsn);
                else
                    live.rollback(tx);
                liveRecords = live.records.size();
                liveFell();
            }
        } finally {
            lock.unlock();
        }
        if (missing != null && sync && cb == null)
            throw missing;
    }

    @Override
    public void lineUpContext(IOCompletion callback) {
        lineUp(callback);
    }

    // --- the appender --------------------------------------------------------------------------

    /*
     * Each turn: take what is queued, append it as one batch, complete the group made durable
     * in the turn before, then wait for this one. So the daemon syncs a group while its
     * predecessor's callbacks run (the broker's replies to its producers), instead of idling
     * through them, and a group reaches the daemon whole: appended record by record, the
     * daemon's flusher started a lone writer's sync at the first, and the rest of the group
     * waited for a second one (hugepool-artemis(7), "Completions").
     */
    private void appendLoop() {
        List<Op> group = new ArrayList<>(), done = new ArrayList<>();
        Throwable doneFailed = null;
        int appended;
        for (;;) {
            lock.lock();
            try {
                for (;;) {
                    boolean empty = queue.isEmpty() && handed.isEmpty() && done.isEmpty();
                    if (!running || (!empty && (holdUntil == 0 || !handed.isEmpty())))
                        break;
                    appenderIdle = true;
                    if (empty) {
                        work.awaitUninterruptibly();
                        continue;
                    }
                    // a lone record waits for a partner: a broker thread appends both (appendNow)
                    long left = holdUntil - System.nanoTime();
                    if (left <= 0)
                        break;
                    try {
                        work.awaitNanos(left);
                    } catch (InterruptedException e) {
                        break; // nobody interrupts the appender; appending now is always right
                    }
                }
                holdUntil = 0;
                appenderIdle = false;
                if (queue.isEmpty() && handed.isEmpty() && done.isEmpty())
                    break;
                // what a broker thread appended while we were idle or waiting comes first: its
                // LSNs are lower; it is in flight now (after what we appended before)
                appended = handed.size();
                for (Op o : handed)
                    if (o.writes())
                        unacked.add(o);
                group.addAll(handed);
                handed.clear();
                group.addAll(queue);
                queue.clear();
            } finally {
                lock.unlock();
            }
            Runnable took = appenderTook;
            if (took != null)
                took.run();
            boolean wait = false;
            long unawaited = 0;
            for (Op op : group) {
                wait |= op.needsWait();
                unawaited += op.size;
            }
            Throwable failed = null;
            try {
                // a group nobody waits for (no sync asked) goes lazily: the daemon holds it for
                // the next one that someone waits for, one sync for both
                appendNew(group.subList(appended, group.size()), !wait);
            } catch (Throwable e) {
                failed = fail(e);
            }
            // the group before is durable (or failed): its callbacks run while this one syncs
            complete(done, doneFailed);
            done.clear();
            try {
                if (failed == null && (wait || unawaited > UNAWAITED_BYTES) && !unacked.isEmpty())
                    awaitUnacked();
            } catch (Throwable e) {
                failed = fail(e);
            }
            if (failed != null)
                unacked.clear(); // failed with the journal: nothing to wait for again

            List<Op> t = done;
            done = group;
            group = t;
            doneFailed = failed;
        }
        // stopping: what was appended is still written, the writer's close waits for nothing
    }

    /*
     * Append the group's records to the ring as batches of at most BATCH_MAX records and
     * BATCH_BYTES (one call, one entry the daemon takes whole), lazily when nobody waits for
     * any of them (JournalWriter.appendBatchLazy: the daemon has them, a broker killed now
     * loses none, and syncs them with the next group someone waits for, or within its
     * max_batch_delay); a daemon that went away is reconnected to, and a batch it refused
     * appended nothing, so it is appended again whole.
     */
    private void appendNew(List<Op> group, boolean lazy) throws Exception {
        List<Op> batch = new ArrayList<>(Math.min(group.size(), JournalWriter.BATCH_MAX));
        List<byte[]> recs = new ArrayList<>(Math.min(group.size(), JournalWriter.BATCH_MAX));
        long bytes = 0;
        for (int i = 0; i <= group.size(); i++) {
            Op op = i < group.size() ? group.get(i) : null;
            if (op != null && !op.writes())
                continue;
            if (op != null && batch.size() < JournalWriter.BATCH_MAX && bytes + op.size <= BATCH_BYTES) {
                batch.add(op);
                recs.add(op.rec);
                bytes += op.size;
                continue;
            }
            if (!batch.isEmpty()) {
                for (;;) {
                    try {
                        if (lazy)
                            writer.appendBatchLazy(recs);
                        else if (recs.size() == 1)
                            writer.append(recs.get(0));
                        else
                            writer.appendBatch(recs);
                        lastAppendAt = System.nanoTime();
                        unacked.addAll(batch);
                        break;
                    } catch (DaemonGoneException e) {
                        reconnect(e);
                    }
                }
                batch.clear();
                recs.clear();
            }
            if (op != null) {
                batch.add(op);
                recs.add(op.rec);
                bytes = op.size;
            }
        }
    }

    private void awaitUnacked() throws Exception {
        Op last = unacked.peekLast();
        for (;;) {
            try {
                waiting(true);
                try {
                    Runnable waits = appenderWaits;
                    if (waits != null)
                        waits.run();
                    long appended = lastAppendAt;
                    writer.awaitLsn(last.lsn, null);
                    hold.synced(System.nanoTime() - appended);
                } finally {
                    waiting(false);
                }
                long d = writer.durableLsn();
                if (d < last.lsn)
                    throw new IllegalStateException(where() + ": durable up to LSN " + d + " after waiting for LSN " + last.lsn);
                break;
            } catch (DaemonGoneException e) {
                reconnect(e);
            }
        }
        unacked.clear();
    }

    /* Whether broker threads may append beside the appender's wait (appendNow). */
    private void waiting(boolean w) {
        lock.lock();
        try {
            appenderWaiting = w;
        } finally {
            lock.unlock();
        }
    }

    /*
     * The daemon went away (stopped or restarted). Connect again, find which of the records not
     * known durable made it (they are ours, in our order, so a prefix of `unacked` followed by
     * what broker threads appended during our wait, still `handed`: none is appended now, the
     * appender not waiting), append the rest again. The handed ones stay handed: the next turn
     * takes them as appended.
     */
    private void reconnect(DaemonGoneException why) throws Exception {
        long durable = writer.durableLsn();
        List<Op> inFlight = new ArrayList<>(unacked);
        lock.lock();
        try {
            for (Op o : handed)
                if (o.writes())
                    inFlight.add(o);
        } finally {
            lock.unlock();
        }
        log.warn("{}: hugepoold went away ({}); durable up to LSN {}, {} records in flight: connecting again", where(),
                why.getMessage(), durable, inFlight.size());
        closeConnection();
        long deadline = System.nanoTime() + reconnectNanos;
        for (long pause = 10;; pause = Math.min(pause * 2, 500)) {
            try {
                pool = connect();
                writer = openWriter(pool);
                // its configuration may have changed with the daemon's restart
                Capacity c = Capacity.of(pool.status().journal(name), reclaimAt, where());
                lock.lock();
                try {
                    capacity = c;
                    room.signalAll();
                } finally {
                    lock.unlock();
                }
                break;
            } catch (NoDaemonException | DaemonGoneException e) {
                closeConnection();
                if (System.nanoTime() > deadline)
                    throw new IllegalStateException(where() + ": hugepoold did not come back within "
                            + TimeUnit.NANOSECONDS.toSeconds(reconnectNanos) + " s: " + e.getMessage(), e);
                // nothing to wait on while no daemon listens: try again shortly
                Thread.sleep(pause);
            }
        }
        // what of ours became durable after `durable`
        List<Op> pending = new ArrayList<>();
        for (Op op : inFlight)
            if (op.lsn > durable)
                pending.add(op);
        int survived = 0;
        try (JournalReader r = pool.openJournalReader(name, durable + 1)) {
            for (JournalRecord rec; (rec = r.next()) != null;) {
                if (rec.lsn() <= durable)
                    continue;
                Op op = survived < pending.size() ? pending.get(survived) : null;
                if (op == null || op.lsn != rec.lsn() || !java.util.Arrays.equals(op.rec, rec.bytes()))
                    throw new IllegalStateException(where() + ": LSN " + rec.lsn()
                            + " is not the record this broker appended there: another program appends to the journal");
                survived++;
            }
        }
        for (int i = survived; i < pending.size(); i++) {
            if (pending.get(i).lsn != durable + 1 + i)
                throw new IllegalStateException(where() + ": records in flight are not consecutive");
            writer.append(pending.get(i).rec);
        }
        log.warn("{}: connected again: {} of {} records in flight had been made durable, appended the other {} again",
                where(), survived, pending.size(), pending.size() - survived);
    }

    /*
     * What an error of the daemon's means for the operator: when the journal itself failed (a
     * write or sync error made it read-only), the daemon's status says so and why, which the
     * error of the call that met it (EIO) does not; asked on a connection of its own, since the
     * one that failed may be the appender's, in use on another thread.
     */
    private String explain(HugepoolException e) {
        try (HugePool p = connect()) {
            Status.Journal j = p.status().journal(name);
            if (j != null && j.state() == STATE_FAILED)
                return failedText(j) + " (" + e.getMessage() + ")";
        } catch (HugepoolException | RuntimeException ignored) {
            // the daemon cannot say more: the error is all there is
        }
        return where() + ": " + e.getMessage();
    }

    /* The journal cannot go on: every later operation fails, and the broker is told. */
    private Throwable fail(Throwable e) {
        String msg = e instanceof HugepoolException ? explain((HugepoolException) e) : e.getMessage();
        Throwable f = e instanceof IllegalStateException ? e : new IllegalStateException(msg, e);
        lock.lock();
        try {
            if (failure == null)
                failure = f;
            room.signalAll();
            for (Op op : queue)
                op.error = failure;
            for (Op op : handed) // appended during a wait that failed: never acknowledged
                op.error = failure;
        } finally {
            lock.unlock();
        }
        log.error("{}; the journal is failed, nothing appended from now on is acknowledged", msg, e);
        IOCriticalErrorListener l = critical;
        if (l != null)
            l.onIOException(f, msg, name);
        return f;
    }

    private static void complete(List<Op> group, Throwable failed) {
        for (Op op : group) {
            Throwable e = op.error != null ? op.error : failed != null && op.rec != null ? failed : null;
            if (op.cb != null) {
                try {
                    if (e == null)
                        op.cb.done();
                    else
                        op.cb.onError(ActiveMQExceptionType.IO_ERROR.getCode(), e.getMessage());
                } catch (Throwable t) {
                    log.warn("an IOCompletion threw", t);
                }
            }
            if (op.durable != null) {
                if (e == null)
                    op.durable.complete(null);
                else
                    op.durable.completeExceptionally(e);
            }
        }
    }

    /* Tests only: whether the appender waits for work with nothing in flight. */
    boolean appenderIdle() {
        lock.lock();
        try {
            return appenderIdle;
        } finally {
            lock.unlock();
        }
    }

    /* Queue a barrier: durable once everything queued before it is. */
    private CompletableFuture<Void> barrier() {
        lock.lock();
        try {
            if (!running)
                return CompletableFuture.failedFuture(new ActiveMQShutdownException(this + " is stopped"));
            Op op = queue(null, null, false);
            op.durable = new CompletableFuture<>();
            return op.durable;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void flush() throws Exception {
        if (state != JournalState.LOADED)
            return;
        try {
            barrier().get();
        } catch (ExecutionException e) {
            throw new IllegalStateException(e.getCause().getMessage(), e.getCause());
        }
    }

    // --- reclaim -------------------------------------------------------------------------------

    /* With the lock: is a reclaim due (Capacity.reclaimDue)? */
    private boolean reclaimDue() {
        return capacity.reclaimDue(windowBytes, live.bytes);
    }

    /* With the lock: are the live bytes past what a reclaim can carry forward (Capacity.overfull)? */
    private boolean overfull() {
        return capacity.overfull(live.bytes);
    }

    /* With the lock: the window a broker operation may not queue past (Capacity.limit). */
    private long roomLimit() {
        return capacity.limit(live.bytes, reclaiming, reclaimFrom);
    }

    /*
     * With the lock, before a broker operation queues its record: wait while the window is past
     * roomLimit(), and, for a new record (`grows`: an add, a transaction's add: a message, in the
     * message journal), while the live bytes are at Capacity.maxLive(): a backlog the journal
     * cannot carry forward waits for consumers' acknowledgements (updates, deletes, commits,
     * which go on: an acknowledgement is an update of its message's record, then its delete), as
     * Artemis's own producers wait on a full disk, said in the log at most once a minute, not a
     * journal that fills and stops every thread. Never on the appender or the reclaimer (a
     * callback may append from the appender), which are what makes room.
     */
    private void awaitRoom(boolean grows) {
        Thread me = Thread.currentThread();
        if (me == appender || me == reclaimer)
            return;
        for (;;) {
            if (!running || !reclaimRunning || failure != null)
                return;
            if (windowBytes > roomLimit()) {
                room.awaitUninterruptibly();
            } else if (grows && live.bytes >= capacity.maxLive()) {
                backlogWaits++;
                long now = System.nanoTime();
                if (backlogWaits == 1 || now - backlogSaidAt > TimeUnit.MINUTES.toNanos(1)) {
                    log.warn("{}: the records the broker still needs, {}, are a third of what the journal holds ({}):"
                            + " new messages wait for consumers to acknowledge some ({} waits since the start, said at"
                            + " most once a minute); give it more segments or lower the broker's global-max-size"
                            + " (hugepool-artemis(7))", where(), Capacity.mib(live.bytes),
                            Capacity.mib(capacity.usable()), backlogWaits);
                    backlogSaidAt = now;
                }
                backlogWaiters++;
                try {
                    room.awaitUninterruptibly();
                } finally {
                    backlogWaiters--;
                }
            } else {
                return;
            }
        }
    }

    /* With the lock, after an operation that may free live bytes: wake what waits for them. */
    private void liveFell() {
        if (backlogWaiters > 0 && live.bytes < capacity.maxLive())
            room.signalAll();
    }

    /* Tests only: broker threads waiting for the live bytes to fall (awaitRoom). */
    int backlogWaiters() {
        lock.lock();
        try {
            return backlogWaiters;
        } finally {
            lock.unlock();
        }
    }

    private void reclaimLoop() {
        HugePool rpool = null;
        try {
            for (;;) {
                Cut c;
                lock.lock();
                try {
                    while (reclaimRunning && failure == null && !reclaimDue() && !overfull())
                        reclaimWork.awaitUninterruptibly();
                    if (!reclaimRunning || failure != null)
                        return;
                    if (overfull()) {
                        IllegalStateException why = capacity.cannotCarry(live.bytes);
                        lock.unlock();
                        try {
                            fail(why);
                        } finally {
                            lock.lock();
                        }
                        return;
                    }
                    reclaiming = true;
                    reclaimFrom = windowBytes;
                    room.signalAll(); // the limit may have grown (roomLimit)
                    // decided and cut in one hold of the lock: the live bytes it copies are what made it due
                    c = new Cut(cut, nextLsn, windowBytes, live.bytes);
                } finally {
                    lock.unlock();
                }
                try {
                    if (rpool == null)
                        rpool = connect();
                    reclaim(rpool, c);
                } catch (DaemonGoneException | NoDaemonException e) {
                    // the appender reconnects; try again with a new connection once it did
                    log.info("{}: reclaim interrupted by the daemon going away ({}); it will run again", where(), e.getMessage());
                    rpool = closeQuietly(rpool);
                    barrierQuietly();
                } catch (Throwable e) {
                    fail(e);
                    return;
                } finally {
                    lock.lock();
                    try {
                        reclaiming = false;
                        room.signalAll();
                    } finally {
                        lock.unlock();
                    }
                }
            }
        } finally {
            closeQuietly(rpool);
        }
    }

    private void barrierQuietly() {
        try {
            barrier().get();
        } catch (Exception e) {
            // the appender failed: the loop sees `failure`
        }
    }

    private static HugePool closeQuietly(HugePool p) {
        if (p != null) {
            try {
                p.close();
            } catch (HugepoolException e) {
                // closing anyway
            }
        }
        return null;
    }

    /** A reclaim's plan: everything queued before `to` goes, what is still needed carried forward. */
    private record Cut(long from, long to, long below, long liveBytes) {
    }

    /*
     * Carry forward every record still needed that lies below c.to, then cut there: copies,
     * then CUT(c.to) once they are durable, then truncate once that is. Everything queued
     * before the reclaim is cut, not an older part: the live bytes, at most a third of it, are
     * copied once, and the journal holds nothing older than the last reclaim.
     */
    private void reclaim(HugePool rpool, Cut c) throws Exception {
        long oldCut = c.from, newCut = c.to;
        // a cut needs every record below it durable (they are read back)
        barrier().get();
        int copied = 0;
        long copiedNow = 0;
        /*
         * Copy until nothing needed lies below the cut, then CUT in the same hold of the lock,
         * even when there was nothing to copy: the load starts at the last CUT it finds. From
         * then on every record still needed lies above the cut, and so will every one later
         * operations derive from them. A transaction committed meanwhile has new entries where
         * its records lie: another pass.
         */
        for (int pass = 0;; pass++) {
            List<Live.Entry> todo;
            lock.lock();
            try {
                todo = live.below(newCut);
                if (todo.isEmpty()) {
                    queue(Records.make(Records.CUT, (byte) 0, newCut, 0, 0), null, false);
                    break;
                }
            } finally {
                lock.unlock();
            }
            if (pass == 3)
                throw new IllegalStateException(where() + ": the record at LSN " + todo.get(0).lsn + " is still needed but"
                        + " was not found between LSN " + oldCut + " and " + newCut + ": records were discarded"
                        + " (when_full = recycle, or truncated by another program?)");
            // read only from the first record to carry to the last: under a broker whose
            // consumers keep up, those are the few in flight at the window's end, and the rest
            // of the window (the reclaim point, 64 MiB by default) is not copied into this JVM
            Map<Long, Live.Entry> byLsn = new java.util.HashMap<>();
            long first = newCut, last = oldCut;
            for (Live.Entry e : todo) {
                byLsn.put(e.lsn, e);
                first = Math.min(first, e.lsn);
                last = Math.max(last, e.lsn);
            }
            try (JournalReader r = rpool.openJournalReader(name, Math.max(oldCut, first))) {
                for (JournalRecord rec; (rec = r.next()) != null && rec.lsn() <= last && rec.lsn() < newCut;) {
                    Live.Entry e = byLsn.get(rec.lsn());
                    if (e == null)
                        continue;
                    byte[] copy = Records.copy(rec.data(), e.copyKind, e.major, e.minor);
                    boolean queued = false;
                    lock.lock();
                    try {
                        // still needed, and still lying there? (a delete or a commit changes that)
                        if (e.lsn == rec.lsn() && !e.dead) {
                            Op op = queue(copy, null, false);
                            e.lsn = op.lsn;
                            copied++;
                            copiedNow += op.size;
                            copiedBytes += op.size;
                            queued = true;
                        }
                    } finally {
                        lock.unlock();
                    }
                    java.util.function.LongConsumer hook = afterCopy;
                    if (queued && hook != null)
                        hook.accept(rec.lsn());
                }
            }
        }
        barrier().get();
        rpool.truncateJournal(name, newCut);
        long before;
        lock.lock();
        try {
            before = windowBytes;
            windowBytes -= c.below;
            cut = newCut;
            live.cut(newCut);
            reclaims++;
            room.signalAll();
        } finally {
            lock.unlock();
        }
        log.debug("{}: reclaimed LSN {} to {} ({} bytes, {} live): carried {} records ({} bytes) forward; {} bytes before, {} after",
                where(), oldCut, newCut, c.below, c.liveBytes, copied, copiedNow, before, windowBytes);
    }

    // --- what does not apply, and plain answers ------------------------------------------------

    private UnsupportedOperationException unsupported(String what) {
        return new UnsupportedOperationException(what + " does not apply to a hugepool journal (" + name
                + "): hugepoold keeps its records; replicate the broker with a shared store or none (hugepool-artemis(7))");
    }

    @Override
    public void setRemoveExtraFilesOnLoad(boolean removeExtraFilesOnLoad) {
    }

    @Override
    public boolean isRemoveExtraFilesOnLoad() {
        return false;
    }

    @Override
    public void replaceableRecord(byte recordType) {
        replaceable.add(recordType);
    }

    @Override
    public Journal setCriticalErrorListener(IOCriticalErrorListener l) {
        critical = l;
        return this;
    }

    @Override
    public IOCriticalErrorListener getCriticalErrorListener() {
        return critical;
    }

    @Override
    public int getAlignment() {
        return 1;
    }

    @Override
    public int getNumberOfRecords() {
        return liveRecords;
    }

    @Override
    public int getUserVersion() {
        return 0;
    }

    @Override
    public Map<Long, JournalFile> createFilesForBackupSync(long[] fileIds) {
        throw unsupported("backup synchronisation (replication)");
    }

    @Override
    public void synchronizationLock() {
        throw unsupported("backup synchronisation (replication)");
    }

    @Override
    public void synchronizationUnlock() {
        throw unsupported("backup synchronisation (replication)");
    }

    @Override
    public void forceMoveNextFile() {
        throw unsupported("moving to the next file (replication's file sync)");
    }

    @Override
    public JournalFile[] getDataFiles() {
        throw unsupported("the journal's data files (replication's file sync)");
    }

    @Override
    public SequentialFileFactory getFileFactory() {
        throw unsupported("a file factory (journal-retention, replication)");
    }

    @Override
    public int getFileSize() {
        return MAX_RECORD;
    }

    /** Reclaim now (what Artemis's compaction is for), and wait for it. */
    @Override
    public void scheduleCompactAndBlock(int timeout) throws Exception {
        lock.lock();
        try {
            reclaimWork.signal();
        } finally {
            lock.unlock();
        }
        flush();
    }

    @Override
    public void replicationSyncPreserveOldFiles() {
        throw unsupported("replication");
    }

    @Override
    public void replicationSyncFinished() {
        throw unsupported("replication");
    }

    @Override
    public long getMaxRecordSize() {
        return MAX_RECORD;
    }

    @Override
    public long getWarningRecordSize() {
        return MAX_RECORD;
    }
}
