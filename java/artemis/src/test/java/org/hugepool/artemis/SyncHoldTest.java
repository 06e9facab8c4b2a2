/*
 * SPDX-License-Identifier: MIT
 *
 * SyncHoldTest.java - when a HugepoolJournal holds a lone record someone waits for, and for how
 * long (SyncHold), on made-up arrival times; CompletionTest shows a hold on a real daemon.
 *  - nothing is held until lone records have been seen to come in pairs: a fresh journal, and
 *    one whose waited records come alone (one producer, no consumer), append at once;
 *  - once most lone records had one partner within half a sync (whether or not they were held),
 *    a lone record is held for half the sync the appender measures, and its partner ends the
 *    hold; when partners stop coming, holds stop; a crowd within the window (more producers) is
 *    not a pair;
 *  - the window is half a sync, at most SyncHold.MAX_NS; syncs too short to hold for (a RAM
 *    disk's) get none, however paired their records;
 *  - a record that meets the appender busy (a sync in flight) is never held.
 */
package org.hugepool.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SyncHoldTest {
    private static final long US = 1000, SYNC = 200 * US;

    /* A SyncHold whose appender waited `sync` for its first group. */
    private static SyncHold measured(long sync) {
        SyncHold h = new SyncHold();
        h.synced(sync);
        return h;
    }

    /*
     * n lone records 1 ms apart, each with a partner `gap` later, syncs of `sync`: the partner
     * meets the appender waiting for the first's sync, or holding the first; either way not a
     * lone record (HugepoolJournal.queue)
     */
    private static long pairs(SyncHold h, long t, int n, long gap, long sync) {
        for (int i = 0; i < n; i++, t += 1000 * US) {
            h.arrive(t, true);
            h.arrive(t + gap, false);
            h.synced(sync);
        }
        return t;
    }

    @Test
    void holdsOnlyOnceRecordsComeInPairs() {
        SyncHold h = measured(SYNC);
        assertEquals(0, h.arrive(0, true), "a fresh journal held a record");
        // records alone, one per 1 ms: never held
        long t = 0;
        for (int i = 0; i < 50; i++, t += 1000 * US) {
            assertEquals(0, h.arrive(t, true), "a record held although records came alone (" + i + ")");
            h.synced(SYNC);
        }
        // pairs 30 us apart, during the first's sync: held after a few
        t = pairs(h, t, 20, 30 * US, SYNC);
        assertTrue(h.pairRate() > SyncHold.PAYS, "pair rate " + h.pairRate());
        assertEquals(t + SYNC / 2, h.arrive(t, true), "a lone record is held for half a sync");
        assertEquals(0, h.arrive(t + 30 * US, false), "its partner ends the hold");
        // partners stop coming: holds stop
        t += 1000 * US;
        int held = 0;
        for (int i = 0; i < 50; i++, t += 1000 * US)
            if (h.arrive(t, true) != 0)
                held++;
        assertTrue(held > 0 && held < 10, held + " of 50 lone records held after their partners stopped");
        assertEquals(0, h.arrive(t, true), "still holding with no partner for 50 records");
    }

    @Test
    void partnersTooLateDoNotCount() {
        SyncHold h = measured(SYNC);
        // the partner comes 150 us after, beyond half a sync: holding would cost more than it saves
        long t = pairs(h, 0, 50, 150 * US, SYNC);
        assertTrue(h.pairRate() < SyncHold.PAYS, "pair rate " + h.pairRate());
        assertEquals(0, h.arrive(t, true));
    }

    @Test
    void aCrowdIsNotAPair() {
        SyncHold h = measured(SYNC);
        // three more waited records within each lone one's window (producers outnumbering one)
        long t = 0;
        for (int i = 0; i < 50; i++, t += 1000 * US) {
            assertEquals(0, h.arrive(t, true), "a record held although a crowd followed it (" + i + ")");
            for (int k = 1; k <= 3; k++)
                h.arrive(t + k * 10 * US, false);
            h.synced(SYNC);
        }
        assertEquals(0, h.pairRate());
    }

    @Test
    void windowIsHalfASyncWithinBounds() {
        SyncHold h = measured(10 * 1000 * US); // 10 ms syncs: at most MAX_NS
        assertEquals(SyncHold.MAX_NS, h.window());
        SyncHold ram = measured(30 * US); // a RAM disk: nothing to hold for
        assertEquals(0, ram.window());
        long t = pairs(ram, 0, 50, 1 * US, 30 * US);
        assertEquals(0, ram.arrive(t, true), "held for a sync too short to hold for");
    }

    @Test
    void aRecordDuringASyncIsNotHeld() {
        SyncHold h = measured(SYNC);
        long t = pairs(h, 0, 20, 30 * US, SYNC);
        assertEquals(0, h.arrive(t, false), "a record that met the appender busy was held");
        h.force(50 * US);
        assertEquals(t + 2000 * US + 50 * US, h.arrive(t + 2000 * US, true), "force holds a lone record");
    }
}
