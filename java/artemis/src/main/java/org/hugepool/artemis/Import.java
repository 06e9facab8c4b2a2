/*
 * SPDX-License-Identifier: MIT
 *
 * Import.java - a broker switched to hugepool keeps what its own journal files held
 * (hugepool-artemis(7) "Switching a broker that has run"): on the first start of a hugepool
 * journal that has never had a record, the broker's journal files of the same kind (message or
 * bindings) are read as Artemis reads them, with a JournalImpl of its own over NIO, and their
 * committed records and prepared transactions are appended to the hugepool journal, durable
 * before the broker loads it; then the files are renamed NAME.imported, which Artemis no longer
 * reads, so that a later start neither imports them again nor, back on files, finds messages
 * delivered since (files that hold no record are renamed too). Transactions that never completed are left out, as Artemis's own load rolls
 * them back. A hugepool journal that has records and files that hold some as well is refused:
 * which of the two is the broker's is for the operator to say.
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

    private Import() {
    }

    /* The broker's journal files of files' kind: its directory's prefix-N.ext files, in no order. */
    private static List<Path> journalFiles(JournalImpl files) throws IOException {
        File dir = files.getFileFactory().getDirectory();
        List<Path> found = new ArrayList<>();
        if (dir == null || !dir.isDirectory())
            return found;
        String prefix = files.getFilePrefix() + "-", ext = "." + files.getFileExtension();
        try (var list = Files.list(dir.toPath())) {
            list.filter(p -> {
                String n = p.getFileName().toString();
                return n.startsWith(prefix) && n.endsWith(ext) && Files.isRegularFile(p);
            }).forEach(found::add);
        }
        return found;
    }

    /* Rename them all, listed again: reading them, the JournalImpl may have made another (its next file). */
    private static void renameAll(JournalImpl files) throws IOException {
        for (Path p : journalFiles(files))
            Files.move(p, p.resolveSibling(p.getFileName() + SUFFIX), StandardCopyOption.ATOMIC_MOVE);
    }

    /**
     * Import what the broker's journal files of old's kind hold into hp, if hp has never had a
     * record, and rename the files; the records imported (0: none, or no files). hp is started
     * and not loaded, and is so again on return; nothing is renamed until what was imported is
     * durable.
     *
     * @param old the broker's own journal of that kind, never started (its files, prefix and size)
     * @throws IllegalStateException hp has records and the files do too, or they cannot be read
     */
    static long run(Journal old, HugepoolJournal hp, String kind) throws Exception {
        if (!(old instanceof JournalImpl files))
            return 0; // a broker whose journal is not Artemis's files: nothing to import
        if (journalFiles(files).isEmpty())
            return 0;
        List<RecordInfo> committed = new ArrayList<>();
        List<PreparedTransactionInfo> prepared = new ArrayList<>();
        File dir = files.getFileFactory().getDirectory();
        NIOSequentialFileFactory nio = new NIOSequentialFileFactory(dir, 1);
        JournalImpl reader = new JournalImpl(files.getFileSize(), 2, 2, 0, 0, nio, files.getFilePrefix(),
                files.getFileExtension(), 1);
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
        String what = kind + " journal files in " + dir;
        if (committed.isEmpty() && prepared.isEmpty()) {
            renameAll(files); // nothing to import: out of the way, not read at every start
            log.info("hugepool-artemis: the broker's {} hold no records; renamed *{}", what, SUFFIX);
            return 0;
        }
        if (!hp.fresh())
            throw new IllegalStateException(hp.where() + " has records, and the broker's " + what + " hold " + committed.size()
                    + " records and " + prepared.size() + " prepared transactions as well: start it on one of the two"
                    + " (move those files away, or empty the hugepool journal: hugepool-artemis(7))");

        hp.loadInternalOnly();
        long bytes = 0;
        for (RecordInfo r : committed)
            bytes += Records.onDisk(Records.HEADER + (r.data == null ? 0 : r.data.length));
        for (PreparedTransactionInfo t : prepared)
            for (RecordInfo r : t.getRecords())
                bytes += Records.onDisk(Records.HEADER + (r.data == null ? 0 : r.data.length));
        hp.checkRoomFor(bytes); // what is imported waits for no consumer: it must fit at once
        long n = 0;
        for (RecordInfo r : committed) {
            if (r.isUpdate)
                hp.appendUpdateRecord(r.id, r.userRecordType, r.data, false);
            else
                hp.appendAddRecord(r.id, r.userRecordType, r.data, false);
            n++;
        }
        for (PreparedTransactionInfo t : prepared) {
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
        hp.flush(); // every record durable before a file is renamed
        hp.stop();
        hp.start();
        renameAll(files);
        log.info("hugepool-artemis: imported {} records and {} prepared transactions from the broker's {} into {};"
                + " the files are renamed *{}", committed.size(), prepared.size(), what, hp.where(), SUFFIX);
        return n;
    }
}
