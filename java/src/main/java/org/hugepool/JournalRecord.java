/*
 * SPDX-License-Identifier: MIT
 *
 * JournalRecord.java - one record JournalReader.next() replays: its LSN and a read-only view of
 * its bytes in the reader's own (Java-owned) memory.
 */
package org.hugepool;

import java.nio.ByteBuffer;

/**
 * A durable journal record.
 *
 * @param lsn its log sequence number (1, 2, ... in the order the daemon wrote them)
 * @param data its bytes, read-only, position 0 to limit; valid until the reader's next call to
 *        {@link JournalReader#next()} (which reuses the memory: copy what you keep); after that it
 *        reads other bytes, never faults
 */
public record JournalRecord(long lsn, ByteBuffer data) {
    /**
     * The record's bytes, copied into a new array.
     *
     * @return a copy of the bytes
     */
    public byte[] bytes() {
        byte[] b = new byte[data.remaining()];
        data.duplicate().get(b);
        return b;
    }
}
