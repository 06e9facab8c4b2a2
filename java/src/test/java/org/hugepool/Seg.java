/*
 * SPDX-License-Identifier: MIT
 *
 * Seg.java - the tests' way to a java.lang.foreign.MemorySegment (Java 22 and later) while being
 * compiled for Java 17: a Lease's segment as an Object, its size, and a ByteBuffer over a part of
 * it (MemorySegment.asSlice and asByteBuffer), whose every access checks the segment's Arena.
 */
package org.hugepool;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

final class Seg {
    /** MemorySegment, or null before Java 22. */
    static final Class<?> TYPE = Segments.SEGMENT;
    private static final MethodHandle BYTE_SIZE, AS_SLICE, AS_BYTE_BUFFER;

    static {
        MethodHandle size = null, slice = null, bytes = null;
        if (TYPE != null) {
            MethodHandles.Lookup l = MethodHandles.publicLookup();
            try {
                size = l.findVirtual(TYPE, "byteSize", MethodType.methodType(long.class));
                slice = l.findVirtual(TYPE, "asSlice", MethodType.methodType(TYPE, long.class, long.class));
                bytes = l.findVirtual(TYPE, "asByteBuffer", MethodType.methodType(ByteBuffer.class));
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }
        BYTE_SIZE = size;
        AS_SLICE = slice;
        AS_BYTE_BUFFER = bytes;
    }

    private Seg() {
    }

    static Object of(Lease lease, int i) throws ClosedException {
        return lease.segment(i, TYPE);
    }

    static long size(Object segment) {
        try {
            return (long) BYTE_SIZE.invoke(segment);
        } catch (Throwable t) {
            throw Segments.rethrown(t);
        }
    }

    /* length bytes of segment from offset, as a native-order ByteBuffer of the segment's. */
    static ByteBuffer bytes(Object segment, long offset, long length) {
        try {
            return ((ByteBuffer) AS_BYTE_BUFFER.invoke(AS_SLICE.invoke(segment, offset, length))).order(ByteOrder.nativeOrder());
        } catch (Throwable t) {
            throw Segments.rethrown(t);
        }
    }
}
