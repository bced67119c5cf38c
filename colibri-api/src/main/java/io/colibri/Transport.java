/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.util.Locale;

/** Transport between ranks. {@link #code()} is the value of {@code clbTransport_t}. */
public enum Transport {
  /** Shared memory between ranks on one host, sockets otherwise. */
  AUTO(0),
  /** Shared memory; every rank must be on one host. */
  SHM(1),
  /** TCP sockets, any hosts. */
  SOCKET(2),
  /**
   * RDMA verbs through the verbs network plugin (the {@code io.colibri:colibri-verbs} jar, which
   * loads libibverbs at run time), ring algorithm only; never picked by {@link #AUTO}.
   */
  VERBS(3);

  private final int code;

  Transport(int code) {
    this.code = code;
  }

  /** {@return the {@code clbTransport_t} value} */
  public int code() {
    return code;
  }

  /**
   * {@return the lower-case name used by {@code COLIBRI_TRANSPORT}
   * ("auto", "shm", "socket", "verbs")}
   */
  public String configName() {
    return name().toLowerCase(Locale.ROOT);
  }
}
