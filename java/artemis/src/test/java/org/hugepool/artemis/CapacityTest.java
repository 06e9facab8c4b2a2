/*
 * SPDX-License-Identifier: MIT
 *
 * CapacityTest.java - the arithmetic of how much of its daemon journal a HugepoolJournal fills
 * (Capacity), over journals from 3 segments of 1 MiB to 64 of 64 MiB and every reclaim floor
 * from the least to 1 GiB, with no daemon:
 *  - while the live bytes are what a reclaim can carry, a broker operation that waits at the
 *    window limit always has a reclaim due to wake it; the window at the limit and a copy of the
 *    live records fit the journal; new records stop before the live bytes reach what a reclaim
 *    can carry, and past it the journal is overfull;
 *  - in a journal sized as hugepool-artemis(7) says, for a backlog up to the one it was sized
 *    for, the limits are the reclaim point's alone (1.5 points; a reclaim past the point);
 *  - "give it at least N segments" is enough: a journal of N carries those live bytes;
 *  - a journal of two segments, a direct one and one that recycles its segments are refused.
 * ReclaimTest and EmbeddedBrokerTest show the same limits on a real daemon.
 */
package org.hugepool.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.hugepool.Status;
import org.junit.jupiter.api.Test;

class CapacityTest {
    private static final long MIB = 1 << 20;
    private static final int[] SEGMENTS = { 3, 4, 5, 6, 8, 13, 32, 64 };
    private static final long[] SEGMENT_SIZES = { MIB, 2 * MIB, 4 * MIB, 64 * MIB };
    private static final long[] RECLAIM_AT = { HugepoolJournal.MIN_RECLAIM_AT, 4 * MIB, 64 * MIB, 1024 * MIB };

    private static Status.Journal journal(int segments, long segmentSize, boolean direct) {
        return journal(segments, segmentSize, direct, false);
    }

    private static Status.Journal journal(int segments, long segmentSize, boolean direct, boolean recycle) {
        return new Status.Journal("j", "io_uring", "", Status.Journal.OK, 1, 0, 0, 0, 0, 1, segments, segmentSize,
                direct, recycle);
    }

    private static Capacity capacity(int segments, long segmentSize, long reclaimAt) {
        return Capacity.of(journal(segments, segmentSize, false), reclaimAt, "journal j");
    }

    @Test
    void aBrokerWaitingAtTheLimitAlwaysHasAReclaimDueAndItsCopiesFit() {
        int cases = 0;
        for (int segments : SEGMENTS)
            for (long size : SEGMENT_SIZES)
                for (long reclaimAt : RECLAIM_AT) {
                    Capacity c = capacity(segments, size, reclaimAt);
                    long u = c.usable(), carried = c.maxCarried();
                    String what = segments + " x " + size + " B, reclaim at " + reclaimAt + ": ";
                    assertTrue(c.maxLive() < carried, what + "adds stop before the live bytes are past a reclaim");
                    assertFalse(c.overfull(carried), what + "the most a reclaim carries is not overfull");
                    assertTrue(c.overfull(carried + 1), what + "more is");
                    for (int step = 0; step <= 1000; step++) {
                        long live = carried * step / 1000;
                        long limit = c.limit(live, false, 0);
                        assertTrue(c.reclaimDue(limit + 1, live), what + live + " live bytes: a window past the"
                                + " limit, " + limit + ", with no reclaim due");
                        assertTrue(limit + live <= u - u / 16, what + live + " live bytes: the window at the limit, "
                                + limit + ", and a copy of them do not fit " + u);
                        // a reclaim under way that began past the limit lets the broker go on, within the journal
                        long during = c.limit(live, true, 2 * limit);
                        assertTrue(during >= limit && during + live <= u - u / 16, what + live + " live bytes: "
                                + during + " while a reclaim from " + 2 * limit + " runs");
                        cases++;
                    }
                }
        assertEquals(SEGMENTS.length * SEGMENT_SIZES.length * RECLAIM_AT.length * 1001, cases);
    }

    /*
     * hugepool-artemis(7): segments x segment_size for twice the larger of reclaim-at and three
     * times the backlog, plus two segments. Its example (512 MiB for a backlog of 64 MiB), the
     * bench's message journal (2 GiB for 256 MiB) and a bindings journal (4 x 4 MiB, reclaim at
     * 4 MiB, a few hundred KiB kept).
     */
    @Test
    void underTheManPagesSizingOnlyTheReclaimPointCounts() {
        long[][] sized = { // segments, segment size, reclaim-at, the backlog it was sized for
                { 8, 64 * MIB, 64 * MIB, 64 * MIB },
                { 32, 64 * MIB, 64 * MIB, 256 * MIB },
                { 4, 4 * MIB, 4 * MIB, MIB / 2 } };
        for (long[] s : sized) {
            Capacity c = capacity((int) s[0], s[1], s[2]);
            for (long live = 0; live <= s[3]; live += s[3] / 512) {
                long point = c.reclaimPoint(live);
                assertEquals(point + point / 2, c.limit(live, false, 0), s[0] + " x " + s[1] + " B at " + live);
                assertFalse(c.reclaimDue(point, live), s[0] + " x " + s[1] + " B at " + live + ": due before the point");
                assertTrue(c.reclaimDue(point + 1, live), s[0] + " x " + s[1] + " B at " + live + ": not due past it");
            }
        }
    }

    @Test
    void theSegmentsTheFailureAsksForCarryTheLiveBytes() {
        Pattern n = Pattern.compile("give it at least (\\d+) segments");
        for (long size : SEGMENT_SIZES)
            for (long live = MIB / 3; live < 4096 * MIB; live = live * 3 / 2) {
                Capacity small = capacity(3, size, HugepoolJournal.MIN_RECLAIM_AT);
                if (!small.overfull(live))
                    continue;
                Matcher m = n.matcher(small.cannotCarry(live).getMessage());
                assertTrue(m.find(), "no segment count in the message");
                int asked = Integer.parseInt(m.group(1));
                Capacity enough = capacity(asked, size, HugepoolJournal.MIN_RECLAIM_AT);
                assertFalse(enough.overfull(live), asked + " x " + size + " B does not carry " + live);
                assertTrue(live <= enough.maxLive(), asked + " x " + size + " B makes new records wait at " + live);
            }
    }

    @Test
    void twoSegmentsDirectAndRecyclingJournalsAreRefused() {
        IllegalStateException two = assertThrows(IllegalStateException.class,
                () -> Capacity.of(journal(2, 64 * MIB, false), 64 * MIB, "journal j"));
        assertTrue(two.getMessage().contains("at least 3"), two.getMessage());
        IllegalStateException direct = assertThrows(IllegalStateException.class,
                () -> Capacity.of(journal(8, 64 * MIB, true), 64 * MIB, "journal j"));
        assertTrue(direct.getMessage().contains("direct = off"), direct.getMessage());
        IllegalStateException recycle = assertThrows(IllegalStateException.class,
                () -> Capacity.of(journal(8, 64 * MIB, false, true), 64 * MIB, "journal j"));
        assertTrue(recycle.getMessage().contains("when_full = block"), recycle.getMessage());
        capacity(3, MIB, HugepoolJournal.MIN_RECLAIM_AT);
    }
}
