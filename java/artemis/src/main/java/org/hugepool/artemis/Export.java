/*
 * SPDX-License-Identifier: MIT
 *
 * Export.java - the way back (hugepool-artemis(7) "Switching back"): what a stopped broker's two
 * hugepool journals hold, loaded as the broker loads them (committed records, prepared
 * transactions), written as Artemis's own journal files in the broker's journal and bindings
 * directories, so that the broker, its plugin removed from broker.xml, starts on its files with
 * its queues, messages and prepared XA transactions. Import's inverse; a command of its own:
 *
 *   java -cp 'BROKER/lib/*:ARTEMIS_HOME/lib/*' org.hugepool.artemis.Export --journal-dir DIR
 *        --bindings-dir DIR [--socket PATH] [--messages NAME] [--bindings NAME]
 *        [--journal-file-size BYTES] [--keep]
 *
 * Once the files are durable the hugepool journals are emptied (a CUT: nothing they held is
 * loaded again), so an export moves the broker's contents rather than copying them: a broker
 * started on hugepool again, the plugin left in broker.xml or put back later, imports the files
 * (Import) instead of being refused for holding records in both. Both journals are held (their
 * one writer: no broker starts on them) from their read to their emptying. With --keep they are
 * left as they were: a copy, to inspect (`artemis data print`) or keep. A directory that holds
 * journal files of its kind already is refused (the broker's?), unless they hold what the
 * journal holds, or the journal holds nothing: an export run again after one cut short (killed
 * between its two emptyings, say) writes nothing more and finishes it. Exit status 0 done,
 * 1 failed, 2 usage.
 */
package org.hugepool.artemis;

import java.io.File;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;

import org.apache.activemq.artemis.core.io.nio.NIOSequentialFileFactory;
import org.apache.activemq.artemis.core.journal.impl.JournalImpl;

/** Write a stopped broker's hugepool journals as Artemis's own journal files. */
public final class Export {
    private static final String USAGE = "usage: java -cp 'BROKER/lib/*:ARTEMIS_HOME/lib/*' org.hugepool.artemis.Export"
            + " --journal-dir DIR --bindings-dir DIR [--socket PATH] [--messages NAME] [--bindings NAME]"
            + " [--journal-file-size BYTES] [--keep]";

    /* Artemis's journal files (JournalStorageManager's names): the bindings journal's, the messages'. */
    static final String BINDINGS_PREFIX = "activemq-bindings", BINDINGS_EXT = "bindings";
    static final String MESSAGES_PREFIX = "activemq-data", MESSAGES_EXT = "amq";

    private Export() {
    }

    /** What one journal's export wrote; `there`: nothing, its directory's files held it already. */
    record Written(int records, int prepared, boolean there) {
    }

    /*
     * A hugepool journal being exported to dir's files prefix-N.ext (of fileSize bytes): started
     * (its one writer) and loaded as the broker loads it, and whether those files hold it already.
     */
    private static final class Source {
        final HugepoolJournal hp;
        final Import.Held held;
        final File dir;
        final String prefix, ext;
        final int fileSize;
        boolean there;

        Source(String socket, String name, File dir, String prefix, String ext, int fileSize) throws Exception {
            this.dir = dir;
            this.prefix = prefix;
            this.ext = ext;
            this.fileSize = fileSize;
            hp = new HugepoolJournal(socket, name, HugepoolJournal.MIN_RECLAIM_AT, Duration.ofSeconds(30), null);
            hp.start();
            try {
                held = Import.load(hp);
            } catch (Exception | Error e) {
                hp.stop();
                throw e;
            }
        }

        /*
         * The directory's files of its kind: none (to write), or what the journal holds (an
         * export run again after one cut short before it emptied the journal), or any when the
         * journal holds nothing (one that emptied it: nothing to write, and they are left as
         * they are); others refused.
         */
        void check() throws Exception {
            List<Path> files = Import.journalFiles(dir, prefix, ext);
            if (files.isEmpty())
                return;
            if (held.empty() || Import.read(dir, prefix, ext, fileSize).same(held)) {
                there = true;
                return;
            }
            throw new IllegalStateException(dir + " holds journal files already (" + files.get(0).getFileName()
                    + ") and they do not hold what " + hp.where() + " holds: move them away first");
        }

        Written write() throws Exception {
            if (!there)
                return Export.write(held, dir, prefix, ext, fileSize);
            // durable before the journal is emptied: the export cut short may have been before its sync
            sync(dir, prefix, ext);
            return new Written(held.committed().size(), held.prepared().size(), true);
        }

        /* Its files written and durable: everything it held dead, durably. */
        void empty() throws Exception {
            hp.discardAll();
        }

        void stop() throws Exception {
            hp.stop();
        }
    }

    /* Write held as JournalImpl files prefix-N.ext of fileSize bytes in dir, synced. */
    private static Written write(Import.Held held, File dir, String prefix, String ext, int fileSize) throws Exception {
        if (!dir.isDirectory() && !dir.mkdirs())
            throw new IllegalStateException("cannot make " + dir);
        NIOSequentialFileFactory nio = new NIOSequentialFileFactory(dir, 1);
        JournalImpl files = new JournalImpl(fileSize, 2, 2, 0, 0, nio, prefix, ext, 1);
        nio.start();
        try {
            files.start();
            try {
                files.loadInternalOnly();
                Import.append(files, held.committed(), held.prepared());
            } finally {
                files.stop();
            }
        } finally {
            nio.stop();
        }
        sync(dir, prefix, ext); // durable before the broker is told
        return new Written(held.committed().size(), held.prepared().size(), false);
    }

    /* dir's files prefix-N.ext and dir itself synced (fsync on a descriptor open for reading). */
    private static void sync(File dir, String prefix, String ext) throws Exception {
        for (Path f : Import.journalFiles(dir, prefix, ext))
            try (FileChannel c = FileChannel.open(f, StandardOpenOption.READ)) {
                c.force(true);
            }
        try (FileChannel c = FileChannel.open(dir.toPath(), StandardOpenOption.READ)) {
            c.force(true);
        }
    }

    /** What an export wrote: each journal's records and prepared transactions. */
    record Exported(Written bindings, Written messages) {
    }

    /**
     * Write what hugepool journals `bindings` and `messages` hold as Artemis's files in
     * bindingsDir and journalDir (message files of fileSize bytes), then empty both unless
     * `keep`. Both journals are read and both directories checked before either is written, so
     * a refusal or a failed read writes nothing; neither journal is emptied before both kinds
     * of files are durable. Files a directory holds already are not written again: what the
     * journal holds (an export cut short), or anything when it holds nothing (exported before).
     *
     * @throws IllegalStateException a directory holds other such files, or a journal cannot be read
     */
    static Exported export(String socket, String bindings, File bindingsDir, String messages, File journalDir, int fileSize,
            boolean keep) throws Exception {
        Source bs = new Source(socket, bindings, bindingsDir, BINDINGS_PREFIX, BINDINGS_EXT, 1 << 20);
        try {
            Source ms = new Source(socket, messages, journalDir, MESSAGES_PREFIX, MESSAGES_EXT, fileSize);
            try {
                bs.check();
                ms.check();
                // the bindings journal holds the broker's queues (and the counter of its ids): first
                Written b = bs.write();
                Written m = ms.write();
                if (!keep) {
                    ms.empty();
                    bs.empty();
                }
                return new Exported(b, m);
            } finally {
                ms.stop();
            }
        } finally {
            bs.stop();
        }
    }

    public static void main(String[] args) {
        String socket = null, messages = "artemis-messages", bindings = "artemis-bindings";
        File journalDir = null, bindingsDir = null;
        int fileSize = 10 << 20; // artemis create's journal-file-size
        boolean keep = false;
        try {
            for (int i = 0; i < args.length; i++) {
                if (args[i].equals("--keep")) {
                    keep = true;
                    continue;
                }
                String v = i + 1 < args.length ? args[i + 1] : null;
                if (v == null)
                    throw new IllegalArgumentException(args[i] + " needs a value");
                switch (args[i++]) {
                case "--socket" -> socket = v;
                case "--messages" -> messages = v;
                case "--bindings" -> bindings = v;
                case "--journal-dir" -> journalDir = new File(v);
                case "--bindings-dir" -> bindingsDir = new File(v);
                // broker.xml's journal-file-size
                case "--journal-file-size" -> fileSize = (int) HugepoolJournals.size(args[i - 1], v, 1 << 20, 1 << 30);
                default -> throw new IllegalArgumentException("unknown option " + args[i - 1]);
                }
            }
            if (journalDir == null || bindingsDir == null)
                throw new IllegalArgumentException("--journal-dir and --bindings-dir are needed");
        } catch (IllegalArgumentException e) {
            System.err.println("hugepool-artemis export: " + e.getMessage() + "\n" + USAGE);
            System.exit(2);
            return;
        }
        try {
            Exported e = export(socket, bindings, bindingsDir, messages, journalDir, fileSize, keep);
            Written b = e.bindings(), m = e.messages();
            System.out.println("hugepool-artemis export: " + b.records() + " records of hugepoold journal \"" + bindings
                    + "\" in " + bindingsDir + (b.there() ? " (there already)" : "") + ", " + m.records() + " records and "
                    + m.prepared() + " prepared transactions of \"" + messages + "\" in " + journalDir
                    + (m.there() ? " (there already)" : "")
                    + (keep ? "; the hugepool journals kept as they were" : "; both hugepool journals emptied"));
            System.exit(0);
        } catch (Exception | LinkageError e) { // LinkageError: the JNI library not found, which says where it looked
            System.err.println("hugepool-artemis export: " + e.getMessage());
            System.exit(1);
        }
    }
}
