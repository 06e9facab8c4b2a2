/*
 * SPDX-License-Identifier: MIT
 *
 * UnloadTest.java - the JNI library lets go of the class loader that loaded it (issue 40: its
 * references released on unload): a JVM (Reloader) loads the binding in a class loader, uses it
 * (so that every class the JNI side caches is looked up), drops it, sees it collected (the
 * library's references to its classes are weak, JNI_OnUnload deletes them), and loads it again
 * in a new loader, twice. In another JVM: this one's class loader has the library already.
 */
package org.hugepool;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class UnloadTest {
    @RegisterExtension
    static final Daemon daemon = Daemon.perClass("", "[class one]\nsize = 2M\ncount = 1\n");

    @Test
    void aLoaderThatUsedTheLibraryIsCollected() throws Exception {
        String classes = System.getProperty("hugepool.classpath").split(":")[0];
        Process p = Daemon.jvm("org.hugepool.Reloader", daemon.socketPath(), classes, "one", "3").start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(150, TimeUnit.SECONDS))
            p.destroyForcibly();
        assertEquals("round 1 collected\nround 2 collected\nround 3 collected\n", out, out);
        assertEquals(0, p.exitValue(), out);
    }
}
