/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import io.colibri.ColibriException;
import io.colibri.ErrorCode;
import java.nio.ByteBuffer;

/**
 * Device memory and streams through libcolibri's driver calls, for code without a CUDA binding of
 * its own (io.colibri.cuda's DeviceBuffer and CudaStream wrap these). Addresses and streams are
 * raw {@code long}s, usable with every {@code Communicator} overload that takes addresses and a
 * stream. Without a GPU or driver every call throws {@link ColibriException} UNSUPPORTED with the
 * reason.
 */
public final class Device {
  private Device() {}

  /** Number of GPUs the driver sees. */
  public static int count() {
    NativeLibrary.ensureLoaded();
    int[] n = new int[1];
    check(ColibriLib.clbDeviceCount(n), "device count");
    return n[0];
  }

  /** Allocates {@code bytes} of memory on GPU {@code device}; returns its address. */
  public static long allocate(long bytes, int device) {
    if (bytes <= 0) {
      throw new ColibriException(ErrorCode.INVALID_ARGUMENT,
          "cannot allocate " + bytes + " bytes of device memory: pass a positive size");
    }
    NativeLibrary.ensureLoaded();
    long[] p = new long[1];
    check(ColibriLib.clbDeviceAlloc(p, bytes, device), "allocation of " + bytes + " bytes on GPU " + device);
    return p[0];
  }

  /** Frees memory from {@link #allocate}. */
  public static void free(long address) {
    NativeLibrary.ensureLoaded();
    check(ColibriLib.clbDeviceFree(address), "free");
  }

  /** Copies between any host or device addresses; with a stream (not 0) asynchronously on it. */
  public static void copy(long dst, long src, long bytes, long stream) {
    if (bytes < 0) {
      throw new ColibriException(ErrorCode.INVALID_ARGUMENT, "byte count " + bytes + " is negative");
    }
    NativeLibrary.ensureLoaded();
    check(ColibriLib.clbMemcpy(dst, src, bytes, stream), "copy of " + bytes + " bytes");
  }

  /** Address of a direct buffer's position (for {@link #copy}). */
  public static long address(ByteBuffer direct) {
    if (direct == null || !direct.isDirect()) {
      throw new ColibriException(ErrorCode.INVALID_ARGUMENT,
          "a direct ByteBuffer is needed (ByteBuffer.allocateDirect), got " + direct);
    }
    NativeLibrary.ensureLoaded();
    return ColibriLib.addressOf(direct);
  }

  /** A new non-blocking stream on GPU {@code device}. */
  public static long createStream(int device) {
    NativeLibrary.ensureLoaded();
    long[] s = new long[1];
    check(ColibriLib.clbStreamCreate(s, device), "stream creation on GPU " + device);
    return s[0];
  }

  public static void destroyStream(long stream) {
    NativeLibrary.ensureLoaded();
    check(ColibriLib.clbStreamDestroy(stream), "stream destruction");
  }

  /** Waits until everything enqueued on {@code stream} has finished. */
  public static void synchronize(long stream) {
    NativeLibrary.ensureLoaded();
    check(ColibriLib.clbStreamSynchronize(stream), "stream synchronization");
  }

  private static void check(int rc, String what) {
    if (rc != 0) {
      throw NativeLibrary.error(rc, what);
    }
  }
}
