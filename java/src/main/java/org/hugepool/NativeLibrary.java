/*
 * SPDX-License-Identifier: MIT
 *
 * NativeLibrary.java - finds and loads libhugepool_jni.so once per class loader, before the first
 * native call (Native's static initialiser calls load()). Where it looks, in order: the system
 * property hugepool.jni.library (a path: the tests and the build tree use it), java.library.path
 * (System.loadLibrary), then the directories the Debian package and `make install` put it in.
 * A failure names every place tried, so the fix is in the message.
 */
package org.hugepool;

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

final class NativeLibrary {
    /** The system property naming the library's path. */
    static final String PROPERTY = "hugepool.jni.library";
    /** The name System.loadLibrary takes: libhugepool_jni.so. */
    static final String NAME = "hugepool_jni";

    private NativeLibrary() {
    }

    static void load() {
        String path = System.getProperty(PROPERTY);
        if (path != null && !path.isEmpty()) {
            System.load(new File(path).getAbsolutePath());
            return;
        }
        try {
            System.loadLibrary(NAME);
            return;
        } catch (UnsatisfiedLinkError e) {
            // not on java.library.path (Temurin's has no jni directory): where packages put it
        }
        for (String dir : installDirs()) {
            File f = new File(dir, System.mapLibraryName(NAME));
            if (f.isFile()) {
                System.load(f.getAbsolutePath());
                return;
            }
        }
        List<String> tried = new ArrayList<>();
        tried.add("-D" + PROPERTY + " (not set)");
        tried.add("java.library.path=" + System.getProperty("java.library.path"));
        tried.addAll(installDirs());
        throw new UnsatisfiedLinkError("hugepool: " + System.mapLibraryName(NAME) + " not found (tried "
                + String.join(", ", tried) + "); install the libhugepool-java package, or run with -D"
                + PROPERTY + "=/path/to/" + System.mapLibraryName(NAME) + " (hugepool-java(7))");
    }

    /** Where packages put JNI libraries: Debian's Java policy, then `make install`'s default. */
    static List<String> installDirs() {
        String triplet = multiarch(System.getProperty("os.arch", ""));
        List<String> dirs = new ArrayList<>();
        if (triplet != null)
            dirs.add("/usr/lib/" + triplet + "/jni");
        dirs.add("/usr/lib/jni");
        dirs.add("/usr/local/lib/jni");
        return dirs;
    }

    /** Debian's multiarch triplet for a JVM's os.arch, or null. */
    static String multiarch(String arch) {
        switch (arch.toLowerCase(Locale.ROOT)) {
        case "amd64":
        case "x86_64":
            return "x86_64-linux-gnu";
        case "aarch64":
        case "arm64":
            return "aarch64-linux-gnu";
        case "x86":
        case "i386":
        case "i686":
            return "i386-linux-gnu";
        case "arm":
            return "arm-linux-gnueabihf";
        case "ppc64le":
            return "powerpc64le-linux-gnu";
        case "s390x":
            return "s390x-linux-gnu";
        case "riscv64":
            return "riscv64-linux-gnu";
        default:
            return null;
        }
    }
}
