/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.ErrorCode;
import io.colibri.LogLevel;
import io.colibri.Option;
import io.colibri.Options;
import io.colibri.UniqueId;
import io.colibri.jni.ColibriLib.ClbConfig;
import io.colibri.spi.CommunicatorProvider;
import java.lang.System.Logger.Level;

/**
 * The native implementation of Colibri, registered for {@link java.util.ServiceLoader} in
 * {@code META-INF/services/io.colibri.spi.CommunicatorProvider}.
 */
public final class NativeProvider implements CommunicatorProvider {
  private static final System.Logger LOG = System.getLogger("io.colibri");

  /** For {@link java.util.ServiceLoader}. */
  public NativeProvider() {}

  @Override
  public UniqueId createUniqueId() {
    NativeLibrary.ensureLoaded();
    byte[] id = new byte[UniqueId.BYTES];
    int rc = ColibriLib.clbGetUniqueId(id);
    if (rc != 0) {
      throw NativeLibrary.error(rc, "UniqueId.create");
    }
    return UniqueId.fromBytes(id);
  }

  @Override
  public void releaseUniqueId(UniqueId id) {
    NativeLibrary.ensureLoaded();
    int rc = ColibriLib.clbUniqueIdRelease(id.toBytes());
    if (rc != 0) {
      throw NativeLibrary.error(rc, "UniqueId.close");
    }
  }

  @Override
  public UniqueId uniqueIdFromAddress(String host, int port, String secretOrNull) {
    if (host == null || host.isBlank()) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "bootstrap host is "
              + (host == null ? "null" : "empty")
              + ": pass the host name or IP address of rank 0");
    }
    if (port < 1 || port > 65535) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "bootstrap port "
              + port
              + " is out of range: pass a TCP port in 1..65535 that is free on rank 0's host");
    }
    NativeLibrary.ensureLoaded();
    byte[] id = new byte[UniqueId.BYTES];
    int rc = ColibriLib.clbUniqueIdFromAddress(host.strip(), port, secretOrNull, id);
    if (rc != 0) {
      throw NativeLibrary.error(rc, "unique id for " + host + ":" + port);
    }
    return UniqueId.fromBytes(id);
  }

  @Override
  public Communicator init(UniqueId id, int rank, int nranks, Options options) {
    // id and options arrive checked for null (CommunicatorProvider's contract).
    if (nranks < 1) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "nranks is "
              + nranks
              + ": a communicator needs at least 1 rank; pass the number of processes that join"
              + " it");
    }
    if (rank < 0 || rank >= nranks) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "rank "
              + rank
              + " is out of range"
              + " for "
              + nranks
              + " ranks: pass a rank in 0.."
              + (nranks - 1)
              + ", different on every process");
    }
    NativeLibrary.ensureLoaded();
    long[] comm = new long[1];
    try (ClbConfig config = toConfig(options)) {
      config.logLevel(NativeLog.levelForInit(options)); // under the JVM sink, set by NativeLog
      int rc = ColibriLib.clbCommInitRank(comm, id.toBytes(), rank, nranks, config);
      if (rc != 0) {
        throw NativeLibrary.error(rc, "init of rank " + rank + " of " + nranks);
      }
    }
    if (comm[0] == 0) {
      throw new ColibriException(
          ErrorCode.INTERNAL_ERROR,
          "init of rank "
              + rank
              + " of "
              + nranks
              + " returned success but no communicator: please report this as a Colibri bug");
    }
    try {
      return new NativeCommunicator(comm[0], rank, nranks, options);
    } catch (RuntimeException | Error e) {
      ColibriLib.clbCommDestroy(comm[0]); // nobody else holds the handle
      throw e;
    }
  }

  @Override
  public Communicator join(UniqueId growId, int rank, int nranks, Options options) {
    NativeLibrary.ensureLoaded();
    return NativeCommunicator.join(growId, rank, nranks, options);
  }

  @Override
  public LogLevel refreshLogLevel() {
    NativeLibrary.ensureLoaded();
    return NativeLog.refresh();
  }

  @Override
  public void groupStart() {
    NativeLibrary.ensureLoaded();
    int rc = ColibriLib.clbGroupStart();
    if (rc != 0) {
      throw NativeLibrary.error(rc, "Communicator.group");
    }
  }

  @Override
  public void groupEnd() {
    NativeLibrary.ensureLoaded();
    int rc = ColibriLib.clbGroupEnd();
    if (rc != 0) {
      throw NativeLibrary.error(rc, "Group.close");
    }
  }

  @Override
  public int version() {
    NativeLibrary.ensureLoaded();
    int[] version = new int[1];
    int rc = ColibriLib.clbGetVersion(version);
    if (rc != 0) {
      throw NativeLibrary.error(rc, "version");
    }
    return version[0];
  }

  /**
   * A {@code clbConfig_t} from {@code options}: {@code clbConfigInit}, then every knob set by name
   * from the Java options ({@code clbConfigSet}), which already resolved system properties and the
   * environment. Close it.
   *
   * @throws ColibriException INVALID_ARGUMENT when the native library does not take a knob (a
   *     library older than these classes)
   */
  static ClbConfig toConfig(Options options) {
    ClbConfig config = new ClbConfig();
    int rc = ColibriLib.clbConfigInit(config);
    if (rc != 0) {
      // clbConfigInit also reads COLIBRI_* variables; the Java options already did, and overwrite
      // every field below, so a complaint about the environment does not stop us.
      LOG.log(
          Level.WARNING,
          "the native library refused the environment ("
              + ColibriLib.clbGetLastError()
              + "); the Java options, which set this knob otherwise, fill every field of the"
              + " configuration. Fix or unset the variable to silence this");
      config.size(config.sizeof());
    }
    for (Option o : Option.values()) {
      String value = o.format(options.get(o));
      rc =
          ColibriLib.clbConfigSet(
              config, ColibriLib.utf8z(o.nativeName()), ColibriLib.utf8z(value));
      if (rc != 0) {
        ColibriException e =
            NativeLibrary.error(
                rc,
                "setting "
                    + o.camelName()
                    + "="
                    + value
                    + " on the native configuration (a libcolibri older than the Java classes?)");
        config.close();
        throw e;
      }
    }
    return config;
  }
}
