/*
 * SPDX-License-Identifier: MIT
 *
 * PoolHandle.java - what a native handle living on a HugePool's connection (a journal reader, a
 * spill stream) shares: the handle, guarded by the pool's lock like every call on the
 * connection; the closed check that stands between a closed handle and a freed pointer; close,
 * which the pool's own close does too (closeLocked, with its lock held).
 */
package org.hugepool;

abstract class PoolHandle implements AutoCloseable {
    final HugePool pool;
    private final String name; // "the reader": what a ClosedException says is closed
    private long handle; // guarded by pool.lock; 0 once closed

    PoolHandle(HugePool pool, long handle, String name) {
        this.pool = pool;
        this.handle = handle;
        this.name = name;
    }

    /* Free the native handle. */
    abstract void nativeClose(long handle);

    /** @return false once closed, or once its HugePool was closed */
    public boolean isOpen() {
        pool.lock.lock();
        try {
            return handle != 0;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Close it: a journal reader unmaps its segments (record views stay readable), a spill
     * stream's file (if any) is cut and its bytes given back. Closing twice is fine.
     */
    @Override
    public void close() {
        pool.lock.lock();
        try {
            closeLocked();
        } finally {
            pool.lock.unlock();
        }
        pool.forget(this);
    }

    /* With the pool's lock held. */
    void closeLocked() {
        if (handle != 0)
            nativeClose(handle);
        handle = 0;
    }

    /* The native handle for `what`, with the pool's lock held, or ClosedException. */
    long handle(String what) throws ClosedException {
        long h = handleOrZero();
        if (h == 0)
            throw closed(what);
        return h;
    }

    /*
     * With the pool's lock held: the native handle, or 0 when it or its pool is closed (then
     * closed(what) is the exception): for a call whose `what` is built only on failure.
     */
    long handleOrZero() {
        return pool.isOpenLocked() ? handle : 0;
    }

    ClosedException closed(String what) {
        return handle == 0 ? new ClosedException(what, name) : new ClosedException(what, "the HugePool");
    }
}
