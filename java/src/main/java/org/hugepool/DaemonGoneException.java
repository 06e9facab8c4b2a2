/*
 * SPDX-License-Identifier: MIT
 *
 * DaemonGoneException.java - one kind of HugepoolException, made by HugepoolException.create from the errno.
 */
package org.hugepool;

/**
 * The daemon went away under a connection: it stopped, crashed, or restarted (a warm restart keeps a {@link HugePool}'s connection and leases, but closes journal writers': see {@link JournalWriter}). The message says up to which LSN a writer's journal is durable.
 */
public class DaemonGoneException extends HugepoolException {
    private static final long serialVersionUID = 1L;

    DaemonGoneException(String operation, int errno, String explanation, String daemonMessage) {
        super(operation, errno, explanation, daemonMessage);
    }
}
