/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.bytedeco.cuda.global.nccl.ncclBfloat16;
import static org.bytedeco.cuda.global.nccl.ncclCommDestroy;
import static org.bytedeco.cuda.global.nccl.ncclCommGetAsyncError;
import static org.bytedeco.cuda.global.nccl.ncclCommInitAll;
import static org.bytedeco.cuda.global.nccl.ncclFloat16;
import static org.bytedeco.cuda.global.nccl.ncclFloat32;
import static org.bytedeco.cuda.global.nccl.ncclFloat64;
import static org.bytedeco.cuda.global.nccl.ncclGetErrorString;
import static org.bytedeco.cuda.global.nccl.ncclGetLastError;
import static org.bytedeco.cuda.global.nccl.ncclGetVersion;
import static org.bytedeco.cuda.global.nccl.ncclInt32;
import static org.bytedeco.cuda.global.nccl.ncclInt64;
import static org.bytedeco.cuda.global.nccl.ncclInt8;
import static org.bytedeco.cuda.global.nccl.ncclSuccess;
import static org.bytedeco.cuda.global.nccl.ncclUint32;
import static org.bytedeco.cuda.global.nccl.ncclUint64;
import static org.bytedeco.cuda.global.nccl.ncclUint8;

import io.colibri.DataType;
import io.colibri.bench.common.Version;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.PointerPointer;

/**
 * NCCL through the org.bytedeco CUDA presets (JNI only: libnccl.so.2 comes from the host). {@link
 * #load()} turns a failure to load into one clear message; {@link #check} turns a failed call into
 * an exception with NCCL's own words.
 */
final class Nccl {
  private Nccl() {}

  private static boolean loaded;
  private static RuntimeException failure;

  /** Loads the CUDA runtime and NCCL bindings, or throws an IllegalStateException saying why not. */
  static synchronized void load() {
    Cuda.load();
    if (loaded) {
      return;
    }
    if (failure != null) {
      throw failure;
    }
    try {
      Loader.load(org.bytedeco.cuda.global.nccl.class);
      int[] v = new int[1];
      ncclGetVersion(v);
      loaded = true;
    } catch (LinkageError | RuntimeException e) {
      failure =
          new IllegalStateException(
              "NCCL could not be loaded through the org.bytedeco CUDA"
                  + " presets ("
                  + Cuda.describe(e)
                  + "). They need libnccl.so.2 (NCCL 2.x, e.g."
                  + " /usr/lib/x86_64-linux-gnu/libnccl.so.2 from the libnccl2 package) on the"
                  + " library path; the NCCL benchmarks cannot run on this machine."
                  + " -Dorg.bytedeco.javacpp.logger.debug=true shows what JavaCPP tried",
              e);
      throw failure;
    }
  }

  /** NCCL's version code, e.g. 22803 for 2.28.3. */
  static int version() {
    load();
    int[] v = new int[1];
    check(ncclGetVersion(v), "ncclGetVersion", null);
    return v[0];
  }

  /** "2.28.3" from 22803 (the encoding of NCCL 2.9 and later). */
  static String versionText(int code) {
    return Version.text(code);
  }

  static void check(int rc, String what, ncclComm comm) {
    if (rc != ncclSuccess) {
      BytePointer text = ncclGetErrorString(rc);
      BytePointer last = ncclGetLastError(comm);
      String detail = last == null ? "" : last.getString();
      throw new IllegalStateException(
          what
              + " failed: "
              + (text == null ? "ncclResult " + rc : text.getString())
              + " ("
              + rc
              + ")"
              + (detail.isEmpty() ? "" : ": " + detail)
              + " (NCCL_DEBUG=WARN or INFO in the environment says more)");
    }
  }

  /** One communicator per entry of {@code devices}, rank i on GPU devices[i], made by this thread. */
  static ncclComm[] initAll(int[] devices) {
    load();
    int n = devices.length;
    ncclComm[] comms = new ncclComm[n];
    if (n == 1) {
      ncclComm c = new ncclComm();
      check(ncclCommInitAll(c, 1, devices), "ncclCommInitAll(1 GPU)", null);
      comms[0] = c;
      return comms;
    }
    try (PointerPointer<ncclComm> all = new PointerPointer<>(n)) {
      check(ncclCommInitAll(all, n, devices), "ncclCommInitAll(" + n + " GPUs)", null);
      for (int i = 0; i < n; i++) {
        comms[i] = new ncclComm(all.get(i));
      }
    }
    return comms;
  }

  /** Throws if a communicator reports an asynchronous error (a failed kernel, a broken peer). */
  static void checkAsync(ncclComm comm) {
    int[] async = new int[1];
    check(ncclCommGetAsyncError(comm, async), "ncclCommGetAsyncError", comm);
    check(async[0], "an earlier NCCL operation (asynchronous error)", comm);
  }

  static void destroyAll(ncclComm[] comms) {
    if (comms == null) {
      return;
    }
    for (ncclComm c : comms) {
      if (c != null && !c.isNull()) {
        ncclCommDestroy(c);
        c.setNull();
      }
    }
  }

  /** NCCL's ncclDataType_t for a Colibri type. */
  static int type(DataType t) {
    switch (t) {
      case INT8:
        return ncclInt8;
      case UINT8:
        return ncclUint8;
      case INT32:
        return ncclInt32;
      case UINT32:
        return ncclUint32;
      case INT64:
        return ncclInt64;
      case UINT64:
        return ncclUint64;
      case FLOAT16:
        return ncclFloat16;
      case BFLOAT16:
        return ncclBfloat16;
      case FLOAT32:
        return ncclFloat32;
      case FLOAT64:
        return ncclFloat64;
      default:
        throw new IllegalArgumentException("no NCCL type for " + t);
    }
  }
}
