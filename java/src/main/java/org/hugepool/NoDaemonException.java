/*
 * SPDX-License-Identifier: MIT
 *
 * NoDaemonException.java - one kind of HugepoolException, made by HugepoolException.create from the errno.
 */
package org.hugepool;

/**
 * No hugepoold listens at the socket: nothing there (ENOENT) or nobody accepting (ECONNREFUSED). Start the daemon (`systemctl start hugepoold`) or name its socket (`$HUGEPOOL_SOCKET`, {@link HugePool#connect(String)}).
 */
public class NoDaemonException extends HugepoolException {
    private static final long serialVersionUID = 1L;

    NoDaemonException(String operation, int errno, String explanation, String daemonMessage) {
        super(operation, errno, explanation, daemonMessage);
    }
}
