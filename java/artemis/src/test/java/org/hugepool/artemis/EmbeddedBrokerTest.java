/*
 * SPDX-License-Identifier: MIT
 *
 * EmbeddedBrokerTest.java - a broker built in code (ActiveMQServers.newActiveMQServer, as an
 * application embeds one) in this JVM, its journals on a real hugepoold through the plugin
 * registered in its Configuration, as hugepool-artemis(7) shows:
 *  - what it acknowledged (durable sends, acknowledged consumes) is in hugepoold's journals, not
 *    in journal files of Artemis's own, and is what a second broker on the same journals loads;
 *  - a broker that ran on its own files (messages, some consumed, an XA transaction prepared),
 *    switched to hugepool: it has what the files held (Import), the files are renamed; the same
 *    after an import cut short; an import cut short not done again over a journal that holds
 *    other records (the broker pointed at another broker's journals since); back on files and
 *    then on hugepool again, files and journal both with records are refused; files holding
 *    more than the journal takes at once are refused, left as they were, and imported into a
 *    journal large enough;
 *  - the way back: a broker's hugepool journals exported (Export) as its own files, on which it
 *    has its messages and its prepared XA transaction; the journals emptied, so that on
 *    hugepool again it imports the files; or, exported with --keep, copied: the copy and the
 *    journals hold the same, a copy made again finds it there, and files that hold other
 *    records are not written over; an export cut short between its two emptyings finished by
 *    running it again, or by starting the broker on hugepool (the emptied journal imports its
 *    files, the other's files, a copy of it, are renamed), with all it held either way;
 *  - the operator's errors at start, no daemon at the socket, a journal the daemon does not
 *    have and one configured with when_full = recycle (which would lose live records once full):
 *    the broker does not become active, and the failure it reports names the cause. These
 *    are the plugin's start checks that a standalone broker meets the same way (it logs the same
 *    exception, AMQ224000, and exits: StandaloneBrokerTest's refused uid), at a fraction of a
 *    standalone start's cost;
 *  - a producer further ahead of its consumer than the message journal holds (it carries a
 *    third of its segments but two; the broker's global-max-size left at its default, so it does
 *    not page): its sends wait while the journal is not full (before, it filled, and the broker
 *    stopped for good with it: when_full = block), the consumer's receives and
 *    acknowledgements go on beside them (no lock of the broker's held by a waiting send stops
 *    them), and every message comes once, in order.
 */
package org.hugepool.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;

import javax.transaction.xa.XAResource;
import javax.transaction.xa.Xid;

import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.ActiveMQServers;
import org.apache.activemq.artemis.core.server.JournalType;
import org.apache.activemq.artemis.core.transaction.impl.XidImpl;
import org.hugepool.Daemon;
import org.hugepool.HugePool;
import org.hugepool.Status;
import org.junit.jupiter.api.Test;

class EmbeddedBrokerTest {
    private static final long WAIT_MS = 60_000; // a receive that waits this long is a hang, not an answer

    /* A broker on dir's files (paging, large messages, the lock) and these plugin properties. */
    private static ActiveMQServer broker(Path dir, Map<String, String> plugin) throws Exception {
        return broker(dir, new HugepoolJournals(plugin));
    }

    private static ActiveMQServer broker(Path dir, HugepoolJournals plugin) throws Exception {
        Configuration c = config(dir);
        if (plugin != null)
            c.registerBrokerPlugin(plugin);
        return ActiveMQServers.newActiveMQServer(c);
    }

    /* A broker's configuration on dir's files, journals included (NIO), no plugin. */
    private static Configuration config(Path dir) throws Exception {
        return new ConfigurationImpl().setPersistenceEnabled(true).setSecurityEnabled(false)
                .setJMXManagementEnabled(false).setJournalType(JournalType.NIO)
                .setJournalDirectory(dir.resolve("journal").toString()).setBindingsDirectory(dir.resolve("bindings").toString())
                .setPagingDirectory(dir.resolve("paging").toString())
                .setLargeMessagesDirectory(dir.resolve("large-messages").toString()).addAcceptorConfiguration("in-vm", "vm://0");
    }

    /* Start a broker that must fail to: the failure it reports. */
    private static Exception failedStart(ActiveMQServer s) throws Exception {
        AtomicReference<Exception> failure = new AtomicReference<>();
        s.registerActivationFailureListener(failure::set);
        try {
            s.start();
            assertFalse(s.isActive(), "the broker became active");
        } finally {
            s.stop();
        }
        assertNotNull(failure.get(), "the broker reported no failure");
        return failure.get();
    }

    private static ClientSessionFactory factory() throws Exception {
        ServerLocator l = ActiveMQClient.createServerLocator("vm://0");
        l.setBlockOnDurableSend(true).setBlockOnAcknowledge(true).setCallTimeout(WAIT_MS);
        return l.createSessionFactory();
    }

    /* The names of Artemis's journal files in dir's journal and bindings directories that end in suffix ("": its own). */
    private static List<String> journalFiles(Path dir, String suffix) throws Exception {
        List<String> names = new java.util.ArrayList<>();
        for (String sub : List.of("journal", "bindings"))
            if (Files.isDirectory(dir.resolve(sub)))
                try (Stream<Path> files = Files.list(dir.resolve(sub))) {
                    files.map(p -> p.getFileName().toString())
                            .filter(n -> n.matches("activemq-(data|bindings)-\\d+\\.(amq|bindings)" + java.util.regex.Pattern.quote(suffix)))
                            .forEach(names::add);
                }
        return names;
    }

    /* A durable queue q: n durable sends (property id 0 to n - 1), then the first `consumed` received and acknowledged. */
    private static void sendThenConsume(ClientSession cs, int n, int consumed) throws Exception {
        cs.createQueue(QueueConfiguration.of("q").setRoutingType(RoutingType.ANYCAST).setDurable(true));
        try (ClientProducer p = cs.createProducer("q")) {
            for (long i = 0; i < n; i++) {
                ClientMessage m = cs.createMessage(true);
                m.putLongProperty("id", i);
                p.send(m);
            }
        }
        cs.start();
        try (ClientConsumer c = cs.createConsumer("q")) {
            for (long i = 0; i < consumed; i++) {
                ClientMessage m = c.receive(WAIT_MS);
                assertNotNull(m, "message " + i + " did not come");
                m.acknowledge();
            }
        }
    }

    /* On broker s, then stopped: sendThenConsume. */
    private static void sendThenConsume(ActiveMQServer s, int n, int consumed) throws Exception {
        try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
            sendThenConsume(cs, n, consumed);
        } finally {
            s.stop();
        }
    }

    /* A daemon with the two journals a broker on hugepool uses (4 x 2 MiB each) and `more`, started. */
    private static Daemon daemon(String more) throws Exception {
        return new Daemon(Daemon.journal("artemis-messages", "2M", 4) + Daemon.journal("artemis-bindings", "2M", 4) + more)
                .start();
    }

    /* Receive and acknowledge from q the messages of ids first to last, in that order. */
    private static void receiveInOrder(ClientSession cs, long first, long last, String when) throws Exception {
        cs.start();
        try (ClientConsumer c = cs.createConsumer("q")) {
            for (long i = first; i <= last; i++) {
                ClientMessage m = c.receive(WAIT_MS);
                assertNotNull(m, "message " + i + " did not come " + when);
                assertEquals(i, m.getLongProperty("id"));
                m.acknowledge();
            }
        }
    }

    /* On broker s, then stopped: 20 durable sends to q (ids 0-19), 5 consumed, id 20 sent in XA transaction xid, prepared. */
    private static void sendConsumeAndPrepare(ActiveMQServer s, Xid xid) throws Exception {
        try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
            sendThenConsume(cs, 20, 5);
            try (ClientSession xa = f.createSession(true, false, false); ClientProducer p = xa.createProducer("q")) {
                xa.start(xid, XAResource.TMNOFLAGS);
                ClientMessage m = xa.createMessage(true);
                m.putLongProperty("id", 20);
                p.send(m);
                xa.end(xid, XAResource.TMSUCCESS);
                xa.prepare(xid);
            }
        } finally {
            s.stop();
        }
    }

    /*
     * On broker s, then stopped: what sendConsumeAndPrepare left is there, xid prepared (then
     * committed) and the 16 messages of ids 5 to 20 (received).
     */
    private static void hasWhatWasPrepared(ActiveMQServer s, Xid xid, String when) throws Exception {
        try (ClientSessionFactory f = factory()) {
            try (ClientSession xa = f.createSession(true, false, false)) {
                Xid[] prepared = xa.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN);
                assertEquals(List.of(xid), List.of(prepared), "prepared transactions " + when);
                xa.commit(xid, false);
            }
            try (ClientSession cs = f.createSession(false, true, true)) {
                assertEquals(16, cs.queueQuery(SimpleString.of("q")).getMessageCount(), "messages " + when);
                receiveInOrder(cs, 5, 20, when);
            }
        } finally {
            s.stop();
        }
    }

    /* s started and active. */
    private static ActiveMQServer started(ActiveMQServer s) throws Exception {
        s.start();
        assertTrue(s.waitForActivation(WAIT_MS, java.util.concurrent.TimeUnit.MILLISECONDS) && s.isActive(),
                "the embedded broker did not become active");
        return s;
    }

    @Test
    @org.junit.jupiter.api.Timeout(value = 300, threadMode = org.junit.jupiter.api.Timeout.ThreadMode.SEPARATE_THREAD)
    void backlogPastTheJournalWaitsForItsConsumer() throws Exception {
        // 6 segments of 2 MiB, 4 of them for records (two kept spare): a third of those is 2.7 MiB; 14 MB sent
        try (Daemon d = new Daemon(Daemon.journal("artemis-messages", "2M", 6)
                + Daemon.journal("artemis-bindings", "2M", 4)).start();
                HugePool pool = HugePool.connect(d.socket.toString())) {
            HugepoolJournals plugin = new HugepoolJournals(Map.of("socket", d.socket.toString(), "reclaim-at", "1M"));
            ActiveMQServer s = broker(d.dir, plugin);
            s.start();
            try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
                cs.createQueue(QueueConfiguration.of("q").setRoutingType(RoutingType.ANYCAST).setDurable(true));
                int n = 1400;
                byte[] body = new byte[10_000];
                AtomicLong sent = new AtomicLong();
                AtomicReference<Throwable> failed = new AtomicReference<>();
                Thread producer = new Thread(() -> {
                    try (ClientSessionFactory pf = factory(); ClientSession ps = pf.createSession(false, true, true);
                            ClientProducer p = ps.createProducer("q")) {
                        for (long i = 0; i < n; i++) {
                            ClientMessage m = ps.createMessage(true);
                            m.putLongProperty("id", i);
                            m.getBodyBuffer().writeBytes(body);
                            p.send(m);
                            sent.set(i + 1);
                        }
                    } catch (Throwable e) {
                        failed.set(e);
                    }
                }, "producer");
                producer.start();
                HugepoolJournal messages = plugin.messageJournal();
                while (messages.backlogWaiters() == 0 && producer.isAlive())
                    Thread.sleep(10);
                Status.Journal st = pool.status().journal("artemis-messages");
                assertEquals(Status.Journal.OK, st.state(), "the daemon's journal while the producer waits: " + st);
                assertTrue(producer.isAlive() && sent.get() < n / 2, sent.get() + " of " + n + " messages sent without"
                        + " waiting: " + failed.get());

                cs.start();
                try (ClientConsumer c = cs.createConsumer("q")) {
                    for (long i = 0; i < n; i++) {
                        ClientMessage m = c.receive(WAIT_MS);
                        assertNotNull(m, "message " + i + " did not come (" + sent.get() + " sent): " + failed.get());
                        assertEquals(i, m.getLongProperty("id"));
                        m.acknowledge();
                    }
                    assertEquals(null, c.receiveImmediate(), "a message after the last");
                }
                producer.join();
                assertEquals(null, failed.get(), "the producer");
                assertTrue(messages.reclaims() > 0, "the message journal never reclaimed");
                assertEquals(Status.Journal.OK, pool.status().journal("artemis-messages").state());
            } finally {
                s.stop();
            }
        }
    }

    @Test
    void keepsWhatItAcknowledged() throws Exception {
        try (Daemon d = daemon("")) {
            Map<String, String> plugin = Map.of("socket", d.socket.toString());
            sendThenConsume(started(broker(d.dir, plugin)), 10, 3);
            // on hugepoold's journals, none of Artemis's own
            try (HugePool pool = HugePool.connect(d.socket.toString())) {
                assertTrue(pool.status().journal("artemis-messages").nextLsn() > 1, "nothing in hugepoold's message journal");
            }
            assertEquals(List.of(), journalFiles(d.dir, ""), "Artemis's own journal files");

            ActiveMQServer again = broker(d.dir, plugin);
            again.start();
            try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
                assertEquals(7, cs.queueQuery(SimpleString.of("q")).getMessageCount(), "messages after a restart");
                receiveInOrder(cs, 3, 9, "after the restart");
            } finally {
                again.stop();
            }
        }
    }

    @Test
    void noDaemonNamesTheSocket() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("artemis-messages", "2M", 4))) { // not started
            String none = d.dir.resolve("nosuch.sock").toString();
            Exception e = failedStart(broker(d.dir, Map.of("socket", none)));
            assertTrue(e.getMessage().startsWith("hugepool-artemis: ") && e.getMessage().contains(none)
                    && e.getMessage().contains("is hugepoold running?"), "no daemon: " + e.getMessage());
        }
    }

    @Test
    void unknownJournalNamesIt() throws Exception {
        try (Daemon d = daemon("")) {
            Exception e = failedStart(broker(d.dir, Map.of("socket", d.socket.toString(), "messages", "nosuch")));
            assertTrue(e.getMessage().startsWith("hugepool-artemis: ") && e.getMessage().contains("\"nosuch\"")
                    && e.getMessage().contains("has no such journal"), "unknown journal: " + e.getMessage());
        }
    }

    /*
     * Export d's two journals into dir's bindings and journal directories (message files of
     * artemis create's 10 MiB), emptying them unless `keep`.
     */
    private static Export.Exported export(Daemon d, Path dir, boolean keep) throws Exception {
        return Export.export(d.socket.toString(), "artemis-bindings", dir.resolve("bindings").toFile(), "artemis-messages",
                dir.resolve("journal").toFile(), 10 << 20, keep);
    }

    /* Daemon d's journal `name` as a broker's HugepoolJournal, started and not loaded. */
    private static HugepoolJournal started(Daemon d, String name) throws Exception {
        HugepoolJournal hp = new HugepoolJournal(d.socket.toString(), name, HugepoolJournal.MIN_RECLAIM_AT,
                java.time.Duration.ofSeconds(30), null);
        hp.start();
        return hp;
    }

    /*
     * What an import of dir's files (named *.imported now) into daemon journal `journal` that was
     * cut short once its records were durable leaves: their committed records and prepared
     * transactions in the journal.
     */
    private static void importCutShort(Daemon d, String journal, Path dir, String prefix, String ext) throws Exception {
        Import.Held held = Import.read(dir.toFile(), prefix, ext + Import.SUFFIX, 10 << 20);
        HugepoolJournal hp = started(d, journal);
        try {
            hp.loadInternalOnly();
            Import.append(hp, held.committed(), held.prepared());
            hp.flush();
        } finally {
            hp.stop();
        }
    }

    @Test
    void aBrokerThatRanOnFilesKeepsWhatTheyHeld() throws Exception {
        try (Daemon d = daemon(Daemon.journal("cut-messages", "2M", 4) + Daemon.journal("cut-bindings", "2M", 4))) {
            Map<String, String> plugin = Map.of("socket", d.socket.toString());
            Xid xid = new XidImpl("branch".getBytes(), 1, "hugepool-import".getBytes());
            // on Artemis's own files: 20 durable sends, 5 consumed, one prepared in an XA transaction
            sendConsumeAndPrepare(started(broker(d.dir, (HugepoolJournals) null)), xid);
            List<String> own = journalFiles(d.dir, "").stream().sorted().toList();
            assertFalse(own.isEmpty(), "the broker on files made no journal files");

            // switched to hugepool: imported, the files renamed, and what they held is the broker's;
            // then, on two other journals, again as if the broker had stopped during their import
            // (the records in the journals, the files' names saying one under way, one of them not
            // renamed yet): imported again over what the journals got, the same, once
            for (String pass : List.of("the import", "an import cut short")) {
                Map<String, String> on = plugin;
                if (pass.equals("an import cut short")) {
                    on = Map.of("socket", d.socket.toString(), "messages", "cut-messages", "bindings", "cut-bindings");
                    importCutShort(d, "cut-messages", d.dir.resolve("journal"), "activemq-data", "amq");
                    importCutShort(d, "cut-bindings", d.dir.resolve("bindings"), "activemq-bindings", "bindings");
                    for (String sub : List.of("journal", "bindings"))
                        try (Stream<Path> names = Files.list(d.dir.resolve(sub))) {
                            // cut short mid-renaming too: the first file (the one that holds the
                            // records) under its own name still, the others NAME.importing
                            List<Path> imported = names.filter(p -> p.toString().endsWith(Import.SUFFIX)).sorted().toList();
                            for (Path p : imported)
                                Files.move(p, p.resolveSibling(p.getFileName().toString()
                                        .replace(Import.SUFFIX, p.equals(imported.get(0)) ? "" : Import.IMPORTING)));
                        }
                }
                hasWhatWasPrepared(started(broker(d.dir, on)), xid, "after " + pass);
                assertEquals(List.of(), journalFiles(d.dir, ""), "journal files left after " + pass);
                assertEquals(List.of(), journalFiles(d.dir, Import.IMPORTING), "files still importing after " + pass);
                assertFalse(journalFiles(d.dir, Import.SUFFIX).isEmpty(), "no journal file renamed " + Import.SUFFIX);
                if (pass.equals("the import")) // the broker's files, each renamed, and no other
                    assertEquals(own, journalFiles(d.dir, Import.SUFFIX).stream().map(n -> n.replace(Import.SUFFIX, ""))
                            .sorted().toList(), "the files renamed by " + pass);
            }
            try (HugePool pool = HugePool.connect(d.socket.toString())) {
                assertTrue(pool.status().journal("artemis-messages").nextLsn() > 1, "nothing in hugepoold's message journal");
            }

            // back on files for a while (new files, with records), then on hugepool again: refused
            started(broker(d.dir, (HugepoolJournals) null)).stop();
            Exception e = failedStart(broker(d.dir, plugin));
            assertTrue(e.getMessage().startsWith("hugepool-artemis: ") && e.getMessage().contains("has records, and the broker's"),
                    "files and a hugepool journal both with records: " + e.getMessage());
        }
    }

    @Test
    void anImportCutShortIsNotRedoneOverAnotherJournal() throws Exception {
        try (Daemon d = daemon(Daemon.journal("other-messages", "2M", 4) + Daemon.journal("other-bindings", "2M", 4))) {
            // another broker's journals, with 10 messages, 3 consumed
            Path other = d.dir.resolve("other");
            Map<String, String> onOther = Map.of("socket", d.socket.toString(), "messages", "other-messages", "bindings",
                    "other-bindings");
            sendThenConsume(started(broker(other, onOther)), 10, 3);
            // a broker on files whose import was cut short (its files named NAME.importing), then
            // pointed at the other journals: refused, not imported over what they hold
            Path dir = d.dir.resolve("broker");
            sendConsumeAndPrepare(started(broker(dir, (HugepoolJournals) null)), new XidImpl("b".getBytes(), 1, "g".getBytes()));
            for (String sub : List.of("journal", "bindings"))
                try (Stream<Path> names = Files.list(dir.resolve(sub))) {
                    for (Path p : names.filter(p -> p.toString().matches(".*\\.(amq|bindings)")).toList())
                        Files.move(p, p.resolveSibling(p.getFileName() + Import.IMPORTING));
                }
            Exception e = failedStart(broker(dir, onOther));
            assertTrue(e.getMessage().startsWith("hugepool-artemis: ") && e.getMessage().contains("holds records that the broker's")
                    && e.getMessage().contains("was cut short"), "an import cut short, redone over another journal: " + e.getMessage());
            ActiveMQServer s = started(broker(other, onOther));
            try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
                receiveInOrder(cs, 3, 9, "on the other journals after the refusal");
            } finally {
                s.stop();
            }
        }
    }

    @Test
    void exportTakesTheBrokerBackToItsFiles() throws Exception {
        try (Daemon d = daemon("")) {
            Xid xid = new XidImpl("branch".getBytes(), 1, "hugepool-export".getBytes());
            // on hugepool: 20 durable sends, 5 consumed, one prepared in an XA transaction
            sendConsumeAndPrepare(started(broker(d.dir, Map.of("socket", d.socket.toString()))), xid);
            assertEquals(List.of(), journalFiles(d.dir, ""), "journal files of the broker on hugepool");

            // exported, then the broker on its files (the plugin left out) has it all
            Export.Exported exported = export(d, d.dir, false);
            Export.Written b = exported.bindings(), m = exported.messages();
            assertTrue(b.records() > 0 && m.records() > 0 && m.prepared() == 1, "exported " + b + ", " + m);
            ActiveMQServer files = started(broker(d.dir, (HugepoolJournals) null));
            try (ClientSessionFactory f = factory()) {
                try (ClientSession xa = f.createSession(true, false, false)) {
                    Xid[] prepared = xa.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN);
                    assertEquals(List.of(xid), List.of(prepared), "prepared transactions after the export");
                    xa.commit(xid, false);
                }
                try (ClientSession cs = f.createSession(false, true, true)) {
                    assertEquals(16, cs.queueQuery(SimpleString.of("q")).getMessageCount(), "messages after the export");
                    receiveInOrder(cs, 5, 12, "after the export");
                }
            } finally {
                files.stop();
            }
            // exported again, with the broker's files there and the journals empty: nothing written
            exported = export(d, d.dir, false);
            assertEquals(new Export.Exported(new Export.Written(0, 0, true), new Export.Written(0, 0, true)), exported,
                    "exported again over the broker's files");

            // the export emptied the hugepool journals: on hugepool again, the broker imports its
            // files (what it did on them included), not refused for records in both
            ActiveMQServer hp = started(broker(d.dir, Map.of("socket", d.socket.toString())));
            try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
                assertEquals(List.of(), journalFiles(d.dir, ""), "journal files left on hugepool again");
                assertEquals(8, cs.queueQuery(SimpleString.of("q")).getMessageCount(), "messages on hugepool again");
                receiveInOrder(cs, 13, 20, "on hugepool again");
            } finally {
                hp.stop();
            }
        }
    }

    @Test
    void exportKeepingTheJournalsCopiesThem() throws Exception {
        try (Daemon d = daemon("")) {
            Map<String, String> plugin = Map.of("socket", d.socket.toString());
            sendThenConsume(started(broker(d.dir, plugin)), 10, 3);
            // a copy in other directories, on which a broker of its own has the 7 messages; a copy
            // made again into them finds it there
            Path copy = d.dir.resolve("copy");
            for (boolean again : List.of(false, true)) {
                Export.Exported e = export(d, copy, true);
                assertEquals(again, e.bindings().there() && e.messages().there(), "a copy made again: " + e);
                assertTrue(e.bindings().records() > 0 && e.messages().records() > 0, "copied " + e);
            }
            for (Path dir : List.of(copy, d.dir)) { // and the broker on hugepool has them still (3 consumed there)
                ActiveMQServer s = started(broker(dir, dir == copy ? null : new HugepoolJournals(plugin)));
                try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
                    receiveInOrder(cs, 3, dir == copy ? 9 : 5, dir == copy ? "on the copy" : "on hugepool after the copy");
                } finally {
                    s.stop();
                }
            }
            // the journals hold what the copy does not now (the copy's broker consumed all 7, the
            // broker on hugepool 3): it is not written over
            IllegalStateException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
                    () -> export(d, copy, true));
            assertTrue(e.getMessage().contains("holds journal files already") && e.getMessage().contains("do not hold what"),
                    e.getMessage());
        }
    }

    /*
     * What an export killed between its two emptyings leaves (the message journal's first): both
     * kinds of files written in dir's directories, the message journal emptied, the bindings
     * journal holding what its files hold.
     */
    private static void exportCutBetweenItsEmptyings(Daemon d) throws Exception {
        export(d, d.dir, true);
        HugepoolJournal hp = started(d, "artemis-messages");
        try {
            Import.load(hp);
            hp.discardAll();
        } finally {
            hp.stop();
        }
    }

    /* What daemon journal `name` holds, as a broker would load it. */
    private static Import.Held holds(Daemon d, String name) throws Exception {
        HugepoolJournal hp = started(d, name);
        try {
            return Import.load(hp);
        } finally {
            hp.stop();
        }
    }

    @Test
    void anExportCutShortIsFinishedByRunningItAgain() throws Exception {
        try (Daemon d = daemon("")) {
            Xid xid = new XidImpl("branch".getBytes(), 1, "hugepool-export-cut".getBytes());
            sendConsumeAndPrepare(started(broker(d.dir, Map.of("socket", d.socket.toString()))), xid);
            exportCutBetweenItsEmptyings(d);
            // run again: nothing written (the files hold it), the bindings journal emptied now
            Export.Exported e = export(d, d.dir, false);
            assertTrue(e.bindings().there() && e.bindings().records() > 0 && e.messages().there(), "exported again: " + e);
            for (String j : List.of("artemis-bindings", "artemis-messages"))
                assertTrue(holds(d, j).empty(), j + " after the export run again");
            hasWhatWasPrepared(started(broker(d.dir, (HugepoolJournals) null)), xid, "on files after the export run again");
        }
    }

    @Test
    void aStartOnHugepoolAfterAnExportCutShortKeepsItAll() throws Exception {
        try (Daemon d = daemon("")) {
            Xid xid = new XidImpl("branch".getBytes(), 1, "hugepool-export-cut".getBytes());
            Map<String, String> plugin = Map.of("socket", d.socket.toString());
            sendConsumeAndPrepare(started(broker(d.dir, plugin)), xid);
            exportCutBetweenItsEmptyings(d);
            // the message files imported into the emptied journal, the bindings files (a copy of
            // their journal) only renamed: no refusal for records in both
            hasWhatWasPrepared(started(broker(d.dir, plugin)), xid, "on hugepool after the export cut short");
            assertEquals(List.of(), journalFiles(d.dir, ""), "journal files left on hugepool after the export cut short");
            assertTrue(journalFiles(d.dir, Import.SUFFIX).stream().anyMatch(n -> n.endsWith(".bindings" + Import.SUFFIX)),
                    "the bindings files not renamed " + Import.SUFFIX);
        }
    }

    @Test
    void anImportLargerThanTheJournalIsRefusedAndLeavesTheFiles() throws Exception {
        try (Daemon small = daemon("");
                Daemon large = new Daemon(Daemon.journal("artemis-messages", "2M", 16) + Daemon.journal("artemis-bindings", "2M", 4))
                        .start()) {
            Path dir = small.dir.resolve("broker");
            // 1.5 MB of messages: past a third of 4 segments of 2 MiB (two kept spare), within 16's
            ActiveMQServer files = started(broker(dir, (HugepoolJournals) null));
            try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
                cs.createQueue(QueueConfiguration.of("q").setRoutingType(RoutingType.ANYCAST).setDurable(true));
                try (ClientProducer p = cs.createProducer("q")) {
                    for (long i = 0; i < 150; i++) {
                        ClientMessage m = cs.createMessage(true);
                        m.putLongProperty("id", i);
                        m.getBodyBuffer().writeBytes(new byte[10_000]);
                        p.send(m);
                    }
                }
            } finally {
                files.stop();
            }
            List<String> before = journalFiles(dir, "");
            Exception e = failedStart(broker(dir, Map.of("socket", small.socket.toString())));
            assertTrue(e.getMessage().startsWith("hugepool-artemis: ") && e.getMessage().contains("give it at least"),
                    "an import past the journal: " + e.getMessage());
            // as they were, none renamed and none added (the reader's JournalImpl opens one of its own)
            assertEquals(before.stream().sorted().toList(), journalFiles(dir, "").stream().sorted().toList(),
                    "the broker's files after the refused import");
            assertEquals(List.of(), journalFiles(dir, Import.IMPORTING), "the refused import began");

            ActiveMQServer hp = started(broker(dir, Map.of("socket", large.socket.toString())));
            try (ClientSessionFactory f = factory(); ClientSession cs = f.createSession(false, true, true)) {
                assertEquals(List.of(), journalFiles(dir, ""), "journal files left after the import");
                receiveInOrder(cs, 0, 149, "after the import into a journal large enough");
            } finally {
                hp.stop();
            }
        }
    }

    @Test
    void recyclingJournalIsRefused() throws Exception {
        try (Daemon d = new Daemon(Daemon.journal("artemis-messages", "2M", 4).replace("when_full = block", "when_full = recycle")
                + Daemon.journal("artemis-bindings", "2M", 4)).start()) {
            Exception e = failedStart(broker(d.dir, Map.of("socket", d.socket.toString())));
            assertTrue(e.getMessage().startsWith("hugepool-artemis: ") && e.getMessage().contains("artemis-messages")
                    && e.getMessage().contains("when_full = recycle") && e.getMessage().contains("when_full = block"),
                    "recycling journal: " + e.getMessage());
        }
    }
}
