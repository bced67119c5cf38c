/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.util.Locale;

/**
 * What {@link Communicator#init} does when ranks run different versions: of Colibri, of the NVIDIA
 * kernel driver ({@code /proc/driver/nvidia/version}) or of the first RDMA NIC's firmware
 * ({@code /sys/class/infiniband/<dev>/fw_ver}). The ranks exchange them at bootstrap; the
 * strictest setting of any rank applies, so that every rank fails, or none does. A rank without an
 * NVIDIA driver or an RDMA NIC is not compared on that value. {@link #code()} is the value of
 * {@code clbVersionCheck_t}.
 */
public enum VersionCheck {
  /** Every difference is a warning in the log; init proceeds. */
  WARN(0),
  /**
   * A different Colibri version fails init (INVALID_USAGE, naming two ranks and their versions);
   * a different driver or NIC firmware is a warning, as nodes often differ there harmlessly.
   */
  STRICT(1),
  /** Any difference fails init: Colibri, NVIDIA driver and NIC firmware. */
  EXACT(2);

  private final int code;

  VersionCheck(int code) {
    this.code = code;
  }

  /** {@return the {@code clbVersionCheck_t} value} */
  public int code() {
    return code;
  }

  /**
   * {@return the lower-case name used by {@code COLIBRI_VERSION_CHECK} ("warn", "strict", "exact")}
   */
  public String configName() {
    return name().toLowerCase(Locale.ROOT);
  }
}
