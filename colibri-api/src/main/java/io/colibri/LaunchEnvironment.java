/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.util.Map;

/**
 * What a torchrun-style launcher tells each process: {@code MASTER_ADDR}, {@code MASTER_PORT},
 * {@code RANK}, {@code WORLD_SIZE}, and optionally {@code LOCAL_RANK} (the rank within the host,
 * e.g. to pick a GPU) and {@code COLIBRI_BOOTSTRAP_SECRET}. {@link Communicator#fromEnvironment()}
 * reads it; read it yourself for {@link #localRank()}.
 *
 * @param masterAddress host of rank 0, where the bootstrap root listens
 * @param masterPort TCP port of the bootstrap root (1..65535)
 * @param rank this process's rank (0..worldSize-1)
 * @param worldSize number of ranks
 * @param localRank rank within this host, or -1 when {@code LOCAL_RANK} is not set
 * @param secret shared secret from {@code COLIBRI_BOOTSTRAP_SECRET}, or null: then the secret is
 *     derived from the address, which proves that ranks agree on it, not that they are trusted
 */
public record LaunchEnvironment(
    String masterAddress, int masterPort, int rank, int worldSize, int localRank, String secret) {

  /** Name of the variable with the host of rank 0 ({@link #masterAddress()}). */
  public static final String MASTER_ADDR = "MASTER_ADDR";

  /** Name of the variable with the bootstrap root's TCP port ({@link #masterPort()}). */
  public static final String MASTER_PORT = "MASTER_PORT";

  /** Name of the variable with this process's rank ({@link #rank()}). */
  public static final String RANK = "RANK";

  /** Name of the variable with the number of ranks ({@link #worldSize()}). */
  public static final String WORLD_SIZE = "WORLD_SIZE";

  /** Name of the optional variable with the rank within this host ({@link #localRank()}). */
  public static final String LOCAL_RANK = "LOCAL_RANK";

  /** Name of the optional variable with the shared secret ({@link #secret()}). */
  public static final String BOOTSTRAP_SECRET = "COLIBRI_BOOTSTRAP_SECRET";

  /** Hides the secret. */
  @Override
  public String toString() {
    return "LaunchEnvironment[masterAddress="
        + masterAddress
        + ", masterPort="
        + masterPort
        + ", rank="
        + rank
        + ", worldSize="
        + worldSize
        + ", localRank="
        + localRank
        + ", secret="
        + (secret == null ? "none (derived from the address)" : "set")
        + "]";
  }

  /**
   * Reads this process's environment.
   *
   * @return the launcher's values from {@link System#getenv()}
   * @throws ColibriException INVALID_ARGUMENT naming the variable that is missing or invalid
   */
  public static LaunchEnvironment fromSystem() {
    return from(System.getenv());
  }

  /**
   * Reads the given variables.
   *
   * @param env variable names to values, e.g. {@link System#getenv()}; not null
   * @return the launcher's values from {@code env}
   * @throws ColibriException INVALID_ARGUMENT naming the variable that is missing or invalid, or
   *     if {@code env} is null
   */
  public static LaunchEnvironment from(Map<String, String> env) {
    if (env == null) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "LaunchEnvironment.from(env): env is"
              + " null: pass the variables, e.g. System.getenv(), or call fromSystem()");
    }
    String address = required(env, MASTER_ADDR, "the host name or IP address of rank 0");
    int port =
        integer(
            env,
            MASTER_PORT,
            required(env, MASTER_PORT, "a free TCP port on rank 0's host"),
            1,
            65535);
    int worldSize =
        integer(
            env,
            WORLD_SIZE,
            required(env, WORLD_SIZE, "the number of ranks"),
            1,
            Integer.MAX_VALUE);
    int rank =
        integer(
            env,
            RANK,
            required(env, RANK, "this process's rank, 0.." + (worldSize - 1)),
            0,
            worldSize - 1);
    String local = env.get(LOCAL_RANK);
    int localRank =
        local == null || local.isBlank()
            ? -1
            : integer(env, LOCAL_RANK, local, 0, Integer.MAX_VALUE);
    String secret = env.get(BOOTSTRAP_SECRET);
    if (secret != null && secret.isEmpty()) {
      secret = null;
    }
    return new LaunchEnvironment(address.strip(), port, rank, worldSize, localRank, secret);
  }

  private static String required(Map<String, String> env, String name, String what) {
    String v = env.get(name);
    if (v == null || v.isBlank()) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "environment variable "
              + name
              + " is "
              + (v == null ? "not set" : "empty")
              + ": set it to "
              + what
              + " (torchrun sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE), or create the"
              + " communicator with Communicator.init(UniqueId, rank, nranks)");
    }
    return v;
  }

  private static int integer(Map<String, String> env, String name, String text, int min, int max) {
    long v;
    try {
      v = Long.parseLong(text.strip());
    } catch (NumberFormatException e) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "environment variable "
              + name
              + "=\""
              + text
              + "\" is not a whole number: set it to a value in "
              + min
              + ".."
              + max);
    }
    if (v < min || v > max) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "environment variable "
              + name
              + "="
              + v
              + " is out of range: set it to a value in "
              + min
              + ".."
              + max
              + (name.equals(RANK) ? " (RANK must be less than WORLD_SIZE)" : ""));
    }
    return (int) v;
  }
}
