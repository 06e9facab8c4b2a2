/*
 * SPDX-License-Identifier: MIT
 *
 * Workload.java - the same random sequence of journal operations for several Journals at once
 * (SameAsJournalImplTest: Artemis's JournalImpl and a HugepoolJournal): plain adds, updates and
 * deletes, and transactions of adds, updates and deletes that are prepared, committed or rolled
 * back, or left open, with most live records deleted every 500 operations. A seed makes the
 * sequence; ids start at a base so that two workloads on the same journals never touch each
 * other's records. `describe` turns a load into text, the form two loads are compared in. main()
 * is the child JVM the kill case runs: it loads both journals, runs a workload, makes it durable,
 * says SYNCED and waits to be killed.
 */
package org.hugepool.artemis;

import java.io.File;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.apache.activemq.artemis.core.io.nio.NIOSequentialFileFactory;
import org.apache.activemq.artemis.core.journal.Journal;
import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.apache.activemq.artemis.core.journal.impl.JournalImpl;

final class Workload {
    private final Random r;
    private long nextId, nextTx;
    private final List<Long> live = new ArrayList<>();
    private final List<Long> open = new ArrayList<>();
    private final Map<Long, List<Long>> txAdds = new HashMap<>(), txUpdates = new HashMap<>(), txDeletes = new HashMap<>();
    final List<Long> prepared = new ArrayList<>();

    Workload(long seed, long idBase) {
        r = new Random(seed);
        nextId = idBase;
        nextTx = idBase + 500_000_000L;
    }

    private byte[] data() {
        byte[] d = new byte[r.nextInt(1200)];
        r.nextBytes(d);
        return d;
    }

    private static <T> T pick(Random r, List<T> l) {
        return l.get(r.nextInt(l.size()));
    }

    private long openTx() {
        if (open.isEmpty() || r.nextInt(4) == 0) {
            long tx = nextTx++;
            open.add(tx);
            txAdds.put(tx, new ArrayList<>());
            txDeletes.put(tx, new ArrayList<>());
            txUpdates.put(tx, new ArrayList<>());
            return tx;
        }
        return pick(r, open);
    }

    /** One operation, the same on every journal. */
    void step(Journal... js) throws Exception {
        int k = r.nextInt(100);
        if (k < 30) {
            long id = nextId++;
            byte type = (byte) (1 + r.nextInt(40));
            byte[] d = data();
            for (Journal j : js)
                j.appendAddRecord(id, type, d, false);
            live.add(id);
        } else if (k < 45 && !live.isEmpty()) {
            long id = pick(r, live);
            byte type = (byte) (1 + r.nextInt(40));
            byte[] d = data();
            for (Journal j : js)
                j.appendUpdateRecord(id, type, d, false);
        } else if (k < 57 && !live.isEmpty()) {
            long id = live.remove(r.nextInt(live.size()));
            for (Journal j : js)
                j.appendDeleteRecord(id, false);
        } else if (k < 68) {
            long tx = openTx(), id = nextId++;
            byte type = (byte) (1 + r.nextInt(40));
            byte[] d = data();
            for (Journal j : js)
                j.appendAddRecordTransactional(tx, id, type, d);
            txAdds.get(tx).add(id);
        } else if (k < 74 && !live.isEmpty()) {
            // the record is the transaction's until it ends: JournalImpl's own load of a record
            // deleted before the commit of its update depends on whether it compacted since
            long tx = openTx(), id = live.remove(r.nextInt(live.size()));
            byte type = (byte) (1 + r.nextInt(40));
            byte[] d = data();
            for (Journal j : js)
                j.appendUpdateRecordTransactional(tx, id, type, d);
            txUpdates.get(tx).add(id);
        } else if (k < 79 && !live.isEmpty()) {
            long tx = openTx(), id = live.remove(r.nextInt(live.size()));
            byte[] d = r.nextBoolean() ? data() : new byte[0];
            for (Journal j : js)
                j.appendDeleteRecordTransactional(tx, id, d);
            txDeletes.get(tx).add(id);
        } else if (k < 84 && !open.isEmpty()) {
            long tx = open.remove(r.nextInt(open.size()));
            byte[] d = data();
            for (Journal j : js)
                j.appendPrepareRecord(tx, d, false);
            prepared.add(tx);
        } else if (k < 93 && (!open.isEmpty() || !prepared.isEmpty())) {
            long tx = end();
            for (Journal j : js)
                j.appendCommitRecord(tx, false);
            live.addAll(txAdds.remove(tx));
            live.addAll(txUpdates.remove(tx));
            txDeletes.remove(tx);
        } else if (!open.isEmpty() || !prepared.isEmpty()) {
            long tx = end();
            for (Journal j : js)
                j.appendRollbackRecord(tx, false);
            txAdds.remove(tx);
            live.addAll(txUpdates.remove(tx));
            live.addAll(txDeletes.remove(tx));
        }
    }

    /** A transaction of an add and an update, prepared and left so. */
    void prepareOne(Journal... js) throws Exception {
        long tx = nextTx++, id = nextId++;
        byte[] d = data();
        for (Journal j : js) {
            j.appendAddRecordTransactional(tx, id, (byte) 7, d);
            j.appendUpdateRecordTransactional(tx, id, (byte) 8, d);
            j.appendPrepareRecord(tx, d, false);
        }
        prepared.add(tx);
    }

    private long end() {
        int n = r.nextInt(open.size() + prepared.size());
        return n < open.size() ? open.remove(n) : prepared.remove(n - open.size());
    }

    /*
     * n operations, and after each 500 nine in ten of the live records deleted, as a broker's
     * consumers delete the messages they got: most of what is written dies, as in a broker, so
     * that a reclaim (which runs once the live records are a third of the journal or less) has
     * something to drop.
     */
    void run(int n, Journal... js) throws Exception {
        for (int i = 0; i < n; i++) {
            step(js);
            if (i % 500 == 499)
                consume(js);
        }
    }

    private void consume(Journal... js) throws Exception {
        for (int k = live.size() * 9 / 10; k > 0; k--) {
            long id = live.remove(r.nextInt(live.size()));
            for (Journal j : js)
                j.appendDeleteRecord(id, false);
        }
    }

    /** Everything appended so far durable, on every journal (a sync add of a record, then its delete). */
    void sync(Journal... js) throws Exception {
        long id = nextId++;
        for (Journal j : js) {
            j.appendAddRecord(id, (byte) 1, new byte[] { 1 }, true);
            j.appendDeleteRecord(id, true);
        }
    }

    // --- loads as text -------------------------------------------------------------------------

    private static String rec(RecordInfo i) {
        return (i.isUpdate ? "U " : "A ") + i.id + " t" + i.userRecordType + " " + HexFormat.of().formatHex(i.data);
    }

    /** A journal's load as text: committed records in order, prepared and failed transactions. */
    static String describe(Journal j) throws Exception {
        List<RecordInfo> committed = new ArrayList<>();
        List<PreparedTransactionInfo> prepared = new ArrayList<>();
        StringBuilder failed = new StringBuilder();
        j.load(committed, prepared, (tx, recs, dels) -> {
            failed.append("F ").append(tx).append('\n');
            for (RecordInfo i : recs)
                failed.append("  ").append(rec(i)).append('\n');
            for (RecordInfo i : dels)
                failed.append("  D ").append(i.id).append(' ').append(HexFormat.of().formatHex(i.data)).append('\n');
        });
        StringBuilder s = new StringBuilder();
        for (RecordInfo i : committed)
            s.append(rec(i)).append('\n');
        for (PreparedTransactionInfo p : prepared) {
            s.append("P ").append(p.getId()).append(' ').append(HexFormat.of().formatHex(p.getExtraData())).append('\n');
            for (RecordInfo i : p.getRecords())
                s.append("  ").append(rec(i)).append('\n');
            for (RecordInfo i : p.getRecordsToDelete())
                s.append("  D ").append(i.id).append(' ').append(HexFormat.of().formatHex(i.data)).append('\n');
        }
        s.append(failed);
        s.append("live ").append(j.getNumberOfRecords()).append('\n');
        return s.toString();
    }

    // --- the journals --------------------------------------------------------------------------

    /** Artemis's own journal on NIO, buffered, as a broker's with 1 MiB files and no compaction. */
    static JournalImpl artemis(File dir) throws Exception {
        dir.mkdirs();
        NIOSequentialFileFactory f = new NIOSequentialFileFactory(dir, true, 490 * 1024, 500_000, 1, false);
        JournalImpl j = new JournalImpl(1 << 20, 2, 10, 0, 0, f, "activemq-data", "amq", 1);
        j.start();
        return j;
    }

    static HugepoolJournal hugepool(String socket, String name, long reclaimAt) throws Exception {
        HugepoolJournal j = new HugepoolJournal(socket, name, reclaimAt, Duration.ofSeconds(30), null);
        j.start();
        return j;
    }

    /* The kill case's child: SOCKET JOURNAL ARTEMIS_DIR SEED OPS RECLAIM_AT ID_BASE */
    public static void main(String[] a) throws Exception {
        JournalImpl art = artemis(new File(a[2]));
        HugepoolJournal hp = hugepool(a[0], a[1], Long.parseLong(a[5]));
        art.loadInternalOnly();
        hp.loadInternalOnly();
        Workload w = new Workload(Long.parseLong(a[3]), Long.parseLong(a[6]));
        w.run(Integer.parseInt(a[4]), art, hp);
        w.prepareOne(art, hp);
        w.sync(art, hp);
        System.out.println("SYNCED " + hp.reclaims());
        System.out.flush();
        System.in.read(); // killed here
    }
}
