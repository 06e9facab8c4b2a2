/*
 * SPDX-License-Identifier: MIT
 *
 * NotFoundException.java - one kind of HugepoolException, made by HugepoolException.create from the errno.
 */
package org.hugepool;

/**
 * No buffer class or journal of that name is configured in hugepoold.conf (ENOENT).
 */
public class NotFoundException extends HugepoolException {
    private static final long serialVersionUID = 1L;

    NotFoundException(String operation, int errno, String explanation, String daemonMessage) {
        super(operation, errno, explanation, daemonMessage);
    }
}
