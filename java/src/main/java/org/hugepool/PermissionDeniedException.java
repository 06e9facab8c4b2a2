/*
 * SPDX-License-Identifier: MIT
 *
 * PermissionDeniedException.java - one kind of HugepoolException, made by HugepoolException.create from the errno.
 */
package org.hugepool;

/**
 * Not allowed: the socket's permissions (EACCES), or a journal's access list or an administrator's request (EPERM).
 */
public class PermissionDeniedException extends HugepoolException {
    private static final long serialVersionUID = 1L;

    PermissionDeniedException(String operation, int errno, String explanation, String daemonMessage) {
        super(operation, errno, explanation, daemonMessage);
    }
}
