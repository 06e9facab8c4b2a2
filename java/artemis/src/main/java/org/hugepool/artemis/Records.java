/*
 * SPDX-License-Identifier: MIT
 *
 * Records.java - how one Artemis journal operation is one hugepool journal record: a 32-byte
 * header in front of the bytes Artemis encoded (docs/ARCHITECTURE.md, "Artemis on hugepool").
 * HugepoolJournal writes them, Replay reads them back; this class is the one description of the
 * layout (named offsets, as Agrona's descriptors do), nothing else counts bytes.
 *
 *   0  kind      ADD ... CUT below
 *   1  flags     COPY: carried forward by a reclaim, `key` names the original's place
 *   2  userType  Artemis's record type (JournalRecordIds), 0 where it has none
 *   3  version   FORMAT; a record of another version stops the load
 *   4  idx       a transactional record's place in its transaction (1, 2, ...); 0 otherwise
 *   8  key       COPY: the LSN whose place the record takes (the original's LSN, or its
 *                transaction's commit's); 0 otherwise
 *  16  id        the record's id; PREPARE, COMMIT, ROLLBACK: 0; CUT: the cut LSN
 *  24  txId      the transaction; 0 outside one
 *  32  payload   what Artemis encoded (ADD, UPDATE, the *_TX kinds, EVENT), PREPARE's data
 */
package org.hugepool.artemis;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

final class Records {
    static final byte ADD = 1, UPDATE = 2, DELETE = 3, ADD_TX = 4, UPDATE_TX = 5, DELETE_TX = 6, PREPARE = 7,
            COMMIT = 8, ROLLBACK = 9, EVENT = 10, CUT = 11;
    static final byte COPY = 1;
    static final byte FORMAT = 1;

    static final int KIND = 0, FLAGS = 1, USER_TYPE = 2, VERSION = 3, IDX = 4, KEY = 8, ID = 16, TX = 24;
    static final int HEADER = 32;

    /* What the daemon adds to every record on disk (jformat.h: 24 bytes, padded to 8), for the
     * journal's size as the reclaim counts it. */
    static final int DAEMON_OVERHEAD = 24;

    private Records() {
    }

    static int onDisk(int len) {
        return DAEMON_OVERHEAD + ((len + 7) & ~7);
    }

    /* A record of `payload` bytes after the header, the header filled but for idx and key. */
    static byte[] make(byte kind, byte userType, long id, long txId, int payload) {
        byte[] r = new byte[HEADER + payload];
        ByteBuffer b = ByteBuffer.wrap(r).order(ByteOrder.LITTLE_ENDIAN);
        b.put(KIND, kind).put(USER_TYPE, userType).put(VERSION, FORMAT).putLong(ID, id).putLong(TX, txId);
        return r;
    }

    static void setIdx(byte[] r, int idx) {
        ByteBuffer.wrap(r).order(ByteOrder.LITTLE_ENDIAN).putInt(IDX, idx);
    }

    /* A copy of a record read back, taking the place (key, idx) as kind (a committed
     * transaction's records are carried forward as plain ADD and UPDATE). */
    static byte[] copy(ByteBuffer original, byte kind, long key, int idx) {
        byte[] r = new byte[original.remaining()];
        original.duplicate().get(r);
        ByteBuffer b = ByteBuffer.wrap(r).order(ByteOrder.LITTLE_ENDIAN);
        b.put(KIND, kind).put(FLAGS, COPY).putInt(IDX, idx).putLong(KEY, key);
        if (kind == ADD || kind == UPDATE)
            b.putLong(TX, 0);
        return r;
    }

    static String kindName(byte kind) {
        switch (kind) {
        case ADD: return "add";
        case UPDATE: return "update";
        case DELETE: return "delete";
        case ADD_TX: return "transactional add";
        case UPDATE_TX: return "transactional update";
        case DELETE_TX: return "transactional delete";
        case PREPARE: return "prepare";
        case COMMIT: return "commit";
        case ROLLBACK: return "rollback";
        case EVENT: return "event";
        case CUT: return "cut";
        default: return "kind " + kind;
        }
    }

    /** One record as read back: its LSN and its fields. */
    static final class Read {
        final long lsn;
        final byte kind, flags, userType;
        final int idx, size;
        final long key, id, txId;
        private final ByteBuffer whole; // the reader's: valid until its next call, used only then

        Read(long lsn, ByteBuffer data, String journal) {
            ByteBuffer b = data.duplicate().order(ByteOrder.LITTLE_ENDIAN);
            int p = b.position();
            if (b.remaining() < HEADER)
                throw new IllegalStateException("journal \"" + journal + "\": LSN " + lsn + " holds " + b.remaining()
                        + " bytes, less than a record header of hugepool-artemis: is this journal another program's?");
            if (b.get(p + VERSION) != FORMAT)
                throw new IllegalStateException("journal \"" + journal + "\": LSN " + lsn + " is a record of format "
                        + b.get(p + VERSION) + ", this hugepool-artemis reads format " + FORMAT
                        + ": is this journal another program's?");
            this.lsn = lsn;
            kind = b.get(p + KIND);
            flags = b.get(p + FLAGS);
            userType = b.get(p + USER_TYPE);
            idx = b.getInt(p + IDX);
            key = b.getLong(p + KEY);
            id = b.getLong(p + ID);
            txId = b.getLong(p + TX);
            size = b.remaining();
            whole = data;
            if (kind < ADD || kind > CUT)
                throw new IllegalStateException("journal \"" + journal + "\": LSN " + lsn + " has record kind " + kind
                        + ", which hugepool-artemis does not write");
        }

        boolean copy() {
            return (flags & COPY) != 0;
        }

        /* The place in the order of the journal: the original's, for a copy. */
        long major() {
            return copy() ? key : lsn;
        }

        byte[] payload() {
            byte[] d = new byte[size - HEADER];
            ByteBuffer b = whole.duplicate();
            b.position(b.position() + HEADER);
            b.get(d);
            return d;
        }
    }
}
