/*
 * SPDX-License-Identifier: MIT
 */
/**
 * The Java client of hugepoold: pre-faulted hugepage buffers as direct {@link java.nio.ByteBuffer}s
 * (and on Java 22 and later as {@code MemorySegment}s), durable journals and spill streams, over
 * libhugepool through JNI (hugepool-java(7)).
 *
 * <p>Start with {@link org.hugepool.HugePool#connect()}. Every handle ({@link org.hugepool.HugePool},
 * {@link org.hugepool.Lease}, {@link org.hugepool.JournalWriter}, {@link org.hugepool.JournalReader},
 * {@link org.hugepool.SpillStream}) is {@link java.lang.AutoCloseable}; every failure is a
 * {@link org.hugepool.HugepoolException}, an {@link java.io.IOException} that carries the errno and
 * the daemon's own explanation.
 *
 * <p>The native library ({@code libhugepool_jni.so}) is found through the system property
 * {@code hugepool.jni.library} (a path), then {@code java.library.path}, then the directories the
 * packages install it in ({@code /usr/lib/<multiarch>/jni}, {@code /usr/lib/jni},
 * {@code /usr/local/lib/jni}). On Java 24 and later, run with
 * {@code --enable-native-access=ALL-UNNAMED} (or the module's name) to allow it without a warning.
 */
package org.hugepool;
