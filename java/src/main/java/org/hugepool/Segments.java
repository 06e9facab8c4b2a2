/*
 * SPDX-License-Identifier: MIT
 *
 * Segments.java - java.lang.foreign on Java 22 and later, for a jar compiled for Java 17: the four
 * calls a Lease needs to serve a buffer as one MemorySegment of a shared Arena (Arena.ofShared,
 * MemorySegment.ofAddress, MemorySegment.reinterpret, Arena.close), looked up once as method
 * handles. Not a multi-release jar: Debian 12 builds the package with JDK 17, whose javac cannot
 * compile against the final java.lang.foreign, and a jar whose features depended on the JDK that
 * built it would differ between the package and a developer's build (docs/ARCHITECTURE.md, "Java
 * binding"). The arena and segments are held as Object here and typed by the caller's Class.
 */
package org.hugepool;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.function.Consumer;

final class Segments {
    /** The first Java whose java.lang.foreign is final. */
    static final int JAVA = 22;

    /** java.lang.foreign.MemorySegment, or null before Java 22. */
    static final Class<?> SEGMENT;

    private static final MethodHandle OF_SHARED, OF_ADDRESS, REINTERPRET, CLOSE;

    static {
        Class<?> segment = null;
        MethodHandle ofShared = null, ofAddress = null, reinterpret = null, close = null;
        if (Runtime.version().feature() >= JAVA) {
            try {
                MethodHandles.Lookup l = MethodHandles.lookup();
                Class<?> arena = Class.forName("java.lang.foreign.Arena");
                segment = Class.forName("java.lang.foreign.MemorySegment");
                ofShared = l.findStatic(arena, "ofShared", MethodType.methodType(arena));
                ofAddress = l.findStatic(segment, "ofAddress", MethodType.methodType(segment, long.class));
                reinterpret = l.findVirtual(segment, "reinterpret",
                        MethodType.methodType(segment, long.class, arena, Consumer.class));
                close = l.findVirtual(arena, "close", MethodType.methodType(void.class));
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e); // the Java SE API of 22 and later
            }
        }
        SEGMENT = segment;
        OF_SHARED = ofShared;
        OF_ADDRESS = ofAddress;
        REINTERPRET = reinterpret;
        CLOSE = close;
    }

    private Segments() {
    }

    /* UnsupportedOperationException where this Java has no final java.lang.foreign. */
    static void check(Class<?> type) {
        if (SEGMENT == null)
            throw new UnsupportedOperationException("a MemorySegment needs Java " + JAVA + " or later; this is Java "
                    + Runtime.version().feature() + ": use buffer() or slices()");
        if (type != SEGMENT)
            throw new IllegalArgumentException(type + " is not " + SEGMENT.getName());
    }

    /* A new shared Arena. */
    static Object newArena() {
        try {
            return OF_SHARED.invoke();
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    /* The memory at address, size bytes long, as a segment of arena (which unmaps nothing). */
    static Object segment(Object arena, long address, long size) {
        try {
            return REINTERPRET.invoke(OF_ADDRESS.invoke(address), size, arena, (Consumer<?>) null);
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    /*
     * Close arena: every access to its segments throws IllegalStateException from now on, in any
     * thread. IllegalStateException when a segment of it is in use (acquired by an asynchronous
     * channel's operation), and the arena stays open.
     */
    static void close(Object arena) {
        try {
            CLOSE.invoke(arena);
        } catch (Throwable t) {
            throw rethrown(t);
        }
    }

    /* What the Java API threw, as itself: these calls throw only unchecked exceptions and errors
     * (the tests' Seg unwraps its own method handles with it too). */
    static RuntimeException rethrown(Throwable t) {
        if (t instanceof RuntimeException)
            return (RuntimeException) t;
        if (t instanceof Error)
            throw (Error) t;
        return new IllegalStateException(t);
    }
}
