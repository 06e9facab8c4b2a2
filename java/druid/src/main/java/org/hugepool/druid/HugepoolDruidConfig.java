/*
 * SPDX-License-Identifier: MIT
 *
 * HugepoolDruidConfig.java - the extension's runtime properties, druid.hugepool.* (bound by
 * HugepoolDruidModule through Druid's JsonConfigProvider, read once at service start by
 * HugepoolBuffers). These names are what runbooks rely on (issue 41, hugepool-druid(7)): socket,
 * processingClass, mergeClass, acquireTimeout (an ISO-8601 period, as Druid writes durations),
 * required. The buffer size and the pools' sizes are not here: they are Druid's own
 * druid.processing.* settings, which the classes must match.
 */
package org.hugepool.druid;

import com.fasterxml.jackson.annotation.JsonProperty;
import org.joda.time.Period;

/** {@code druid.hugepool.*}: where the buffers come from. */
public class HugepoolDruidConfig
{
  /** The class of the intermediate processing buffers when none is configured. */
  public static final String DEFAULT_PROCESSING_CLASS = "druid-processing";
  /** The class of the merge buffers when none is configured. */
  public static final String DEFAULT_MERGE_CLASS = "druid-merge";

  @JsonProperty
  private String socket = null;

  @JsonProperty
  private String processingClass = DEFAULT_PROCESSING_CLASS;

  @JsonProperty
  private String mergeClass = DEFAULT_MERGE_CLASS;

  // long enough for the buffers of a killed predecessor to come back (the daemon takes them the
  // moment its connection closes), short enough that a service waiting for someone else's never
  // looks hung
  @JsonProperty
  private Period acquireTimeout = new Period("PT30S");

  @JsonProperty
  private boolean required = true;

  /** @return the daemon's socket; null for libhugepool's ($HUGEPOOL_SOCKET, then /run/hugepool/hugepoold.sock) */
  public String getSocket()
  {
    return socket == null || socket.isEmpty() ? null : socket;
  }

  /** @return the class of the intermediate processing buffers */
  public String getProcessingClass()
  {
    return processingClass;
  }

  /** @return the class of the merge buffers */
  public String getMergeClass()
  {
    return mergeClass;
  }

  /** @return how long the start waits for the buffers to be free */
  public Period getAcquireTimeout()
  {
    return acquireTimeout;
  }

  /** @return true: a start without the buffers fails; false: Druid allocates its own, said once in the log */
  public boolean isRequired()
  {
    return required;
  }
}
