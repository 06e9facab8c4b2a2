/*
 * SPDX-License-Identifier: MIT
 *
 * Live.java - what a HugepoolJournal's records still mean: JournalImpl's `records` map (the ids
 * added and not deleted, each with every record that is part of it) and its open transactions,
 * each record remembered by where it lies in the hugepool journal (its LSN, or its newest copy's)
 * and where it belongs in the journal's order (its place: the LSN it had first, or its
 * transaction's commit's, and its place in that transaction). Nothing here holds a record's bytes:
 * a reclaim reads them back from the journal (HugepoolJournal.reclaim), but it counts their size on
 * disk: `bytes`, what a reclaim would copy, which sets when one is worth it.
 *
 * The rules are JournalImpl's: a plain add replaces what the id had; a plain update of an id not
 * live is not written at all; a committed transaction's adds and updates create or extend the
 * record (its positives), then its deletes remove records (its negatives). Owned by the journal's
 * one thread (HugepoolJournal's appender), or by Replay before that thread starts: no locks.
 */
package org.hugepool.artemis;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Live {
    /** One record that is still needed, and what a copy of it must say. */
    static class Entry {
        final byte copyKind; // the kind a copy is written as
        final long major; // its place in the journal's order
        final int minor;
        final long txId; // the open transaction it belongs to; 0 once committed
        final int size; // on disk (Records.onDisk), the same for every copy
        long lsn; // where it lies now (the newest copy)
        boolean dead; // no longer part of the model (a reclaim that chose it skips it)

        Entry(byte copyKind, long major, int minor, long txId, int size, long lsn) {
            this.copyKind = copyKind;
            this.major = major;
            this.minor = minor;
            this.txId = txId;
            this.size = size;
            this.lsn = lsn;
        }
    }

    /** A transactional record of an open transaction. */
    static final class TxEntry extends Entry {
        final long id;

        TxEntry(byte kind, long id, long major, int idx, long txId, int size, long lsn) {
            super(kind, major, idx, txId, size, lsn);
            this.id = id;
        }
    }

    /** An open transaction: its records so far, and its prepare. */
    static final class Tx {
        final long id;
        final List<TxEntry> records = new ArrayList<>();
        Entry prepare;
        int nextIdx = 1;

        Tx(long id) {
            this.id = id;
        }
    }

    /* Negatives follow a transaction's positives in the order the load gives them, as
     * JournalImpl's commit applies them (Replay keys them with this bias). */
    static final int NEGATIVE = 1 << 30;

    /*
     * A committed transaction's delete, needed while its commit is: a load that finds a commit
     * applies the records of its transaction it finds, so a commit that lies above a cut needs its
     * deletes above it too, or the records they delete come back (a reclaim may have carried them
     * forward before the commit). Needed until a cut passes the commit (cut()). Not in `bytes`:
     * a reclaim planned from now cuts above the commit and copies none of them; only one under way
     * when the commit came does.
     */
    private record Negative(TxEntry e, long commitLsn) {
    }

    final Map<Long, List<Entry>> records = new HashMap<>();
    final Map<Long, Tx> txs = new LinkedHashMap<>();
    private final List<Negative> negatives = new ArrayList<>();
    long bytes; // the size on disk of every entry not dead: of records, transactions' records, prepares (not negatives)

    boolean contains(long id) {
        return records.containsKey(id);
    }

    void add(long id, Entry e) {
        List<Entry> l = new ArrayList<>(2);
        l.add(e);
        bytes += e.size;
        bury(records.put(id, l));
    }

    private void bury(List<? extends Entry> l) {
        if (l != null)
            for (Entry e : l)
                bury(e);
    }

    private void bury(Entry e) {
        if (e != null && !e.dead) {
            e.dead = true;
            bytes -= e.size;
        }
    }

    /** @return false when the id is not live (JournalImpl then writes nothing) */
    boolean update(long id, Entry e) {
        List<Entry> l = records.get(id);
        if (l == null)
            return false;
        l.add(e);
        bytes += e.size;
        return true;
    }

    boolean delete(long id) {
        List<Entry> l = records.remove(id);
        bury(l);
        return l != null;
    }

    void rollback(Tx tx) {
        txs.remove(tx.id);
        bury(tx.records);
        bury(tx.prepare);
    }

    Tx tx(long txId) {
        return txs.computeIfAbsent(txId, Tx::new);
    }

    /** A record of open transaction tx. */
    void txRecord(Tx tx, TxEntry e) {
        tx.records.add(e);
        bytes += e.size;
    }

    /** tx's prepare (a second one replaces the first, as in JournalImpl's load). */
    void prepare(Tx tx, Entry e) {
        bury(tx.prepare);
        tx.prepare = e;
        bytes += e.size;
    }

    /** Commit tx at commitLsn: positives in order, then negatives. */
    void commit(Tx tx, long commitLsn) {
        txs.remove(tx.id);
        for (TxEntry r : tx.records) {
            if (r.copyKind == Records.DELETE_TX)
                continue;
            Entry e = new Entry(r.copyKind == Records.ADD_TX ? Records.ADD : Records.UPDATE, commitLsn, r.minor, 0, r.size,
                    r.lsn);
            if (!update(r.id, e))
                add(r.id, e);
        }
        for (TxEntry r : tx.records) {
            if (r.copyKind == Records.DELETE_TX) {
                delete(r.id);
                negatives.add(new Negative(r, commitLsn));
                bytes -= r.size;
            } else {
                bury(r);
            }
        }
        bury(tx.prepare);
    }

    /** A cut at lsn is durable: the deletes of transactions committed below it are no longer needed. */
    void cut(long lsn) {
        negatives.removeIf(n -> {
            if (n.commitLsn >= lsn)
                return false;
            n.e.dead = true; // its bytes left `bytes` at the commit
            return true;
        });
    }

    /** Every record lying below lsn that a cut at lsn must carry forward: live records, the open
     * transactions' and their prepares, the deletes of transactions committed at lsn or above. */
    List<Entry> below(long lsn) {
        List<Entry> out = new ArrayList<>();
        for (List<Entry> l : records.values())
            for (Entry e : l)
                if (e.lsn < lsn)
                    out.add(e);
        for (Tx tx : txs.values()) {
            for (Entry e : tx.records)
                if (e.lsn < lsn)
                    out.add(e);
            if (tx.prepare != null && tx.prepare.lsn < lsn)
                out.add(tx.prepare);
        }
        for (Negative n : negatives)
            if (n.e.lsn < lsn && n.commitLsn >= lsn)
                out.add(n.e);
        return out;
    }
}
