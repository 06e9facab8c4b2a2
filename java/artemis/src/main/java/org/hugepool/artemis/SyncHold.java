/*
 * SPDX-License-Identifier: MIT
 *
 * SyncHold.java - whether a record someone waits for, arriving while the journal's appender is
 * idle, goes to the daemon at once or waits a little for a partner to share its sync; and for
 * how long (docs/ARCHITECTURE.md "Artemis on hugepool", hugepool-artemis(7) "Completions").
 *
 * Artemis's TimedBuffer holds every sync for a fixed journal-buffer-timeout that `artemis create`
 * measures on the disk. The broker's appender is the daemon journal's one writer, so the daemon
 * flushes what it appends at once, and the pairs a broker makes are lost: at one producer with a
 * consumer, a durable send and the consumer's commit arrive a few tens of microseconds apart after
 * each sync, the first is synced alone and the second waits for the rest of that sync and then its
 * own (1.6-1.7 syncs per send). Holding the first for the second costs the first the gap between
 * them and saves the second what was left of the first's sync: it pays when the gap is below half
 * a sync, and only when a partner comes. So the hold window is half the sync the appender waits
 * for (measured), and a record is held only while more than half of the recent lone records had
 * exactly one partner within that window: observed whether or not they were held (the first
 * waited record after the window closes the observation), so a broker whose syncs come alone
 * (one producer, no consumer) stops holding without paying a hold to learn it, and one whose
 * pairs return starts again. A crowd (more producers) is not a pair: the records after the
 * first fill the next sync anyway, and holding there cost the appender a wake-up more per group
 * and the broker 8% of its sends at 8 producers.
 *
 * Not thread-safe: arrive() under the journal's lock, synced() on the appender alone.
 */
package org.hugepool.artemis;

final class SyncHold {
    /* the shortest and the longest hold (a sync below 2x the shortest is not worth holding for) */
    static final long MIN_NS = 20_000, MAX_NS = 1_000_000;
    /* the share of lone records with one partner within the window above which holding pays */
    static final double PAYS = 0.5;
    /* weight of the newest observation in pairRate and of the newest wait in syncNs */
    private static final double ALPHA = 1.0 / 8;

    private volatile long syncNs; // the appender's wait for a group's durability, smoothed
    private double pairRate; // of the recent lone records, the share with one partner in the window
    private long openedAt; // when the last lone record arrived, its window not yet closed; 0: none
    private long openedWindow; // the window it was observed with
    private int partners; // the waited records that came within it
    private long forcedNs; // tests: hold every lone record this long

    /**
     * A record someone waits for is queued (under the journal's lock).
     *
     * @param now System.nanoTime()
     * @param idle whether the appender is idle and holds nothing: this record would go alone
     * @return the time until which to hold it (0: append it now); the next waited record ends a hold
     */
    long arrive(long now, boolean idle) {
        if (openedAt != 0) {
            if (now - openedAt <= openedWindow) {
                partners++; // ends the hold under way, or came during that record's sync
                return 0;
            }
            // its window closed: a pair if exactly one came (a crowd fills the next sync anyway)
            pairRate += ALPHA * ((partners == 1 ? 1 : 0) - pairRate);
            openedAt = 0;
        }
        if (!idle)
            return 0;
        long window = window();
        if (window == 0)
            return 0;
        openedAt = now;
        openedWindow = window;
        partners = 0;
        return forcedNs > 0 || pairRate > PAYS ? now + window : 0;
    }

    /** The appender waited this long for a group it appended to become durable. */
    void synced(long ns) {
        syncNs = syncNs == 0 ? ns : syncNs + (long) (ALPHA * (ns - syncNs));
    }

    /* Half a sync, within [MIN_NS, MAX_NS]; 0 where syncs are too short to hold for. */
    long window() {
        if (forcedNs > 0)
            return forcedNs;
        long half = syncNs / 2;
        return half < MIN_NS ? 0 : Math.min(half, MAX_NS);
    }

    double pairRate() {
        return pairRate;
    }

    /* Tests: hold every lone record from now on for ns (0: learn again). */
    void force(long ns) {
        forcedNs = ns;
        openedAt = 0;
    }
}
