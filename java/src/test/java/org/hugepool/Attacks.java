/*
 * SPDX-License-Identifier: MIT
 *
 * Attacks.java - the other JVM of BoundaryTest: every argument a caller can hand the binding that
 * once reached native code unchecked (issue 39's findings 6 and 7 and its second read of the JNI
 * entry points), tried one after another against the daemon at SOCKET (a class "one" of 2 MiB
 * buffers, a journal "j"). For each attack it prints "ATTACK NAME" before and "RESULT NAME WHAT"
 * after, WHAT being "ok" or the class of what was thrown, flushed at once: a JVM that crashes in
 * the middle leaves the name of the attack that killed it as its last line, and BoundaryTest
 * reports it. Attacks that need java.lang.foreign (Java 22 and later) print "RESULT NAME skipped"
 * on Java 17. Compiled for Java 17, so Arena and MemorySegment are reached through method handles.
 * Usage: Attacks SOCKET NAME...
 */
package org.hugepool;

import java.io.PrintStream;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Arrays;

final class Attacks {
    private static final PrintStream OUT = System.out;

    private Attacks() {
    }

    interface Attack {
        void run(HugePool pool) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        try (HugePool pool = HugePool.connect(args[0])) {
            for (String name : Arrays.copyOfRange(args, 1, args.length)) {
                OUT.println("ATTACK " + name);
                OUT.flush();
                String result;
                try {
                    attack(name).run(pool);
                    result = "ok";
                } catch (Skipped e) {
                    result = "skipped";
                } catch (Throwable t) {
                    result = t.getClass().getName() + " " + t.getMessage();
                }
                OUT.println("RESULT " + name + " " + result);
                OUT.flush();
            }
        }
    }

    private static final class Skipped extends RuntimeException {
        private static final long serialVersionUID = 1L;
    }

    private static Attack attack(String name) {
        switch (name) {
        case "appendNullArray":
            return pool -> {
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    w.append((byte[]) null, 0, 0);
                }
            };
        case "spillNullArray":
            return pool -> {
                try (SpillStream s = pool.openSpill()) {
                    s.write((byte[]) null, 0, 0);
                }
            };
        case "appendBadRange":
            return pool -> {
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    w.append(new byte[4], 2, 3);
                }
            };
        case "spillBadRange":
            return pool -> {
                try (SpillStream s = pool.openSpill()) {
                    s.write(new byte[4], -1, 1);
                }
            };
        case "batchMismatchedArrays": // the JNI entry point itself, as only this package can call it
            return pool -> {
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    Native.appendBatch(handle(w), new Object[] { new byte[8], new byte[8] }, new int[1],
                            new int[1], Native.BATCH_APPEND);
                }
            };
        case "batchUnknownMode": // refused before anything is appended
            return pool -> {
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    long r = Native.appendBatch(handle(w), new Object[] { new byte[8] }, new int[1], new int[] { 8 }, 7);
                    if (r != -22 || w.durableLsn() != 0)
                        throw new IllegalStateException("mode 7: " + r + ", durable LSN " + w.durableLsn());
                }
            };
        case "acquireForever": // "as long as it takes", not an ArithmeticException
            return pool -> pool.acquire("one", 1, Duration.ofSeconds(Long.MAX_VALUE)).close();
        case "awaitForever":
            return pool -> {
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    w.await(w.append(new byte[1]), Duration.ofSeconds(Long.MAX_VALUE));
                }
            };
        case "spillNegativeThreshold":
            return pool -> pool.openSpill(-2).close();
        case "closedLeaseSegmentAppend":
            return pool -> {
                ByteBuffer stale = staleSegmentBuffer(pool);
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    w.append(stale);
                }
            };
        case "closedLeaseSegmentSpill":
            return pool -> {
                ByteBuffer stale = staleSegmentBuffer(pool);
                try (SpillStream s = pool.openSpill()) {
                    s.write(stale);
                }
            };
        case "closedArenaAppend":
            return pool -> {
                ByteBuffer stale = closedArenaBuffer();
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    w.append(stale);
                }
            };
        case "closedArenaBatch":
            return pool -> {
                ByteBuffer stale = closedArenaBuffer();
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    w.appendBatch(ByteBuffer.allocateDirect(8), stale);
                }
            };
        case "liveArenaAppend": // the copy a segment's buffer takes carries its bytes
            return pool -> {
                needs22();
                ByteBuffer b = liveArenaBuffer();
                for (int i = 0; i < b.capacity(); i++)
                    b.put(i, (byte) (i * 7));
                long lsn;
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    lsn = w.appendAndWait(b.duplicate());
                }
                try (JournalReader r = pool.openJournalReader("j", lsn)) {
                    JournalRecord rec = r.next();
                    if (rec == null || rec.lsn() != lsn || !rec.data().equals(b.clear()))
                        throw new AssertionError("the record read back is not the segment's bytes: " + rec);
                }
            };
        case "truncatedMappingAppend": // SIGBUS in the native method
            return pool -> {
                try (JournalWriter w = pool.openJournalWriter("j")) {
                    w.append(truncatedMapping());
                }
            };
        case "truncatedMappingSliceSpill": // a view of the mapping, not the mapping itself
            return pool -> {
                try (SpillStream s = pool.openSpill()) {
                    s.write(truncatedMapping().slice(4096, 8192));
                }
            };
        default:
            throw new IllegalArgumentException("no attack " + name);
        }
    }

    /* A read-only mapping of 64 KiB of a file truncated to nothing since: every page is gone. */
    private static MappedByteBuffer truncatedMapping() throws Exception {
        Path f = Files.createTempFile("hugepool-attack", ".map");
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.wrap(new byte[1 << 16]));
            MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_ONLY, 0, 1 << 16);
            ch.truncate(0);
            return m;
        } finally {
            Files.delete(f);
        }
    }

    /* The writer's native handle, which only the binding passes to Native. */
    private static long handle(JournalWriter w) throws ReflectiveOperationException {
        java.lang.reflect.Field f = JournalWriter.class.getDeclaredField("handle");
        f.setAccessible(true);
        return f.getLong(w);
    }

    private static void needs22() {
        if (Segments.SEGMENT == null)
            throw new Skipped();
    }

    /*
     * A ByteBuffer of a lease's MemorySegment kept past the lease, once the lease's range is
     * unmapped (its Cleaner ran: nothing else of the lease is reachable), so that native code
     * reading it faults where no check stopped it.
     */
    private static ByteBuffer staleSegmentBuffer(HugePool pool) throws Exception {
        needs22();
        Lease lease = pool.acquire("one", 1, Duration.ofSeconds(10));
        long address = lease.nativeDescription()[0];
        ByteBuffer stale = Seg.bytes(Seg.of(lease, 0), 0, 4096);
        lease.close();
        lease = null;
        String line = Long.toHexString(address) + "-";
        long end = System.nanoTime() + 20_000_000_000L;
        while (Files.readAllLines(Path.of("/proc/self/maps")).stream().anyMatch(l -> l.startsWith(line))) {
            if (System.nanoTime() > end)
                throw new AssertionError("the released range was not unmapped within 20 s");
            System.gc();
            Thread.sleep(10);
        }
        return stale;
    }

    private static ByteBuffer closedArenaBuffer() throws Exception {
        return arenaBuffer(true);
    }

    private static ByteBuffer liveArenaBuffer() throws Exception {
        return arenaBuffer(false);
    }

    /* A ByteBuffer of a 64 KiB segment of the program's own shared Arena, which it closed if close. */
    private static ByteBuffer arenaBuffer(boolean close) throws Exception {
        needs22();
        try {
            MethodHandles.Lookup l = MethodHandles.publicLookup();
            Class<?> arenaType = Class.forName("java.lang.foreign.Arena"), seg = Segments.SEGMENT;
            Object arena = l.findStatic(arenaType, "ofShared", MethodType.methodType(arenaType)).invoke();
            MethodHandle allocate = l.findVirtual(arenaType, "allocate", MethodType.methodType(seg, long.class));
            Object s = allocate.invoke(arena, 1L << 16);
            ByteBuffer b = (ByteBuffer) l.findVirtual(seg, "asByteBuffer", MethodType.methodType(ByteBuffer.class))
                    .invoke(s);
            if (close)
                l.findVirtual(arenaType, "close", MethodType.methodType(void.class)).invoke(arena);
            return b;
        } catch (Throwable t) {
            throw Segments.rethrown(t);
        }
    }
}
