/*
 * SPDX-License-Identifier: MIT
 *
 * Import.java - a broker switched to hugepool keeps what its own journal files held
 * (hugepool-artemis(7) "Switching a broker that has run"): on the first start of a hugepool
 * journal that has never had a record, the broker's journal files of the same kind (message or
 * bindings) are read as Artemis reads them, with a JournalImpl of its own over NIO, and their
 * committed records and prepared transactions are appended to the hugepool journal, durable
 * before the broker loads it. The files are renamed NAME.importing first and NAME.imported at
 * the end, names Artemis does not read: a later start neither imports them again nor, back on
 * files, finds messages delivered since, and one that finds NAME.importing (the broker stopped
 * mid-import) imports them again over what the hugepool journal got of them. Files that hold
 * no record are renamed too. Transactions that never completed are left out, as Artemis's own
 * load rolls them back. A hugepool journal that has records beside files that hold some is
 * refused: which of the two is the broker's is for the operator to say.
 */
package org.hugepool.artemis;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

import org.apache.activemq.artemis.core.io.nio.NIOSequentialFileFactory;
import org.apache.activemq.artemis.core.journal.Journal;
import org.apache.activemq.artemis.core.journal.PreparedTransactionInfo;
import org.apache.activemq.artemis.core.journal.RecordInfo;
import org.apache.activemq.artemis.core.journal.impl.JournalImpl;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The import of one broker journal's files into a started, not loaded, HugepoolJournal. */
final class Import {
    private static final Logger log = LoggerFactory.getLogger(Import.class);
    static final String SUFFIX = ".imported";
    static final String IMPORTING = ".importing";

    private Import() {
    }

    /* What a journal's files hold, as Artemis's load gives it. */
    private record Held(List<RecordInfo> committed, List<PreparedTransactionInfo> prepared) {
        boolean empty() {
            return committed.isEmpty() && prepared.isEmpty();
        }
    }

    /* The broker's journal files of files' kind named prefix-N.ext: its directory's, in no order. */
    private static List<Path> journalFiles(JournalImpl files, String ext) throws IOException {
        File dir = files.getFileFactory().getDirectory();
        List<Path> found = new ArrayList<>();
        if (dir == null || !dir.isDirectory())
            return found;
        String prefix = files.getFilePrefix() + "-", end = "." + ext;
        try (var list = Files.list(dir.toPath())) {
            list.filter(p -> {
                String n = p.getFileName().toString();
                return n.startsWith(prefix) && n.endsWith(end) && Files.isRegularFile(p);
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

    /* Read the prefix-N.ext files as Artemis's load does, with a JournalImpl of its own over NIO. */
    private static Held read(JournalImpl files, String ext) throws Exception {
        List<RecordInfo> committed = new ArrayList<>();
        List<PreparedTransactionInfo> prepared = new ArrayList<>();
        NIOSequentialFileFactory nio = new NIOSequentialFileFactory(files.getFileFactory().getDirectory(), 1);
        JournalImpl reader = new JournalImpl(files.getFileSize(), 2, 2, 0, 0, nio, files.getFilePrefix(), ext, 1);
        nio.start();
        try {
            reader.start();
            try {
                reader.load(committed, prepared, (tx, records, deletes) -> {
                    // never completed: Artemis's own load rolls it back, and so does this one
                }, false);
            } finally {
                reader.stop();
            }
        } finally {
            nio.stop();
        }
        return new Held(committed, prepared);
    }

    /**
     * Import what the broker's journal files of old's kind hold into hp, if hp has never had a
     * record, and rename the files; the records imported (0: none, or no files). hp is started
     * and not loaded, and is so again on return. The files are renamed NAME.importing before the
     * first record goes to hp and NAME.imported once all are durable: a start that finds
     * NAME.importing files (the broker stopped in between) discards what hp holds and imports
     * them again.
     *
     * @param old the broker's own journal of that kind, never started (its files, prefix and size)
     * @throws IllegalStateException hp has records and the files do too, or they cannot be read
     */
    static long run(Journal old, HugepoolJournal hp, String kind) throws Exception {
        if (!(old instanceof JournalImpl files))
            return 0; // a broker whose journal is not Artemis's files: nothing to import
        String ext = files.getFileExtension(), importing = ext + IMPORTING;
        String what = kind + " journal files in " + files.getFileFactory().getDirectory();
        boolean again = !journalFiles(files, importing).isEmpty();
        Held held;
        if (again) {
            log.warn("hugepool-artemis: an import of the broker's {} was cut short; importing them again", what);
            held = read(files, importing);
        } else {
            if (journalFiles(files, ext).isEmpty())
                return 0;
            held = read(files, ext);
            if (held.empty()) {
                renameAll(files, ext, SUFFIX); // nothing to import: out of the way, not read at every start
                log.info("hugepool-artemis: the broker's {} hold no records; renamed *{}", what, SUFFIX);
                return 0;
            }
            if (!hp.fresh())
                throw new IllegalStateException(hp.where() + " has records, and the broker's " + what + " hold "
                        + held.committed.size() + " records and " + held.prepared.size() + " prepared transactions as"
                        + " well: start it on one of the two (move those files away, or empty the hugepool journal:"
                        + " hugepool-artemis(7))");
            // reading them, the JournalImpl may have made another file (its next): renamed with them
            renameAll(files, ext, IMPORTING);
        }

        hp.loadInternalOnly();
        if (again) { // what the import cut short appended: dead, durably, before it starts again
            hp.discardAll();
            hp.stop();
            hp.start();
            hp.loadInternalOnly();
        }
        long bytes = 0;
        for (RecordInfo r : held.committed)
            bytes += Records.onDisk(Records.HEADER + (r.data == null ? 0 : r.data.length));
        for (PreparedTransactionInfo t : held.prepared)
            for (RecordInfo r : t.getRecords())
                bytes += Records.onDisk(Records.HEADER + (r.data == null ? 0 : r.data.length));
        hp.checkRoomFor(bytes); // what is imported waits for no consumer: it must fit at once
        long n = 0;
        for (RecordInfo r : held.committed) {
            if (r.isUpdate)
                hp.appendUpdateRecord(r.id, r.userRecordType, r.data, false);
            else
                hp.appendAddRecord(r.id, r.userRecordType, r.data, false);
            n++;
        }
        for (PreparedTransactionInfo t : held.prepared) {
            for (RecordInfo r : t.getRecords()) {
                if (r.isUpdate)
                    hp.appendUpdateRecordTransactional(t.getId(), r.id, r.userRecordType, r.data);
                else
                    hp.appendAddRecordTransactional(t.getId(), r.id, r.userRecordType, r.data);
                n++;
            }
            for (RecordInfo r : t.getRecordsToDelete()) {
                hp.appendDeleteRecordTransactional(t.getId(), r.id);
                n++;
            }
            hp.appendPrepareRecord(t.getId(), t.getExtraData(), false);
        }
        hp.flush(); // every record durable before the files are renamed
        hp.stop();
        hp.start();
        renameAll(files, importing, SUFFIX);
        log.info("hugepool-artemis: imported {} records and {} prepared transactions from the broker's {} into {};"
                + " the files are renamed *{}", held.committed.size(), held.prepared.size(), what, hp.where(), SUFFIX);
        return n;
    }
}
