/*
 * SPDX-License-Identifier: MIT
 *
 * LimitExceededException.java - one kind of HugepoolException, made by HugepoolException.create from the errno.
 */
package org.hugepool;

/**
 * A limit of the daemon refused the request at once, never after a wait: a per-uid byte limit (EDQUOT: {@code max_bytes_per_uid}, or the spill limits), the connection limits (EUSERS), or more buffers than the class has (E2BIG). The daemon's words name the limit and the numbers.
 */
public class LimitExceededException extends HugepoolException {
    private static final long serialVersionUID = 1L;

    LimitExceededException(String operation, int errno, String explanation, String daemonMessage) {
        super(operation, errno, explanation, daemonMessage);
    }
}
