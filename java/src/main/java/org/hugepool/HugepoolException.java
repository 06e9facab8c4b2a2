/*
 * SPDX-License-Identifier: MIT
 *
 * HugepoolException.java - every failure of the binding: an IOException with the errno that
 * libhugepool returned, its name, and the daemon's own explanation (hp_last_error), built in one
 * place (create) for both the Java side and the JNI side, which picks the subclass by errno (the
 * values read from C, Native's constants) and, for ENOENT and ECONNREFUSED, by whether the call
 * was a connect.
 */
package org.hugepool;

import java.io.IOException;

/**
 * A failure of hugepoold or of libhugepool: the operation, the errno (as libhugepool returned it,
 * positive here) and the daemon's own words. Subclasses name the failures a program handles on
 * their own: {@link NoDaemonException}, {@link DaemonGoneException}, {@link NotFoundException},
 * {@link LimitExceededException}, {@link HugepoolTimeoutException},
 * {@link PermissionDeniedException} and {@link ClosedException}; anything else (an invalid
 * argument, a protocol error, a damaged journal) is this class itself.
 *
 * <p>The message reads {@code OPERATION: EXPLANATION (ERRNO_NAME): DAEMON'S WORDS}, for example
 * {@code acquiring 2 buffers of class "nosuch": no such buffer class or journal ... (ENOENT): no
 * class "nosuch"}.
 */
public class HugepoolException extends IOException {
    private static final long serialVersionUID = 1L;

    /** The errno, positive. */
    private final int errno;
    /** What failed. */
    private final String operation;
    /** The daemon's (or the library's) explanation, "" if none. */
    private final String daemonMessage;

    /**
     * A failure of {@code operation} with {@code errno}.
     *
     * @param operation what failed, e.g. {@code acquiring 2 buffers of class "small"}
     * @param errno the positive errno
     * @param explanation libhugepool's text for the errno (hp_strerror)
     * @param daemonMessage the daemon's (or the library's) explanation, "" if none
     */
    protected HugepoolException(String operation, int errno, String explanation, String daemonMessage) {
        super(operation + ": " + explanation + " (" + name(errno) + ")"
                + (daemonMessage == null || daemonMessage.isEmpty() ? "" : ": " + daemonMessage));
        this.errno = errno;
        this.operation = operation;
        this.daemonMessage = daemonMessage == null ? "" : daemonMessage;
    }

    /**
     * The errno of the failure.
     *
     * @return the errno, positive ({@code 2} for ENOENT)
     */
    public int errno() {
        return errno;
    }

    /**
     * The errno's name.
     *
     * @return the errno's symbolic name, {@code ENOENT}, or {@code errno N} for one without a name
     */
    public String errnoName() {
        return name(errno);
    }

    /**
     * The operation that failed.
     *
     * @return what failed, the message's first part
     */
    public String operation() {
        return operation;
    }

    /**
     * The daemon's explanation of the failure.
     *
     * @return the daemon's own explanation of the failure (hp_last_error), or the library's where
     *         the daemon gave none (why a connect failed, which fd it sent was wrong); "" when
     *         there is none
     */
    public String daemonMessage() {
        return daemonMessage;
    }

    private static String name(int errno) {
        String n = errno > 0 ? Native.errnoName(errno) : null;
        return n != null ? n : "errno " + errno;
    }

    /*
     * The exception for errno, its class chosen by the errno alone, but for ENOENT and
     * ECONNREFUSED: no daemon when connecting, else no such class or journal. Called by the JNI
     * side too (hugepool_jni.c, throw_hp, which looks it up by this signature when it loads).
     */
    static HugepoolException create(int errno, boolean connecting, String operation, String explanation,
            String daemonMessage) {
        if (errno == Native.ENOENT || errno == Native.ECONNREFUSED)
            return connecting ? new NoDaemonException(operation, errno, explanation, daemonMessage)
                    : new NotFoundException(operation, errno, explanation, daemonMessage);
        if (errno == Native.ECONNRESET || errno == Native.EPIPE || errno == Native.ENOTCONN)
            return new DaemonGoneException(operation, errno, explanation, daemonMessage);
        if (errno == Native.EDQUOT || errno == Native.EUSERS || errno == Native.E2BIG)
            return new LimitExceededException(operation, errno, explanation, daemonMessage);
        if (errno == Native.ETIMEDOUT || errno == Native.EAGAIN)
            return new HugepoolTimeoutException(operation, errno, explanation, daemonMessage);
        if (errno == Native.EACCES || errno == Native.EPERM)
            return new PermissionDeniedException(operation, errno, explanation, daemonMessage);
        return new HugepoolException(operation, errno, explanation, daemonMessage);
    }

    /* The exception for a call other than a connect that returned -errno. */
    static HugepoolException create(int errno, String operation, String daemonMessage) {
        return create(errno, false, operation, Native.strerror(errno), daemonMessage);
    }

    /** r as libhugepool returned it: r itself when it is no error, else the exception. */
    static long check(long r, String operation, String daemonMessage) throws HugepoolException {
        if (r >= 0)
            return r;
        throw create((int) -r, operation, daemonMessage);
    }
}
