/*
 * SPDX-License-Identifier: MIT
 *
 * StandaloneBrokerTest.java - a broker made by Artemis 2.40.0's `artemis create`, switched to
 * hugepool as hugepool-artemis(7) says, with a real hugepoold, driven over the core protocol. One
 * daemon and one broker instance serve every case (making and starting a broker costs seconds);
 * each case has a queue of its own and checks only what it sent there, so the cases do not depend
 * on each other's results, only share the broker, which each starts when it is not running:
 *  - persistent sends under load, a warm restart of the daemon (hugepoolctl restart) while they
 *    go on, then SIGKILL of the broker mid-load and a restart: every send acknowledged to its
 *    producer is delivered exactly once, nothing consumed and acknowledged before the kill comes
 *    back, an XA transaction prepared before the kill is still prepared and commits;
 *  - 32 MB sent and consumed through journals of 8 MiB each: the reclaim keeps them bounded
 *    (with when_full = block the broker would stall otherwise) and the daemon's truncation point
 *    moved;
 *  - the broker run as a uid the journals do not let append (65534): it does not start, says
 *    why, and what it had acknowledged before is all there when it runs as its own user again;
 *  - the message journal failing read-only under load (the daemon's fault injection): the broker
 *    stops and says why; restarted on a sound daemon, every send it acknowledged is there once;
 *  - over AMQP, with the distribution's own `artemis producer` and `artemis consumer`: persistent
 *    sends, a part consumed in a committed transaction (the rest the consumer prefetched goes
 *    back, its delivery counts updated), SIGKILL and a restart: what was consumed is gone and
 *    every other send comes once (an AMQP message is kept in its own encoding, records of
 *    another kind than a core message's).
 * No daemon and an unknown journal are EmbeddedBrokerTest's: the same start checks, in-process.
 */
package org.hugepool.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

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
import org.apache.activemq.artemis.core.transaction.impl.XidImpl;
import org.hugepool.Daemon;
import org.hugepool.HugePool;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class StandaloneBrokerTest {
    private static final long WAIT_MS = 60_000; // a wait this long is a hang, not an answer
    private static final int OTHER_UID = 65534; // the harness's other uid (nobody)

    private Daemon daemon;
    private Broker broker;

    @BeforeAll
    void create() throws Exception {
        // socket_mode 0666: any uid is a client (refusedUidStopsTheBroker's broker is one that
        // the journals' lists refuse); the daemon answers a uid the mode does not admit with
        // EACCES whatever it asks but the status, before any journal's list is looked at
        daemon = new Daemon("socket_mode = 0666\n" + Daemon.journal("artemis-messages", "2M", 4)
                + Daemon.journal("artemis-bindings", "2M", 4)).start();
        broker = new Broker(daemon.dir,
                Map.of("socket", daemon.socket.toString(), "reclaim-at", "1M", "bindings-reclaim-at", "1M"));
    }

    @AfterAll
    void close() throws Exception {
        if (broker != null)
            broker.close();
        if (daemon != null)
            daemon.close();
    }

    /* The broker, started if it is not running (a case before may have stopped it). */
    private Broker running() throws Exception {
        return broker.running() ? broker : broker.start();
    }

    private static ClientSessionFactory factory(Broker b) throws Exception {
        ServerLocator l = ActiveMQClient.createServerLocator(b.url());
        l.setBlockOnDurableSend(true).setBlockOnAcknowledge(true).setReconnectAttempts(0).setCallTimeout(WAIT_MS);
        return l.createSessionFactory();
    }

    private static void createQueue(Broker b, String q) throws Exception {
        try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true)) {
            s.createQueue(QueueConfiguration.of(q).setRoutingType(RoutingType.ANYCAST).setDurable(true));
        }
    }

    private static void send(ClientProducer p, ClientSession s, long id, int bytes) throws Exception {
        ClientMessage m = s.createMessage(true);
        m.putLongProperty("id", id);
        m.getBodyBuffer().writeBytes(new byte[bytes]);
        p.send(m);
    }

    /* Receive everything queue q holds now: ids in arrival order. */
    private static List<Long> drain(ClientSessionFactory f, String q) throws Exception {
        List<Long> got = new ArrayList<>();
        try (ClientSession s = f.createSession(false, true, true)) {
            long n = s.queueQuery(SimpleString.of(q)).getMessageCount();
            s.start();
            try (ClientConsumer c = s.createConsumer(q)) {
                for (long i = 0; i < n; i++) {
                    ClientMessage m = c.receive(WAIT_MS);
                    assertNotNull(m, "message " + i + " of " + n + " did not come");
                    m.acknowledge();
                    got.add(m.getLongProperty("id"));
                }
            }
        }
        return got;
    }

    /* Every id acknowledged is in got once, nothing came that was not sent. */
    private static Set<Long> exactlyOnce(List<Long> got, Sends sent) {
        Set<Long> seen = new HashSet<>();
        for (long id : got)
            assertTrue(seen.add(id), "message " + id + " delivered twice");
        for (long id : sent.acked())
            assertTrue(seen.contains(id), "acknowledged message " + id + " is lost");
        for (long id : seen)
            assertTrue(sent.tried(id), "message " + id + " was never sent");
        return seen;
    }

    /** The ids producers tried and the ones the broker acknowledged; a count to wait on. */
    private static final class Sends {
        private final Set<Long> tried = new HashSet<>(), acked = new HashSet<>(); // guarded by this

        synchronized void trying(long id) {
            tried.add(id);
        }

        synchronized void acked(long id) {
            acked.add(id);
            notifyAll();
        }

        synchronized boolean tried(long id) {
            return tried.contains(id) || acked.contains(id);
        }

        synchronized Set<Long> acked() {
            return new HashSet<>(acked);
        }

        synchronized void awaitAcked(int n) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
            while (acked.size() < n) {
                long left = deadline - System.nanoTime();
                assertTrue(left > 0, "the producers made no progress: " + acked.size() + " acknowledged");
                wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
        }
    }

    /* Producers that send `bytes`-byte messages to q, each id from its own range, until stopped or failed. */
    private static List<Thread> producers(Broker b, String q, int n, int bytes, Sends sends, AtomicBoolean stop) {
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < n; t++) {
            long base = 1_000_000L * (t + 1);
            Thread th = new Thread(() -> {
                try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true);
                        ClientProducer p = s.createProducer(q)) {
                    for (long i = base; !stop.get(); i++) {
                        sends.trying(i);
                        send(p, s, i, bytes);
                        sends.acked(i);
                    }
                } catch (Exception e) {
                    // the broker was killed or stopped: what was not acknowledged may or may not be there
                }
            }, "producer " + t);
            th.start();
            ts.add(th);
        }
        return ts;
    }

    private static void join(List<Thread> ts) throws InterruptedException {
        for (Thread t : ts) {
            t.join(WAIT_MS);
            assertFalse(t.isAlive(), t.getName() + " still runs");
        }
    }

    @Test
    @Order(1)
    void survivesKillAndDaemonRestart() throws Exception {
        Broker b = running();
        createQueue(b, "kill");
        Sends sends = new Sends();
        List<Long> consumed = new ArrayList<>();
        Xid xid = new XidImpl("branch".getBytes(), 1, "hugepool-test".getBytes());
        try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true)) {
            try (ClientProducer p = s.createProducer("kill")) {
                for (long i = 0; i < 100; i++) {
                    sends.trying(i);
                    send(p, s, i, 100);
                    sends.acked(i);
                }
            }
            s.start();
            try (ClientConsumer c = s.createConsumer("kill")) {
                for (int i = 0; i < 50; i++) {
                    ClientMessage m = c.receive(WAIT_MS);
                    assertNotNull(m, "message " + i + " did not come");
                    m.acknowledge(); // blocking: durable when it returns
                    consumed.add(m.getLongProperty("id"));
                }
            }
            try (ClientSession xa = f.createSession(true, false, false); ClientProducer p = xa.createProducer("kill")) {
                xa.start(xid, XAResource.TMNOFLAGS);
                sends.trying(-1);
                send(p, xa, -1, 100);
                xa.end(xid, XAResource.TMSUCCESS);
                xa.prepare(xid);
            }
        }

        // load: four producers; a warm restart of the daemon, then SIGKILL of the broker
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> producers = producers(b, "kill", 4, 1000, sends, stop);
        sends.awaitAcked(250);
        daemon.restart();
        sends.awaitAcked(sends.acked().size() + 200);
        b.kill();
        stop.set(true);
        join(producers);

        b.start();
        try (ClientSessionFactory f = factory(b)) {
            try (ClientSession xa = f.createSession(true, false, false)) {
                Xid[] prepared = xa.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN);
                assertEquals(1, prepared.length, "prepared transactions after the kill");
                assertEquals(xid, prepared[0]);
                xa.commit(xid, false);
            }
            List<Long> got = drain(f, "kill");
            for (long id : consumed)
                assertFalse(got.contains(id), "message " + id + " was consumed and acknowledged before the kill");
            got.addAll(consumed);
            Set<Long> seen = exactlyOnce(got, sends);
            assertTrue(seen.contains(-1L), "the prepared XA transaction's message did not come after its commit");
        }
    }

    @Test
    @Order(2)
    void reclaimKeepsTheJournalBounded() throws Exception {
        Broker b = running();
        createQueue(b, "reclaim");
        long before;
        try (HugePool pool = HugePool.connect(daemon.socket.toString())) {
            before = pool.status().journal("artemis-messages").retainLsn();
        }
        // 360 x 90 kB: four times the 8 MiB the daemon holds, each under Artemis's large-message size
        try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true);
                ClientProducer p = s.createProducer("reclaim")) {
            s.start();
            try (ClientConsumer c = s.createConsumer("reclaim")) {
                for (long i = 0; i < 360; i++) {
                    send(p, s, i, 90_000);
                    ClientMessage m = c.receive(WAIT_MS);
                    assertNotNull(m, "message " + i + " of the reclaim run did not come");
                    assertEquals(i, m.getLongProperty("id"));
                    m.acknowledge();
                }
            }
        }
        try (HugePool pool = HugePool.connect(daemon.socket.toString())) {
            long after = pool.status().journal("artemis-messages").retainLsn();
            assertTrue(after > before, "the journal was never truncated: retain LSN " + before + " then " + after);
        }
    }

    @Test
    @Order(3)
    void refusedUidStopsTheBroker() throws Exception {
        Broker b = running();
        createQueue(b, "denied");
        Sends sends = new Sends();
        try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true);
                ClientProducer p = s.createProducer("denied")) {
            for (long i = 0; i < 20; i++) {
                sends.trying(i);
                send(p, s, i, 100);
                sends.acked(i);
            }
        }
        b.kill();

        // the journals' append lists are the default, the socket's group (root's): 65534 is not in it
        Broker.BrokerFailed e = assertThrows(Broker.BrokerFailed.class, () -> b.startAs(OTHER_UID));
        assertTrue(e.getMessage().contains("hugepool-artemis: ") && e.getMessage().contains("uid " + OTHER_UID
                + " may not append to journal \"artemis-"), "a refused uid: " + e.getMessage());

        b.start();
        try (ClientSessionFactory f = factory(b)) {
            assertEquals(20, exactlyOnce(drain(f, "denied"), sends).size());
        }
    }

    @Test
    @Order(4)
    void failedJournalStopsTheBroker() throws Exception {
        Broker b = running();
        createQueue(b, "fault");
        // a cold restart of the daemon under the running broker, its message journal's 20th write to fail
        daemon.stop();
        daemon.start(Map.of("HUGEPOOLD_FAULT_INJECT", "artemis-messages:write:20"));
        assertTrue(daemon.log().contains("fault injection armed"), "no fault armed:\n" + daemon.log());

        Sends sends = new Sends();
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> producers = producers(b, "fault", 4, 1000, sends, stop);
        String out = b.awaitExit(WAIT_MS / 1000);
        join(producers);
        assertFalse(sends.acked().isEmpty(), "nothing was acknowledged before the journal failed");
        assertTrue(out.contains("journal \"artemis-messages\"") && out.contains("failed and is read-only until hugepoold restarts"),
                "the broker's output does not say the journal failed:\n" + out);

        daemon.stop();
        daemon.start();
        b.start();
        try (ClientSessionFactory f = factory(b)) {
            exactlyOnce(drain(f, "fault"), sends);
        }
    }

    /* The numbers of the messages an `artemis consumer --verbose` received ("test message: N"), each once. */
    private static Set<Integer> received(String out) {
        Set<Integer> got = new HashSet<>();
        Matcher m = Pattern.compile("Received test message: (\\d+)").matcher(out);
        while (m.find())
            assertTrue(got.add(Integer.parseInt(m.group(1))), "message " + m.group(1) + " came twice:\n" + out);
        return got;
    }

    @Test
    @Order(5)
    void amqpSurvivesKill() throws Exception {
        final int sent = 200, consumed = 50;
        Broker b = running();
        String q = "queue://amqp-kill";
        // persistent sends: the AMQP client waits for each one's settlement, durable when it came
        String out = b.client("producer", "--protocol", "amqp", "--destination", q, "--message-count", Integer.toString(sent));
        assertTrue(out.contains("Produced: " + sent + " messages"), out);
        // consumed in one transaction, committed (durable) before the consumer exits
        out = b.client("consumer", "--protocol", "amqp", "--destination", q, "--message-count", Integer.toString(consumed),
                "--commit-interval", Integer.toString(consumed), "--verbose");
        Set<Integer> before = received(out);
        assertEquals(consumed, before.size(), out);

        b.kill();
        b.start();
        // as many as should be left, each committed, then the queue must be empty
        out = b.client("consumer", "--protocol", "amqp", "--destination", q, "--message-count", Integer.toString(sent - consumed),
                "--receive-timeout", Long.toString(WAIT_MS), "--break-on-null", "--commit-interval", "1", "--verbose");
        Set<Integer> after = received(out);
        for (int n : before)
            assertFalse(after.contains(n), "message " + n + " was consumed and committed before the kill");
        for (int n = 0; n < sent; n++)
            assertTrue(before.contains(n) || after.contains(n), "message " + n + " was acknowledged to its producer and is lost");
        try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true)) {
            assertEquals(0, s.queueQuery(SimpleString.of("amqp-kill")).getMessageCount(), "messages left after all sent came");
        }
    }
}
