/*
 * SPDX-License-Identifier: MIT
 *
 * Reloader.java - the other JVM of UnloadTest: loads the binding ROUNDS times, each time in a
 * class loader of its own (from CLASSES, the binding's classes, nothing of this JVM's class path),
 * uses it through reflection (connect, a lease, the status, a failure: every lookup the JNI side
 * caches), closes it, drops the loader and waits until the garbage collector took it, which it
 * can only if the library holds nothing that keeps the loader (a global reference to one of its
 * classes would) and which runs JNI_OnUnload. The next round's loader can load the library only
 * once the last one's is unloaded. Prints "round N collected" per round, or "round N pinned"
 * and exits 1 when the loader is still there after 30 s.
 * Usage: Reloader SOCKET CLASSES CLASS ROUNDS
 */
package org.hugepool;

import java.io.File;
import java.lang.ref.WeakReference;
import java.lang.reflect.InvocationTargetException;
import java.net.URL;
import java.net.URLClassLoader;
import java.time.Duration;

final class Reloader {
    private Reloader() {
    }

    public static void main(String[] args) throws Exception {
        String socket = args[0], cls = args[2];
        URL classes = new File(args[1]).toURI().toURL();
        for (int round = 1; round <= Integer.parseInt(args[3]); round++) {
            WeakReference<ClassLoader> loader = use(socket, classes, cls);
            long end = System.nanoTime() + 30_000_000_000L;
            while (loader.get() != null && System.nanoTime() < end) {
                System.gc();
                Thread.sleep(20);
            }
            if (loader.get() != null) {
                System.out.println("round " + round + " pinned");
                System.exit(1);
            }
            System.out.println("round " + round + " collected");
        }
    }

    /* One round: the binding in a loader of its own, used and closed; the loader, weakly. */
    private static WeakReference<ClassLoader> use(String socket, URL classes, String cls) throws Exception {
        try (URLClassLoader l = new URLClassLoader(new URL[] { classes }, ClassLoader.getPlatformClassLoader())) {
            Class<?> pool = l.loadClass("org.hugepool.HugePool");
            if (pool.getClassLoader() != l)
                throw new AssertionError("the binding came from another loader");
            AutoCloseable p = (AutoCloseable) pool.getMethod("connect", String.class).invoke(null, socket);
            AutoCloseable lease = (AutoCloseable) pool.getMethod("acquire", String.class, int.class, Duration.class)
                    .invoke(p, cls, 1, Duration.ofSeconds(10));
            pool.getMethod("status").invoke(p);
            try {
                pool.getMethod("acquire", String.class, int.class, Duration.class).invoke(p, "nosuch", 1, Duration.ZERO);
                throw new AssertionError("acquired from no class");
            } catch (InvocationTargetException e) {
                if (!e.getCause().getClass().getName().equals("org.hugepool.NotFoundException"))
                    throw e;
            }
            lease.close();
            p.close();
            return new WeakReference<>(l);
        }
    }
}
