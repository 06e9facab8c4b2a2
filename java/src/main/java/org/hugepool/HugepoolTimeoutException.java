/*
 * SPDX-License-Identifier: MIT
 *
 * HugepoolTimeoutException.java - one kind of HugepoolException, made by HugepoolException.create from the errno.
 */
package org.hugepool;

/**
 * The buffers were not free in time: not now for a timeout of 0 (EAGAIN), or not within the timeout (ETIMEDOUT); also a journal wait that timed out.
 */
public class HugepoolTimeoutException extends HugepoolException {
    private static final long serialVersionUID = 1L;

    HugepoolTimeoutException(String operation, int errno, String explanation, String daemonMessage) {
        super(operation, errno, explanation, daemonMessage);
    }
}
