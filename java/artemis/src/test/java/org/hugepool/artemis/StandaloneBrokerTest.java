/*
 * SPDX-License-Identifier: MIT
 *
 * StandaloneBrokerTest.java - a broker made by Artemis 2.40.0's `artemis create`, switched to
 * hugepool as hugepool-artemis(7) says, with a real hugepoold, driven over the core protocol:
 *  - persistent sends under load, a warm restart of the daemon (hugepoolctl restart) while they
 *    go on, then SIGKILL of the broker mid-load and a restart: every send acknowledged to its
 *    producer is delivered exactly once, nothing consumed and acknowledged before the kill comes
 *    back, an XA transaction prepared before the kill is still prepared and commits;
 *  - 30 MB sent and consumed through journals of 8 MiB each: the reclaim keeps them bounded
 *    (with when_full = block the broker would stall otherwise) and the daemon's truncation point
 *    moved;
 *  - the operator's errors: no daemon at the socket, a journal the daemon does not have: the
 *    broker does not start, and says why.
 */
package org.hugepool.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import javax.transaction.xa.XAResource;
import javax.transaction.xa.Xid;

import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.core.transaction.impl.XidImpl;
import org.hugepool.HugePool;
import org.junit.jupiter.api.Test;

class StandaloneBrokerTest {
    private static final long WAIT_MS = 60_000; // a receive that waits this long is a hang, not an answer

    private static String journals() {
        return TestDaemon.journal("artemis-messages", "2M", 4) + TestDaemon.journal("artemis-bindings", "2M", 4);
    }

    private static ClientSessionFactory factory(Broker b) throws Exception {
        ServerLocator l = ActiveMQClient.createServerLocator(b.url());
        l.setBlockOnDurableSend(true).setBlockOnAcknowledge(true).setReconnectAttempts(0).setCallTimeout(WAIT_MS);
        return l.createSessionFactory();
    }

    private static void send(ClientProducer p, ClientSession s, long id, int bytes) throws Exception {
        ClientMessage m = s.createMessage(true);
        m.putLongProperty("id", id);
        m.getBodyBuffer().writeBytes(new byte[bytes]);
        p.send(m);
    }

    /* Receive everything the queue holds now: ids in arrival order. */
    private static List<Long> drain(ClientSessionFactory f) throws Exception {
        List<Long> got = new ArrayList<>();
        try (ClientSession s = f.createSession(false, true, true)) {
            long n = s.queueQuery(org.apache.activemq.artemis.api.core.SimpleString.of("q")).getMessageCount();
            s.start();
            try (ClientConsumer c = s.createConsumer("q")) {
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

    @Test
    void survivesKillAndDaemonRestart() throws Exception {
        try (TestDaemon d = new TestDaemon(journals()).start();
                Broker b = new Broker(d.dir, Map.of("socket", d.socket.toString(), "reclaim-at", "1M"))) {
            b.start();
            Set<Long> acked = ConcurrentHashMap.newKeySet(), tried = ConcurrentHashMap.newKeySet();
            List<Long> consumed = new ArrayList<>();
            Xid xid = new XidImpl("branch".getBytes(), 1, "hugepool-test".getBytes());
            try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true)) {
                s.createQueue(QueueConfiguration.of("q").setRoutingType(RoutingType.ANYCAST).setDurable(true));
                try (ClientProducer p = s.createProducer("q")) {
                    for (long i = 0; i < 200; i++) {
                        send(p, s, i, 100);
                        acked.add(i);
                    }
                }
                s.start();
                try (ClientConsumer c = s.createConsumer("q")) {
                    for (int i = 0; i < 100; i++) {
                        ClientMessage m = c.receive(WAIT_MS);
                        m.acknowledge(); // blocking: durable when it returns
                        consumed.add(m.getLongProperty("id"));
                    }
                }
                try (ClientSession xa = f.createSession(true, false, false); ClientProducer p = xa.createProducer("q")) {
                    xa.start(xid, XAResource.TMNOFLAGS);
                    send(p, xa, -1, 100);
                    xa.end(xid, XAResource.TMSUCCESS);
                    xa.prepare(xid);
                }
            }

            // load: four producers; a warm restart of the daemon, then SIGKILL of the broker
            AtomicBoolean stop = new AtomicBoolean();
            List<Thread> producers = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                long base = 1_000_000L * (t + 1);
                Thread th = new Thread(() -> {
                    try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true);
                            ClientProducer p = s.createProducer("q")) {
                        for (long i = base; !stop.get(); i++) {
                            tried.add(i);
                            send(p, s, i, 1000);
                            acked.add(i);
                        }
                    } catch (Exception e) {
                        // the broker was killed: what was not acknowledged may or may not be there
                    }
                });
                th.start();
                producers.add(th);
            }
            awaitAcked(acked, 600);
            d.restart();
            awaitAcked(acked, 1200);
            b.kill();
            stop.set(true);
            for (Thread th : producers)
                th.join();

            b.start();
            try (ClientSessionFactory f = factory(b)) {
                try (ClientSession xa = f.createSession(true, false, false)) {
                    Xid[] prepared = xa.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN);
                    assertEquals(1, prepared.length, "prepared transactions after the kill");
                    assertEquals(xid, prepared[0]);
                    xa.commit(xid, false);
                }
                List<Long> got = drain(f);
                Set<Long> seen = new HashSet<>();
                for (long id : got)
                    assertTrue(seen.add(id), "message " + id + " delivered twice");
                for (long id : consumed)
                    assertTrue(!seen.contains(id), "message " + id + " was consumed and acknowledged before the kill");
                for (long id : acked)
                    assertTrue(seen.contains(id) || consumed.contains(id), "acknowledged message " + id + " is lost");
                assertTrue(seen.contains(-1L), "the prepared XA transaction's message did not come after its commit");
                for (long id : seen)
                    assertTrue(id == -1 || acked.contains(id) || tried.contains(id), "message " + id + " was never sent");
            }

            // reclaim: 30 MB through 8 MiB journals
            long before;
            try (HugePool pool = HugePool.connect(d.socket.toString())) {
                before = pool.status().journal("artemis-messages").retainLsn();
            }
            try (ClientSessionFactory f = factory(b); ClientSession s = f.createSession(false, true, true);
                    ClientProducer p = s.createProducer("q")) {
                s.start();
                try (ClientConsumer c = s.createConsumer("q")) {
                    for (long i = 0; i < 3000; i++) {
                        send(p, s, 5_000_000L + i, 10_000);
                        ClientMessage m = c.receive(WAIT_MS);
                        assertNotNull(m, "message " + i + " of the reclaim run did not come");
                        m.acknowledge();
                    }
                }
            }
            try (HugePool pool = HugePool.connect(d.socket.toString())) {
                long after = pool.status().journal("artemis-messages").retainLsn();
                assertTrue(after > before, "the journal was never truncated: retain LSN " + before + " then " + after);
            }
            b.stop();
        }
    }

    private static void awaitAcked(Set<Long> acked, int n) throws InterruptedException {
        // the producers' progress has no event to wait on; this is a bounded look, not a timing
        long deadline = System.nanoTime() + WAIT_MS * 1_000_000L;
        while (acked.size() < n) {
            assertTrue(System.nanoTime() < deadline, "the producers made no progress: " + acked.size() + " acknowledged");
            Thread.sleep(10);
        }
    }

    @Test
    void operatorErrorsNameTheirCause() throws Exception {
        try (TestDaemon d = new TestDaemon(journals()).start()) {
            Path none = d.dir.resolve("nosuch.sock");
            try (Broker b = new Broker(d.dir.resolve("a"), Map.of("socket", none.toString()))) {
                Broker.BrokerFailed e = assertThrows(Broker.BrokerFailed.class, b::start);
                assertTrue(e.getMessage().contains("hugepool-artemis") && e.getMessage().contains(none.toString()),
                        "no daemon: " + e.getMessage());
            }
            try (Broker b = new Broker(d.dir.resolve("b"), Map.of("socket", d.socket.toString(), "messages", "nosuch"))) {
                Broker.BrokerFailed e = assertThrows(Broker.BrokerFailed.class, b::start);
                assertTrue(e.getMessage().contains("\"nosuch\"") && e.getMessage().contains("has no such journal"),
                        "unknown journal: " + e.getMessage());
            }
        }
    }
}
