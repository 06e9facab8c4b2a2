/*
 * SPDX-License-Identifier: MIT
 *
 * Capacity.java - how much of its daemon journal a HugepoolJournal may fill, and when it reclaims
 * (hugepool-artemis(7) "Sizing", docs/ARCHITECTURE.md "A backlog larger than the journal"): the
 * arithmetic of one daemon journal's size, as its status gave it, and the journal's reclaim
 * floor. No state and no lock: HugepoolJournal asks it with the live and window bytes it holds
 * under its lock, and CapacityTest checks its invariants alone.
 *
 * The quantities, all in bytes of records as HugepoolJournal's windowBytes counts them:
 *   usable     what the daemon's journal holds for us: its segments but two (the one the cut lies
 *              in, which a truncate does not free; the room a batch that does not fit the end of
 *              a segment leaves there), each less its header;
 *   point      the window at which a reclaim runs: RECLAIM_RATIO x the live bytes, the floor at
 *              least;
 *   capLimit   the most the window may hold so that a reclaim's copies of every live record fit
 *              beside it, a sixteenth of the journal kept for what does not wait for room (the
 *              reclaim's CUT, records queued by the appender's and the reclaimer's own threads);
 *   limit      the window a broker operation waits at: 1.5 points, never past capLimit;
 *   maxLive    a third of the journal: new records (messages) wait while the live bytes are at it;
 *   maxCarried the most live bytes a reclaim can carry forward: at capLimit it frees a 32nd.
 * What holds them together (CapacityTest): while the live bytes are at most maxCarried, a window
 * past the limit is always one a reclaim is due at (no broker thread waits with no reclaim to
 * wake it), the window at the limit and its copies fit the journal, and adds stop before the
 * live bytes reach maxCarried.
 */
package org.hugepool.artemis;

import org.hugepool.Status;

/** One daemon journal's capacity for a HugepoolJournal, from its status; immutable. */
final class Capacity {
    /* a segment's header (jformat.h's JFORMAT_BLOCK): the rest of the segment holds records */
    private static final long SEGMENT_HEADER = 4096;

    private final Status.Journal journal;
    private final long reclaimAt, usable;
    private final String where; // the journal, as the messages name it

    private Capacity(Status.Journal journal, long reclaimAt, String where) {
        this.journal = journal;
        this.reclaimAt = reclaimAt;
        this.where = where;
        this.usable = (journal.segments() - 2) * (journal.segmentSize() - SEGMENT_HEADER);
    }

    /**
     * The capacity of the daemon's journal j for a journal reclaiming at reclaimAt, if the broker
     * can keep its records there: not one with when_full = recycle, which once full reuses its
     * oldest segment and loses the live records in it (messages not consumed, prepared
     * transactions); not a direct (O_DIRECT) journal, which pads every batch to a block, bytes the
     * broker cannot count; not one of two segments, none left once two are spare.
     *
     * @param where the journal, as the messages name it
     * @throws IllegalStateException it cannot, saying why
     */
    static Capacity of(Status.Journal j, long reclaimAt, String where) {
        if (j.recycle())
            throw new IllegalStateException(where + " has when_full = recycle: once full it reuses its oldest"
                    + " segment, and the broker's records in it that are still live (messages not consumed yet,"
                    + " prepared transactions) would be lost: set when_full = block for its journals"
                    + " (hugepool-artemis(7))");
        if (j.direct())
            throw new IllegalStateException(where + " is written with O_DIRECT (direct = on), which pads every batch"
                    + " to 4096 bytes that the broker's reclaim cannot count: set direct = off for its journals"
                    + " (hugepool-artemis(7))");
        if (j.segments() < 3)
            throw new IllegalStateException(where + " has " + j.segments() + " segments: a broker's journal needs"
                    + " at least 3, one for its records and two kept spare (hugepool-artemis(7))");
        return new Capacity(j, reclaimAt, where);
    }

    static String mib(long bytes) {
        return String.format("%.1f MiB", bytes / 1048576.0);
    }

    /** The bytes of records the daemon's journal holds for us. */
    long usable() {
        return usable;
    }

    /** The window's size at which a reclaim runs. */
    long reclaimPoint(long live) {
        return Math.max(reclaimAt, HugepoolJournal.RECLAIM_RATIO * live);
    }

    /** The most the window may hold so that a reclaim's copies of `live` bytes fit beside it. */
    long capLimit(long live) {
        return usable - usable / 16 - live;
    }

    /*
     * Is a reclaim due? At the reclaim point; earlier when the journal is too small for it
     * (capLimit): once two thirds of the room the live records leave in the window are dead, so
     * that the broker does not stop at the limit while a reclaim reads, but not for less than a
     * 64th of the journal to gain. That floor bounds the early reclaim only, never the point: a
     * small reclaim floor in a large journal (reclaim-at 512 KiB in 3 x 64 MiB) has its limit,
     * 1.5 points, below a 64th of the journal, where a floor on the point left the broker waiting
     * at the limit for a reclaim never due.
     */
    boolean reclaimDue(long window, long live) {
        long room = Math.max(0, capLimit(live) - live);
        return window > Math.min(reclaimPoint(live), live + Math.max(usable / 64, 2 * room / 3));
    }

    /*
     * The window a broker operation may not queue past, i.e. where the reclaim is behind the
     * broker. Its copies and CUT are queued behind whatever the broker queued before them;
     * without a limit, a broker appending faster than a reclaim reads back would fill the
     * daemon's journal (when_full = block) with records queued ahead of the CUT that would free
     * it, and wait for ever. The limit is half as large again as the reclaim point, so the journal
     * holds at most 1.5 reclaim points and a reclaim's copies (at most a third of one): twice the
     * largest reclaim point is the daemon journal's size (hugepool-artemis(7)). A reclaim under
     * way (`reclaiming`) that began past the limit, at window `reclaimFrom` (the live records
     * died, a consumer caught up with a backlog: the point fell under a window made when it was
     * higher, which the journal held then) lets the broker append half a point more than the
     * window it cuts, not stall until it has read it all: at most 1.5 times the old point and
     * half the new one, still within twice the largest. Whatever the point, never past
     * capLimit(): in a journal smaller than that rule asks (a backlog larger than its sizing
     * counted on) a reclaim's copies still fit, the reclaims come earlier (reclaimDue) and copy
     * more, and the broker waits for them more often.
     */
    long limit(long live, boolean reclaiming, long reclaimFrom) {
        long point = reclaimPoint(live), limit = point + point / 2;
        return Math.min(capLimit(live), reclaiming && reclaimFrom > limit ? reclaimFrom + point / 2 : limit);
    }

    /** The most live bytes the journal carries: new records wait past it. */
    long maxLive() {
        return usable / 3;
    }

    /** The most live bytes a reclaim can carry forward: at capLimit() it frees a 32nd. */
    long maxCarried() {
        return (usable - usable / 16 - usable / 32) / 2;
    }

    /*
     * Are the live bytes past what a reclaim can carry forward (updates, which do not wait for
     * maxLive, piled up on records never deleted, or a journal loaded with more)? Then the window
     * limit falls to the live bytes and every operation would wait for ever: the journal fails.
     */
    boolean overfull(long live) {
        return live > maxCarried();
    }

    /** The failure of a journal whose live bytes are past what a reclaim can carry forward. */
    IllegalStateException cannotCarry(long live) {
        long perSegment = journal.segmentSize() - SEGMENT_HEADER;
        return new IllegalStateException(where + ": the records the broker still needs, " + mib(live)
                + ", are more than the journal can carry forward: it holds " + mib(usable) + " (" + journal.segments()
                + " segments of " + mib(journal.segmentSize()) + ", two kept spare), and a reclaim needs room for a"
                + " copy of them beside them; give it at least " + (2 + (3 * live + perSegment - 1) / perSegment)
                + " segments (hugepool-artemis(7))");
    }
}
