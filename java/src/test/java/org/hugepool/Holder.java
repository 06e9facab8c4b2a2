/*
 * SPDX-License-Identifier: MIT
 *
 * Holder.java - the other JVM of PoolTest's SIGKILL case: leases COUNT buffers of CLASS at
 * SOCKET, fills each with BYTE, says "holding" on stdout and waits for stdin to close (it never
 * does: the test kills it with SIGKILL).
 */
package org.hugepool;

import java.nio.ByteBuffer;
import java.time.Duration;

final class Holder {
    private Holder() {
    }

    public static void main(String[] args) throws Exception {
        HugePool pool = HugePool.connect(args[0]);
        Lease lease = pool.acquire(args[1], Integer.parseInt(args[2]), Duration.ofSeconds(10));
        byte fill = (byte) Integer.parseInt(args[3]);
        for (ByteBuffer b : lease.buffers())
            while (b.hasRemaining())
                b.put(fill);
        System.out.println("holding " + lease.count());
        System.out.flush();
        System.in.read(); // until killed
    }
}
