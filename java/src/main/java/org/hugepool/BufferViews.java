/*
 * SPDX-License-Identifier: MIT
 *
 * BufferViews.java - which direct ByteBuffers native code may read in place, where the JNI side
 * cannot tell (Native.CHECKS_BUFFERS false: a JDK whose java.nio.Buffer has none of the fields
 * hugepool_jni.c's in_place reads). A ByteBuffer can be a view of a MemorySegment whose Arena
 * closes (its memory freed or, for a Lease's, unmapped once unreachable) or of a file mapping the
 * file may shrink under (SIGBUS on a read past its end); JNI takes the address and reads. Such
 * buffers are copied through Java's accessors instead (JournalWriter, SpillStream), which throw
 * IllegalStateException for a closed Arena, atomically with its close, and InternalError for a
 * vanished page. Here MemorySegment.ofBuffer tells them apart (Java 22 and later; looked up once,
 * at the first call, which pays java.lang.foreign's own start: why the JNI side's check comes
 * first). Before Java 22 the final API has no such buffers.
 */
package org.hugepool;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;

final class BufferViews {
    /*
     * MemorySegment.ofBuffer as (ByteBuffer)Object, isMapped as (Object)boolean and scope as
     * (Object)Object, for invokeExact; the class of the scope of a buffer of no Arena (JNI's,
     * allocateDirect's: the "global" kind, which never closes). Null before Java 22.
     */
    private static final MethodHandle OF_BUFFER, IS_MAPPED, SCOPE;
    private static final Class<?> PLAIN_SCOPE;

    static {
        MethodHandle ofBuffer = null, isMapped = null, scope = null;
        Class<?> plainScope = null;
        if (Segments.SEGMENT != null) {
            try {
                MethodHandles.Lookup l = MethodHandles.lookup();
                Class<?> segment = Segments.SEGMENT;
                Class<?> scopeType = Class.forName("java.lang.foreign.MemorySegment$Scope");
                ofBuffer = l.findStatic(segment, "ofBuffer", MethodType.methodType(segment, java.nio.Buffer.class))
                        .asType(MethodType.methodType(Object.class, ByteBuffer.class));
                isMapped = l.findVirtual(segment, "isMapped", MethodType.methodType(boolean.class))
                        .asType(MethodType.methodType(boolean.class, Object.class));
                scope = l.findVirtual(segment, "scope", MethodType.methodType(scopeType))
                        .asType(MethodType.methodType(Object.class, Object.class));
                plainScope = ((Object) scope.invokeExact((Object) ofBuffer.invokeExact(ByteBuffer.allocateDirect(1))))
                        .getClass();
            } catch (Throwable e) {
                throw new ExceptionInInitializerError(e); // the Java SE API of 22 and later
            }
        }
        OF_BUFFER = ofBuffer;
        IS_MAPPED = isMapped;
        SCOPE = scope;
        PLAIN_SCOPE = plainScope;
    }

    private BufferViews() {
    }

    /*
     * Whether native code may read the direct buffer b in place: memory that stays mapped while b
     * is reachable (a Lease's buffer, JNI's, allocateDirect's, a global segment's); false for a
     * view of a segment of an Arena that can close, and for a file mapping. Callers ask
     * Native.CHECKS_BUFFERS first, so that this class, and java.lang.foreign, is loaded only where
     * the JNI side cannot tell.
     */
    static boolean inPlace(ByteBuffer b) {
        if (OF_BUFFER == null)
            return true;
        try {
            Object s = (Object) OF_BUFFER.invokeExact(b);
            return !(boolean) IS_MAPPED.invokeExact(s) && ((Object) SCOPE.invokeExact(s)).getClass() == PLAIN_SCOPE;
        } catch (Throwable t) {
            throw Segments.rethrown(t);
        }
    }
}
