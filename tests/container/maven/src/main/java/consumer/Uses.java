/*
 * SPDX-License-Identifier: MIT
 *
 * Uses.java - the Java side of tests/container/maven: compiles only against the org.hugepool
 * that Maven resolved from the Debian package's repository.
 */
package consumer;

import org.hugepool.HugePool;
import org.hugepool.Status;

public final class Uses {
    private Uses() {
    }

    public static void main(String[] args) throws Exception {
        try (HugePool pool = HugePool.connect(args.length > 0 ? args[0] : null)) {
            Status st = pool.status();
            System.out.println(st.classes().size() + " classes");
        }
    }
}
