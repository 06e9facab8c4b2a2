/*
 * SPDX-License-Identifier: MIT
 *
 * Import.java - a broker switched to hugepool keeps what its own journal files held
 * (hugepool-artemis(7) "Switching a broker that has run"): at the start of a hugepool journal
 * that holds no record (never had one, or emptied by Export), the broker's journal files of the
 * same kind (message or bindings) are read as Artemis reads them, with a JournalImpl of its own
 * over NIO, and their committed records and prepared transactions are appended to the hugepool
 * journal, durable before the broker loads it. The files are renamed NAME.importing first and
 * NAME.imported at the end, names Artemis does not read: a later start neither imports them
 * again nor, back on files, finds messages delivered since; files that hold exactly what the
 * hugepool journal holds (a copy of it) are only renamed; and a start that finds NAME.importing
 * (the broker stopped mid-import) imports them again over what the hugepool journal got of
 * them, once that is seen to be some of what they hold and nothing else (not a journal the
 * broker was pointed at since). Files that hold no record are renamed too. Transactions that
 * never completed are left out, as Artemis's own load rolls them back. A hugepool journal that
 * has records beside files that hold others is refused: which of the two is the broker's is for
 * the operator to say.
 */
package org.hugepool.artemis;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.activemq.artemis.core.io.nio.NIOSequentialFileFactory;
import org.apache.activemq.artemis.core.journal.Journal;
import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.apache.activemq.artemis.core.journal.impl.JournalImpl;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The import of one broker journal's files into a started, not loaded, HugepoolJournal: planned, then run. */
final class Import {
    private static final Logger log = LoggerFactory.getLogger(Import.class);
    static final String SUFFIX = ".imported";
    static final String IMPORTING = ".importing";

    /* What a journal holds, as Artemis's load gives it (Export's too). */
    record Held(List<RecordInfo> committed, List<PreparedTransactionInfo> prepared) {
        boolean empty() {
            return committed.isEmpty() && prepared.isEmpty();
        }

        /* Their bytes in a hugepool journal, as its live bytes count them. */
        long bytes() {
            long b = 0;
            for (RecordInfo r : committed)
                b += Records.onDisk(Records.HEADER + (r.data == null ? 0 : r.data.length));
            for (PreparedTransactionInfo t : prepared)
                for (RecordInfo r : t.getRecords())
                    b += Records.onDisk(Records.HEADER + (r.data == null ? 0 : r.data.length));
            return b;
        }

        /*
         * Every committed record of this one is one of other's (by id, kind, type and bytes, as
         * many times), and every prepared transaction's id one of other's: what an import of
         * other cut short got, and nothing else.
         */
        boolean within(Held other) {
            Map<List<Object>, Integer> left = new HashMap<>();
            for (RecordInfo r : other.committed)
                left.merge(key(r), 1, Integer::sum);
            for (RecordInfo r : committed)
                if (left.merge(key(r), -1, Integer::sum) < 0)
                    return false;
            Set<Long> txs = new HashSet<>();
            for (PreparedTransactionInfo t : other.prepared)
                txs.add(t.getId());
            for (PreparedTransactionInfo t : prepared)
                if (!txs.contains(t.getId()))
                    return false;
            return true;
        }

        /*
         * The same as other: the same committed records (by id, kind, type and bytes, as many
         * times) and the same prepared transactions, record for record. Files that hold the same
         * as a hugepool journal are a copy of it (Export --keep, or an export cut short before it
         * emptied the journal).
         */
        boolean same(Held other) {
            return committed.size() == other.committed.size() && within(other) && preparedKeys().equals(other.preparedKeys());
        }

        private Map<Long, List<Object>> preparedKeys() {
            Map<Long, List<Object>> m = new HashMap<>();
            for (PreparedTransactionInfo t : prepared) {
                List<Object> k = new ArrayList<>();
                k.add(ByteBuffer.wrap(t.getExtraData() == null ? new byte[0] : t.getExtraData()));
                for (RecordInfo r : t.getRecords())
                    k.add(key(r));
                for (RecordInfo r : t.getRecordsToDelete())
                    k.add(r.id);
                m.put(t.getId(), k);
            }
            return m;
        }

        private static List<Object> key(RecordInfo r) {
            return List.of(r.id, r.isUpdate, r.userRecordType, ByteBuffer.wrap(r.data == null ? new byte[0] : r.data));
        }
    }

    /* The broker's journal files of files' kind named prefix-N.ext: its directory's, in no order. */
    private static List<Path> journalFiles(JournalImpl files, String ext) throws IOException {
        return journalFiles(files.getFileFactory().getDirectory(), files.getFilePrefix(), ext);
    }

    /* The journal files prefix-N.ext in dir (Export's check too), in no order. */
    static List<Path> journalFiles(File dir, String prefix, String ext) throws IOException {
        List<Path> found = new ArrayList<>();
        if (dir == null || !dir.isDirectory())
            return found;
        String start = prefix + "-", end = "." + ext;
        try (var list = Files.list(dir.toPath())) {
            list.filter(p -> {
                String n = p.getFileName().toString();
                return n.startsWith(start) && n.endsWith(end) && Files.isRegularFile(p);
            }).forEach(found::add);
        }
        return found;
    }

    /* Rename the prefix-N.ext files to prefix-N.EXT + suffix, EXT the journal's own extension. */
    private static void renameAll(JournalImpl files, String ext, String suffix) throws IOException {
        String base = files.getFileExtension();
        for (Path p : journalFiles(files, ext)) {
            String n = p.getFileName().toString();
            Files.move(p, p.resolveSibling(n.substring(0, n.length() - ext.length()) + base + suffix),
                    StandardCopyOption.ATOMIC_MOVE);
        }
    }

    /*
     * Append to `to` what a load gave: the committed records in their order, then each prepared
     * transaction's records and its prepare, none synced (the caller makes them durable); the
     * records appended. Import's and Export's one way of writing a journal's contents.
     */
    static long append(Journal to, List<RecordInfo> committed, List<PreparedTransactionInfo> prepared) throws Exception {
        long n = 0;
        for (RecordInfo r : committed) {
            if (r.isUpdate)
                to.appendUpdateRecord(r.id, r.userRecordType, r.data, false);
            else
                to.appendAddRecord(r.id, r.userRecordType, r.data, false);
            n++;
        }
        for (PreparedTransactionInfo t : prepared) {
            for (RecordInfo r : t.getRecords()) {
                if (r.isUpdate)
                    to.appendUpdateRecordTransactional(t.getId(), r.id, r.userRecordType, r.data);
                else
                    to.appendAddRecordTransactional(t.getId(), r.id, r.userRecordType, r.data);
                n++;
            }
            for (RecordInfo r : t.getRecordsToDelete()) {
                to.appendDeleteRecordTransactional(t.getId(), r.id);
                n++;
            }
            to.appendPrepareRecord(t.getId(), t.getExtraData(), false);
        }
        return n;
    }

    /* What started journal j holds, loaded as the broker loads it (Export's read too). */
    static Held load(Journal j) throws Exception {
        List<RecordInfo> committed = new ArrayList<>();
        List<PreparedTransactionInfo> prepared = new ArrayList<>();
        j.load(committed, prepared, (tx, records, deletes) -> {
            // never completed: Artemis's own load rolls it back, and so does this one
        }, false);
        return new Held(committed, prepared);
    }

    /*
     * What started, not loaded, hp holds as the broker would load it (one that has had records
     * may hold none: all deleted, or emptied by Export's CUT); started and not loaded again on
     * return.
     */
    private static Held holds(HugepoolJournal hp) throws Exception {
        if (hp.fresh())
            return new Held(List.of(), List.of());
        Held h = load(hp);
        hp.stop();
        hp.start();
        return h;
    }

    /* Read files' prefix-N.ext files as Artemis's load does. */
    private static Held read(JournalImpl files, String ext) throws Exception {
        return read(files.getFileFactory().getDirectory(), files.getFilePrefix(), ext, files.getFileSize());
    }

    /*
     * Read dir's prefix-N.ext files (of fileSize bytes) as Artemis's load does, with a JournalImpl
     * of its own over NIO (Export's check too); the directory left with the same files.
     */
    static Held read(File dir, String prefix, String ext, int fileSize) throws Exception {
        List<Path> before = journalFiles(dir, prefix, ext);
        NIOSequentialFileFactory nio = new NIOSequentialFileFactory(dir, 1);
        JournalImpl reader = new JournalImpl(fileSize, 2, 2, 0, 0, nio, prefix, ext, 1);
        nio.start();
        try {
            reader.start();
            try {
                return load(reader);
            } finally {
                reader.stop();
            }
        } finally {
            nio.stop();
            // a load opens a file to append to next (empty, journal-file-size bytes): the reader's, not the broker's
            for (Path p : journalFiles(dir, prefix, ext))
                if (!before.contains(p))
                    Files.deleteIfExists(p);
        }
    }

    private final JournalImpl files;
    private final HugepoolJournal hp;
    private final String what; // the files, as messages name them
    private final boolean again; // an import cut short: its files are named NAME.importing
    private final boolean copy; // the files hold what hp holds: nothing to import
    private final Held held;

    private Import(JournalImpl files, HugepoolJournal hp, String what, boolean again, boolean copy, Held held) {
        this.files = files;
        this.hp = hp;
        this.what = what;
        this.again = again;
        this.copy = copy;
        this.held = held;
    }

    /**
     * What importing the broker's journal files of old's kind into hp would do, checked and
     * nothing changed (but an import cut short mid-renaming has its renaming finished): null when
     * there are no files; an import of nothing (files that hold no record: run renames them); an
     * import of what they hold when hp holds no record; an import again over what hp got
     * of them when they are named NAME.importing (an import cut short); an import of nothing
     * when they hold exactly what hp holds (a copy of it: Export --keep, or an export cut short
     * between its two emptyings; run renames them). The plugin plans both
     * journals' imports before it runs one, so that a refusal leaves both kinds of files as they
     * were.
     *
     * @param old the broker's own journal of that kind, never started (its files, prefix and size)
     * @param hp the HugepoolJournal of that kind, started and not loaded
     * @throws IllegalStateException hp has records and the files do too, what they hold does not
     *         fit hp at once (no consumer frees room during an import), or they cannot be read
     */
    static Import plan(Journal old, HugepoolJournal hp, String kind) throws Exception {
        if (!(old instanceof JournalImpl files))
            return null; // a broker whose journal is not Artemis's files: nothing to import
        String ext = files.getFileExtension();
        String what = kind + " journal files in " + files.getFileFactory().getDirectory();
        boolean again = !journalFiles(files, ext + IMPORTING).isEmpty();
        if (!again && journalFiles(files, ext).isEmpty())
            return null;
        // the renaming the import cut short may have been cut short too: finished, so that all are read
        if (again)
            renameAll(files, ext, IMPORTING);
        Held held = read(files, again ? ext + IMPORTING : ext);
        // an import cut short is done again over what hp got of it, which is dead first: unless
        // hp holds what the files do not (the broker pointed at another journal since), lost then
        if (again && !holds(hp).within(held))
            throw new IllegalStateException(hp.where() + " holds records that the broker's " + what + " do not, and"
                    + " their import into a hugepool journal was cut short (they are named *" + IMPORTING + "): start the"
                    + " broker on the journal they went into to finish it, or rename them without " + IMPORTING
                    + " to import them afresh (hugepool-artemis(7))");
        if (!again && !held.empty()) {
            Held in = holds(hp);
            if (in.same(held)) // a copy of hp (held has records, so hp too)
                return new Import(files, hp, what, false, true, held);
            if (!in.empty())
                throw new IllegalStateException(hp.where() + " has records, and the broker's " + what + " hold "
                        + held.committed.size() + " records and " + held.prepared.size() + " prepared transactions as"
                        + " well: start it on one of the two (move those files away, or export the hugepool journals"
                        + " to other directories, which empties them: hugepool-artemis(7))");
        }
        hp.checkRoomFor(held.bytes());
        return new Import(files, hp, what, again, false, held);
    }

    /**
     * Do it: the files renamed NAME.importing before the first record goes to hp, and
     * NAME.imported once all are durable; the records imported. hp is started and not loaded on
     * return, as before.
     */
    long run() throws Exception {
        String ext = files.getFileExtension();
        if (held.empty() && !again) {
            renameAll(files, ext, SUFFIX); // nothing to import: out of the way, not read at every start
            log.info("hugepool-artemis: the broker's {} hold no records; renamed *{}", what, SUFFIX);
            return 0;
        }
        if (copy) { // out of the way too: the broker's records go on in hp, and the copy would differ
            renameAll(files, ext, SUFFIX);
            log.info("hugepool-artemis: the broker's {} hold what {} holds ({} records and {} prepared transactions:"
                    + " a copy, exported with --keep or by an export cut short); not imported, renamed *{}", what,
                    hp.where(), held.committed.size(), held.prepared.size(), SUFFIX);
            return 0;
        }
        if (again)
            log.warn("hugepool-artemis: an import of the broker's {} was cut short; importing them again", what);
        else
            renameAll(files, ext, IMPORTING); // from here on, a start that finds them imports them again
        hp.loadInternalOnly();
        if (again) { // what the import cut short appended: dead, durably, before it starts again
            hp.discardAll();
            hp.stop();
            hp.start();
            hp.loadInternalOnly();
        }
        long n = append(hp, held.committed, held.prepared);
        hp.flush(); // every record durable before the files are renamed
        hp.stop();
        hp.start();
        renameAll(files, ext + IMPORTING, SUFFIX);
        log.info("hugepool-artemis: imported {} records and {} prepared transactions from the broker's {} into {};"
                + " the files are renamed *{}", held.committed.size(), held.prepared.size(), what, hp.where(), SUFFIX);
        return n;
    }
}
