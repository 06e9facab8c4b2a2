/*
 * SPDX-License-Identifier: MIT
 *
 * HugepoolJournals.java - the broker plugin that puts a broker's message and bindings journals on
 * two hugepool journals (hugepool-artemis(7)): named in broker.xml's <broker-plugins>, or
 * registered in code for an embedded broker (Configuration.registerBrokerPlugin).
 *
 * Why a plugin: Artemis 2.40 has no setting for the journal's implementation. The storage manager
 * (JournalStorageManager) makes its two JournalImpls in init() and loads them only once the
 * broker's plugins are registered (ActiveMQServerImpl.initialisePart1 registers them after
 * storageManager.start(), initialisePart2 loads); a broker handler of bootstrap.xml's <server
 * configuration="scheme:..."> cannot be used either, since `artemis run` reads that URI as a file.
 * So registered() stops the two JournalImpls before they opened a file and puts a HugepoolJournal
 * in each of the storage manager's journal fields (protected fields of Artemis's own classes, set
 * by reflection, checked by name and type so that another Artemis fails at start with a message,
 * not later). Paging, large messages and the node's lock stay in Artemis's own files.
 *
 * Properties (broker.xml <property key= value=>, or the map given to init): socket (default
 * $HUGEPOOL_SOCKET or /run/hugepool/hugepoold.sock), messages (default artemis-messages),
 * bindings (default artemis-bindings), reclaim-at (the message journal's reclaim floor: bytes,
 * K/M/G suffixes; default 64M), bindings-reclaim-at (the bindings journal's, which holds a few
 * records per address and queue; default 4M), reconnect-timeout (seconds; default 30).
 */
package org.hugepool.artemis;

import java.lang.reflect.Field;
import java.time.Duration;
import java.util.Map;
import java.util.Set;

import org.apache.activemq.artemis.core.config.HAPolicyConfiguration;
import org.apache.activemq.artemis.core.io.IOCriticalErrorListener;
import org.apache.activemq.artemis.core.journal.Journal;
import org.apache.activemq.artemis.core.persistence.StorageManager;
import org.apache.activemq.artemis.core.persistence.impl.journal.AbstractJournalStorageManager;
import org.apache.activemq.artemis.core.persistence.impl.journal.JournalRecordIds;
import org.apache.activemq.artemis.core.persistence.impl.journal.JournalStorageManager;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A broker plugin: the broker's message and bindings journals on hugepoold.
 *
 * <pre>{@code
 * <broker-plugins>
 *   <broker-plugin class-name="org.hugepool.artemis.HugepoolJournals"/>
 * </broker-plugins>
 * }</pre>
 */
public class HugepoolJournals implements ActiveMQServerPlugin {
    private static final Logger log = LoggerFactory.getLogger(HugepoolJournals.class);
    private static final Set<String> KEYS = Set.of("socket", "messages", "bindings", "reclaim-at", "bindings-reclaim-at",
            "reconnect-timeout");

    private String socket;
    private String messages = "artemis-messages", bindings = "artemis-bindings";
    private long reclaimAt = 64L << 20, bindingsReclaimAt = 4L << 20;
    private Duration reconnect = Duration.ofSeconds(30);
    private HugepoolJournal messageJournal, bindingsJournal;

    /** A plugin with the defaults (broker.xml's way: then {@link #init}). */
    public HugepoolJournals() {
    }

    /**
     * A plugin for an embedded broker.
     *
     * @param properties as broker.xml's properties: socket, messages, bindings, reclaim-at, bindings-reclaim-at,
     *        reconnect-timeout
     */
    public HugepoolJournals(Map<String, String> properties) {
        init(properties);
    }

    @Override
    public void init(Map<String, String> properties) {
        for (Map.Entry<String, String> p : properties.entrySet()) {
            String k = p.getKey(), v = p.getValue();
            if (!KEYS.contains(k))
                throw new IllegalArgumentException("hugepool-artemis: unknown property \"" + k + "\" of " + getClass().getName()
                        + " (known: " + String.join(", ", KEYS) + ")");
            switch (k) {
            case "socket":
                socket = v;
                break;
            case "messages":
                messages = v;
                break;
            case "bindings":
                bindings = v;
                break;
            case "reclaim-at":
                reclaimAt = floor(k, v);
                break;
            case "bindings-reclaim-at":
                bindingsReclaimAt = floor(k, v);
                break;
            default:
                try {
                    reconnect = Duration.ofSeconds(Long.parseLong(v));
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("hugepool-artemis: reconnect-timeout \"" + v + "\": a number of seconds");
                }
            }
        }
        if (messages.equals(bindings))
            throw new IllegalArgumentException("hugepool-artemis: messages and bindings both name journal \"" + messages
                    + "\": each needs a hugepool journal of its own");
    }

    /* A reclaim floor: a size in bytes, K, M or G suffixed, at least HugepoolJournal.MIN_RECLAIM_AT. */
    private static long floor(String key, String v) {
        try {
            return size(key, v, HugepoolJournal.MIN_RECLAIM_AT, Long.MAX_VALUE);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("hugepool-artemis: " + e.getMessage());
        }
    }

    /*
     * A size in bytes, K, M or G suffixed, from min to max: the plugin's and Export's one parser of
     * them. Throws saying key, v and what it should be.
     */
    static long size(String key, String v, long min, long max) {
        String t = v.trim();
        long mult = 1;
        char last = t.isEmpty() ? ' ' : Character.toUpperCase(t.charAt(t.length() - 1));
        if (last == 'K' || last == 'M' || last == 'G') {
            mult = last == 'K' ? 1L << 10 : last == 'M' ? 1L << 20 : 1L << 30;
            t = t.substring(0, t.length() - 1);
        }
        long n;
        try {
            n = Math.multiplyExact(Long.parseLong(t), mult);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new IllegalArgumentException(key + " \"" + v + "\": a size in bytes (K, M, G allowed)");
        }
        if (n < min)
            throw new IllegalArgumentException(key + " \"" + v + "\": at least " + (min >> 10) + "K");
        if (n > max)
            throw new IllegalArgumentException(key + " \"" + v + "\": at most " + (max >> 20) + "M");
        return n;
    }

    /** @return the message journal, once the broker started (null before) */
    public HugepoolJournal messageJournal() {
        return messageJournal;
    }

    /** @return the bindings journal, once the broker started (null before) */
    public HugepoolJournal bindingsJournal() {
        return bindingsJournal;
    }

    @Override
    public void registered(ActiveMQServer server) {
        StorageManager sm = server.getStorageManager();
        if (!(sm instanceof JournalStorageManager))
            throw new IllegalStateException("hugepool-artemis: the broker's storage is " + sm.getClass().getSimpleName()
                    + ", not journals: put <persistence-enabled>true</persistence-enabled> and no <store> of a database in broker.xml");
        HAPolicyConfiguration ha = server.getConfiguration().getHAPolicyConfiguration();
        if (ha != null && ha.getType().name().startsWith("REPLICA"))
            throw new IllegalStateException("hugepool-artemis: replication (ha-policy " + ha.getType()
                    + ") copies journal files, which a hugepool journal does not have");
        JournalStorageManager jsm = (JournalStorageManager) sm;
        IOCriticalErrorListener critical = (IOCriticalErrorListener) get(jsm, AbstractJournalStorageManager.class,
                "ioCriticalErrorListener", IOCriticalErrorListener.class);
        Journal oldMessages = (Journal) get(jsm, AbstractJournalStorageManager.class, "messageJournal", Journal.class);
        Journal oldBindings = (Journal) get(jsm, AbstractJournalStorageManager.class, "bindingsJournal", Journal.class);
        get(jsm, JournalStorageManager.class, "originalMessageJournal", Journal.class);
        get(jsm, JournalStorageManager.class, "originalBindingsJournal", Journal.class);

        HugepoolJournal m = new HugepoolJournal(socket, messages, reclaimAt, reconnect, critical);
        HugepoolJournal b = new HugepoolJournal(socket, bindings, bindingsReclaimAt, reconnect, critical);
        m.replaceableRecord(JournalRecordIds.UPDATE_DELIVERY_COUNT);
        m.replaceableRecord(JournalRecordIds.SET_SCHEDULED_DELIVERY_TIME);
        try {
            b.start();
            m.start();
            // a broker that ran on its own files keeps what they hold: imported on the first start,
            // both checked before either is
            Import bindingsImport = Import.plan(oldBindings, b, "bindings");
            Import messagesImport = Import.plan(oldMessages, m, "message");
            if (bindingsImport != null)
                bindingsImport.run();
            if (messagesImport != null)
                messagesImport.run();
            oldMessages.stop();
            oldBindings.stop();
        } catch (Exception e) {
            try {
                b.stop();
                m.stop();
            } catch (Exception ignored) {
                // stopping what did start; the cause is e
            }
            throw new IllegalStateException("hugepool-artemis: " + e.getMessage(), e);
        }
        set(jsm, AbstractJournalStorageManager.class, "messageJournal", m);
        set(jsm, AbstractJournalStorageManager.class, "bindingsJournal", b);
        set(jsm, JournalStorageManager.class, "originalMessageJournal", m);
        set(jsm, JournalStorageManager.class, "originalBindingsJournal", b);
        messageJournal = m;
        bindingsJournal = b;
        log.info("hugepool-artemis: the message journal is hugepoold's \"{}\", the bindings journal \"{}\" (socket {})",
                messages, bindings, socket == null ? "default" : socket);
    }

    private static Field field(Class<?> owner, String name, Class<?> type) {
        try {
            Field f = owner.getDeclaredField(name);
            if (!type.isAssignableFrom(f.getType()))
                throw new NoSuchFieldException(name + " is a " + f.getType().getName());
            f.setAccessible(true);
            return f;
        } catch (NoSuchFieldException | RuntimeException e) {
            throw new IllegalStateException("hugepool-artemis: this Artemis has no field " + owner.getSimpleName() + "." + name
                    + " of type " + type.getSimpleName() + " (" + e.getMessage() + "); it was built for Artemis 2.40", e);
        }
    }

    private static Object get(Object o, Class<?> owner, String name, Class<?> type) {
        try {
            return field(owner, name, type).get(o);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException("hugepool-artemis: " + owner.getSimpleName() + "." + name + ": " + e.getMessage(), e);
        }
    }

    private static void set(Object o, Class<?> owner, String name, Object value) {
        try {
            field(owner, name, Journal.class).set(o, value);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException("hugepool-artemis: " + owner.getSimpleName() + "." + name + ": " + e.getMessage(), e);
        }
    }
}
