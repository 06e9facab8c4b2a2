/*
 * SPDX-License-Identifier: MIT
 *
 * ClosedException.java - a handle used after its close (or its HugePool's): thrown by the Java
 * side before anything reaches the native library, so a closed handle can never be a freed
 * pointer.
 */
package org.hugepool;

/**
 * A handle ({@link HugePool}, {@link Lease}, {@link JournalWriter}, {@link JournalReader},
 * {@link SpillStream}) was used after it was closed, or after the {@link HugePool} it came from was
 * closed. Errno EBADF. ByteBuffers taken from a lease are not handles: they stay usable after the
 * release and read zeroes ({@link Lease}).
 */
public class ClosedException extends HugepoolException {
    private static final long serialVersionUID = 1L;

    ClosedException(String operation, String what) {
        super(operation, Native.EBADF, what + " is closed", "");
    }
}
