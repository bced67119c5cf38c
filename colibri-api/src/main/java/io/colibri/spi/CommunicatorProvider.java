/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.spi;

import io.colibri.Communicator;
import io.colibri.LogLevel;
import io.colibri.Options;
import io.colibri.UniqueId;

/**
 * An implementation of Colibri, found with {@link java.util.ServiceLoader}. Applications do not call
 * it: {@link Communicator#init} and {@link UniqueId#create()} do. {@code io.colibri:colibri-native}
 * registers one in {@code META-INF/services/io.colibri.spi.CommunicatorProvider}.
 *
 * <p>Arguments reach a provider already checked for null; ranks, counts and options are its to
 * validate.
 */
public interface CommunicatorProvider {

  /**
   * Creates a new id and starts its bootstrap root in this process.
   *
   * @return the new id, to hand to every rank
   */
  UniqueId createUniqueId();

  /**
   * Stops the bootstrap root of {@code id} if it runs in this process; nothing otherwise. Ranks
   * still joining it fail.
   *
   * @param id an id from {@link #createUniqueId()} or {@link #uniqueIdFromAddress}; not null
   */
  default void releaseUniqueId(UniqueId id) {}

  /**
   * The id of a bootstrap root that rank 0 will open at {@code host:port} (torchrun style: every
   * rank computes the same id from the same address).
   *
   * @param host host name or IP address of rank 0, where its bootstrap root listens
   * @param port TCP port of the bootstrap root, 1..65535
   * @param secretOrNull passphrase every rank passes (the secret is derived from it and never
   *     sent); null or empty takes {@code COLIBRI_BOOTSTRAP_SECRET}, and with neither the secret is derived
   *     from host:port, which proves that the ranks agree on the address, not that they are trusted
   * @return the id, the same on every rank that passes the same arguments
   */
  UniqueId uniqueIdFromAddress(String host, int port, String secretOrNull);

  /**
   * Joins the communicator of {@code id} as {@code rank} of {@code nranks}; blocks until all have.
   *
   * @param id the communicator's id, the same on every rank
   * @param rank this process's rank, 0..nranks-1 (not yet checked)
   * @param nranks number of ranks (not yet checked)
   * @param options settings of the communicator
   * @return the joined communicator
   */
  Communicator init(UniqueId id, int rank, int nranks, Options options);

  /**
   * A new rank's part of {@link Communicator#grow}: {@link Communicator#join}'s implementation.
   * Arguments arrive checked for null.
   *
   * @param growId the id that {@link Communicator#growId()} made on a rank of the communicator
   *     being grown
   * @param rank this rank, from that communicator's size up
   * @param nranks the grown communicator's size
   * @param options settings of the grown communicator
   * @return the grown communicator
   */
  default Communicator join(UniqueId growId, int rank, int nranks, Options options) {
    throw new io.colibri.ColibriException(
        io.colibri.ErrorCode.UNSUPPORTED, "this Colibri provider cannot grow communicators");
  }

  /**
   * Reads the level of the logger {@code io.colibri} again and sets the native threshold from it;
   * returns the threshold in effect ({@link io.colibri.Logging#refreshLevel()}). A provider whose
   * core does not log returns {@link LogLevel#OFF}.
   *
   * @return the native log threshold now in effect
   */
  default LogLevel refreshLogLevel() {
    return LogLevel.OFF;
  }

  /**
   * Starts a group of calls on this thread ({@code clbGroupStart}; see
   * {@link io.colibri.Communicator#group()}).
   */
  default void groupStart() {
    throw new io.colibri.ColibriException(
        io.colibri.ErrorCode.UNSUPPORTED, "this Colibri provider has no groups");
  }

  /**
   * Ends this thread's group ({@code clbGroupEnd}): the outermost end runs its calls.
   */
  default void groupEnd() {
    throw new io.colibri.ColibriException(
        io.colibri.ErrorCode.UNSUPPORTED, "this Colibri provider has no groups");
  }

  /**
   * Version of the implementation, encoded as major * 10000 + minor * 100 + patch (as
   * {@code CLB_VERSION_CODE}).
   *
   * @return the version code, e.g. 100 for 0.1.0
   */
  int version();
}
