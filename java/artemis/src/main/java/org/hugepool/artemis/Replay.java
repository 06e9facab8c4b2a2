/*
 * SPDX-License-Identifier: MIT
 *
 * Replay.java - a HugepoolJournal's load: the hugepool journal read from its oldest kept record,
 * given to Artemis as JournalImpl's load gives it, and the Live model rebuilt from it.
 *
 * The journal holds originals and copies (a reclaim carries live records forward, with the place
 * of their original: Records.COPY) and CUT records (what lies below their LSN was carried forward
 * and may be gone). So the load takes the last cut, drops every record below it, keeps one of each
 * place (an original and its copies say the same), and gives the records in the order of their
 * places: what JournalImpl would read from its files with nothing reclaimed. A transaction's
 * records are given at its commit, positives in their order then negatives; committed records
 * carried forward are plain records at their commit's place. Then, in the order of their first
 * record, each open transaction: prepared ones as prepared transactions, the others as failed
 * (JournalImpl's "uncommitted transaction": the caller appends their rollbacks, so they are
 * open transactions of the Live model until then).
 *
 * Called by HugepoolJournal.load, on the loading thread, before the appender starts.
 */
package org.hugepool.artemis;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;

import org.apache.activemq.artemis.core.journal.LoaderCallback;
import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.hugepool.HugepoolException;
import org.hugepool.JournalReader;
import org.hugepool.JournalRecord;

final class Replay {
    /** One record kept for the load: its place, what it says, where it lies. */
    private static final class Item {
        final long major;
        final int minor;
        final byte kind, userType;
        final long id;
        final byte[] data;
        final int size; // on disk
        long lsn;

        Item(long major, int minor, byte kind, byte userType, long id, byte[] data, int size, long lsn) {
            this.major = major;
            this.minor = minor;
            this.kind = kind;
            this.userType = userType;
            this.id = id;
            this.data = data;
            this.size = size;
            this.lsn = lsn;
        }
    }

    private static final class TxLoad {
        final long id;
        final Map<Integer, Item> records = new HashMap<>();
        long first = Long.MAX_VALUE; // the place of its first record
        Item prepare;
        long commitLsn;
        boolean rolledBack;

        TxLoad(long id) {
            this.id = id;
        }
    }

    private static final Comparator<Item> ORDER = Comparator.<Item>comparingLong(i -> i.major).thenComparingInt(i -> i.minor);

    /** What the load found, beside what it gave the callback. */
    static final class Result {
        long cut = 1; // the records below it are no longer needed
        long lastLsn; // the last LSN read (0: none)
        long maxId = -1;
        long windowBytes; // on disk from the cut on, as the reclaim counts it
        final List<Long> failed = new ArrayList<>(); // transactions to roll back
        final Live live = new Live();
    }

    private final String journal;
    private final Set<Byte> replaceable;

    Replay(String journal, Set<Byte> replaceable) {
        this.journal = journal;
        this.replaceable = replaceable;
    }

    private static void checkId(Result r, long id) {
        if (id > r.maxId)
            r.maxId = id;
    }

    Result run(JournalReader reader, LoaderCallback cb) throws HugepoolException {
        Result res = new Result();
        List<Records.Read> all = new ArrayList<>();
        List<byte[]> payloads = new ArrayList<>();
        long first = 0;
        for (JournalRecord rec; (rec = reader.next()) != null;) {
            Records.Read r = new Records.Read(rec.lsn(), rec.data(), journal);
            if (first == 0)
                first = r.lsn;
            else if (r.lsn != res.lastLsn + 1)
                throw new IllegalStateException("journal \"" + journal + "\": LSN " + r.lsn + " follows LSN " + res.lastLsn);
            res.lastLsn = r.lsn;
            if (r.kind == Records.CUT && r.id > res.cut)
                res.cut = r.id;
            boolean keepData = r.kind != Records.DELETE && r.kind != Records.COMMIT && r.kind != Records.ROLLBACK
                    && r.kind != Records.CUT && r.kind != Records.EVENT;
            payloads.add(keepData ? r.payload() : null);
            all.add(r); // its buffer is the reader's until next(): only its fields are used below
        }
        if (first > res.cut)
            throw new IllegalStateException("journal \"" + journal + "\" starts at LSN " + first + " but its records are needed from LSN "
                    + res.cut + ": LSN " + res.cut + " to " + (first - 1) + " were discarded by the daemon; "
                    + "is the journal configured with when_full = recycle, or truncated by another program?");

        Map<String, Item> plain = new HashMap<>();
        Map<Long, TxLoad> txs = new HashMap<>();
        long bytes = 0;
        for (int i = 0; i < all.size(); i++) {
            Records.Read r = all.get(i);
            if (r.lsn < res.cut)
                continue;
            int size = Records.onDisk(r.size);
            bytes += size;
            byte[] data = payloads.get(i);
            switch (r.kind) {
            case Records.ADD:
            case Records.UPDATE:
                checkId(res, r.id);
                keep(plain, new Item(r.major(), r.idx, r.kind, r.userType, r.id, data, size, r.lsn));
                break;
            case Records.DELETE:
                keep(plain, new Item(r.lsn, 0, r.kind, (byte) 0, r.id, null, size, r.lsn));
                break;
            case Records.ADD_TX:
            case Records.UPDATE_TX:
            case Records.DELETE_TX: {
                if (r.kind != Records.DELETE_TX)
                    checkId(res, r.id);
                TxLoad t = txs.computeIfAbsent(r.txId, TxLoad::new);
                t.first = Math.min(t.first, r.major());
                Item it = new Item(r.major(), r.idx, r.kind, r.userType, r.id, data, size, r.lsn);
                Item had = t.records.putIfAbsent(r.idx, it);
                if (had != null)
                    had.lsn = Math.max(had.lsn, r.lsn);
                break;
            }
            case Records.PREPARE: {
                TxLoad t = txs.computeIfAbsent(r.txId, TxLoad::new);
                t.first = Math.min(t.first, r.major());
                if (t.prepare == null || t.prepare.lsn < r.lsn)
                    t.prepare = new Item(r.major(), 0, r.kind, (byte) 0, 0, data, size, r.lsn);
                break;
            }
            case Records.COMMIT:
                txs.computeIfAbsent(r.txId, TxLoad::new).commitLsn = r.lsn;
                break;
            case Records.ROLLBACK:
                txs.computeIfAbsent(r.txId, TxLoad::new).rolledBack = true;
                break;
            default: // EVENT: no weight, never loaded (JournalImpl's too); CUT: read above
                break;
            }
        }
        res.windowBytes = bytes;

        // committed transactions: their records at their commit's place, positives then negatives
        List<TxLoad> open = new ArrayList<>();
        for (TxLoad t : txs.values()) {
            if (t.rolledBack)
                continue;
            if (t.commitLsn != 0) {
                for (Item it : t.records.values()) {
                    boolean neg = it.kind == Records.DELETE_TX;
                    byte kind = neg ? Records.DELETE : it.kind == Records.ADD_TX ? Records.ADD : Records.UPDATE;
                    keep(plain, new Item(t.commitLsn, neg ? Live.NEGATIVE + it.minor : it.minor, kind, it.userType, it.id,
                            it.data, it.size, it.lsn));
                }
            } else if (!t.records.isEmpty() || t.prepare != null) {
                open.add(t);
            }
        }

        List<Item> order = new ArrayList<>(plain.values());
        order.sort(ORDER);
        Live live = res.live;
        for (Item it : order) {
            switch (it.kind) {
            case Records.ADD: {
                cb.addRecord(new RecordInfo(it.id, it.userType, it.data, false, false, (short) 0));
                Live.Entry e = new Live.Entry(Records.ADD, it.major, it.minor, 0, it.size, it.lsn);
                // a plain add replaces the record; a committed transaction's extends it (JournalTransaction.commit)
                if (it.minor == 0 || !live.update(it.id, e))
                    live.add(it.id, e);
                break;
            }
            case Records.UPDATE: {
                cb.updateRecord(new RecordInfo(it.id, it.userType, it.data, true, replaceable.contains(it.userType), (short) 0));
                Live.Entry e = new Live.Entry(Records.UPDATE, it.major, it.minor, 0, it.size, it.lsn);
                // a committed transaction's update creates the record, as JournalTransaction.commit does
                if (!live.update(it.id, e) && it.minor != 0)
                    live.add(it.id, e);
                break;
            }
            default:
                cb.deleteRecord(it.id);
                live.delete(it.id);
                break;
            }
        }

        open.sort(Comparator.comparingLong(t -> t.first));
        for (TxLoad t : open) {
            List<Item> recs = new ArrayList<>(t.records.values());
            recs.sort(Comparator.comparingInt(i -> i.minor));
            List<RecordInfo> pos = new ArrayList<>(), neg = new ArrayList<>();
            for (Item it : recs) {
                if (it.kind == Records.DELETE_TX)
                    neg.add(new RecordInfo(it.id, (byte) 0, it.data, true, false, (short) 0));
                else
                    pos.add(new RecordInfo(it.id, it.userType, it.data, it.kind == Records.UPDATE_TX,
                            it.kind == Records.UPDATE_TX && replaceable.contains(it.userType), (short) 0));
            }
            if (t.prepare == null) {
                res.failed.add(t.id);
                cb.failedTransaction(t.id, pos, neg);
            } else {
                PreparedTransactionInfo info = new PreparedTransactionInfo(t.id, t.prepare.data);
                info.getRecords().addAll(pos);
                info.getRecordsToDelete().addAll(neg);
                cb.addPreparedTransaction(info);
            }
            // open in the model too, a failed one until the load's rollback of it (which needs it there)
            Live.Tx tx = live.tx(t.id);
            for (Item it : recs) {
                live.txRecord(tx, new Live.TxEntry(it.kind, it.id, it.major, it.minor, t.id, it.size, it.lsn));
                tx.nextIdx = Math.max(tx.nextIdx, it.minor + 1);
            }
            if (t.prepare != null)
                live.prepare(tx, new Live.Entry(Records.PREPARE, t.prepare.major, 0, t.id, t.prepare.size, t.prepare.lsn));
        }
        return res;
    }

    /* One item per place: an original and its copies say the same; keep where the newest lies. */
    private static void keep(Map<String, Item> plain, Item it) {
        Item had = plain.putIfAbsent(it.major + ":" + it.minor, it);
        if (had != null)
            had.lsn = Math.max(had.lsn, it.lsn);
    }

    /** JournalImpl's load into lists (its own wrapper's rules: deletes filter the list at the end). */
    static LoaderCallback into(List<RecordInfo> committed, List<PreparedTransactionInfo> prepared,
            org.apache.activemq.artemis.core.journal.TransactionFailureCallback failure, Set<Long> deletes) {
        return new LoaderCallback() {
            @Override
            public void addPreparedTransaction(PreparedTransactionInfo info) {
                prepared.add(info);
            }

            @Override
            public void addRecord(RecordInfo info) {
                committed.add(info);
            }

            @Override
            public void updateRecord(RecordInfo info) {
                committed.add(info);
            }

            @Override
            public void deleteRecord(long id) {
                deletes.add(id);
            }

            @Override
            public void failedTransaction(long txId, List<RecordInfo> records, List<RecordInfo> recordsToDelete) {
                if (failure != null)
                    failure.failedTransaction(txId, records, recordsToDelete);
            }
        };
    }

    static Predicate<RecordInfo> deleted(Set<Long> deletes) {
        return r -> deletes.contains(r.id);
    }
}
