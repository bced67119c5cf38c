/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import io.colibri.spi.CommunicatorProvider;

/**
 * A group of calls made by one thread, run together when it closes ({@link Communicator#group()}
 * says what that gives). Not thread-safe: it belongs to the thread that started it.
 */
public final class Group implements AutoCloseable {
  private final CommunicatorProvider provider;
  private final Thread owner;
  private boolean closed;

  private Group(CommunicatorProvider provider) {
    this.provider = provider;
    this.owner = Thread.currentThread();
  }

  static Group start(CommunicatorProvider provider) {
    provider.groupStart();
    return new Group(provider);
  }

  /**
   * Ends the group: the outermost close runs its calls and returns once all are done. Idempotent.
   *
   * @throws ColibriException INVALID_USAGE on another thread than the one that started it (the
   *     group stays open); the first error of its calls otherwise (or of a call refused inside it,
   *     in which case nothing ran)
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    if (Thread.currentThread() != owner) {
      throw new ColibriException(
          ErrorCode.INVALID_USAGE,
          "Group.close on thread "
              + Thread.currentThread().getName()
              + ", but the group belongs to thread "
              + owner.getName()
              + ", which started it: close it there");
    }
    closed = true;
    provider.groupEnd();
  }
}
