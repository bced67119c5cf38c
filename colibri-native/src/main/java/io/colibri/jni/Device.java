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

  /**
   * What the driver says about GPU {@code device} (0 .. {@link #count()} - 1). Creates no CUDA
   * context and allocates nothing on the GPU.
   */
  public static Info info(int device) {
    NativeLibrary.ensureLoaded();
    try (ColibriLib.ClbDeviceInfo i = new ColibriLib.ClbDeviceInfo()) {
      check(ColibriLib.clbDeviceInfo(device, i), "GPU info for device " + device);
      return new Info(device, i.name(), i.major(), i.minor(), i.driverVersion(), i.pciBusId(),
          i.image(), i.gpuDirectRdma(), i.dmaBuf());
    }
  }

  /**
   * Whether GPU {@code device} can map GPU {@code peer}'s memory (true for the same GPU). Device
   * collectives refuse ranks on two GPUs without peer access.
   */
  public static boolean canAccessPeer(int device, int peer) {
    NativeLibrary.ensureLoaded();
    int[] can = new int[1];
    check(ColibriLib.clbDeviceCanAccessPeer(device, peer, can),
        "peer access query from GPU " + device + " to GPU " + peer);
    return can[0] != 0;
  }

  /**
   * One GPU as the driver sees it ({@code clbDeviceInfo_t}).
   *
   * @param device the ordinal
   * @param name e.g. "NVIDIA H200"
   * @param major compute capability, major
   * @param minor compute capability, minor
   * @param driverVersion cuDriverGetVersion: 1000 * major + 10 * minor of the CUDA version the
   *     driver supports (13000 is CUDA 13.0)
   * @param pciBusId domain:bus:device.function, as under /sys/bus/pci/devices ("0000:1b:00.0")
   * @param image the kernel image device collectives load: sm80, sm89, sm90, sm100, sm120, or ptx
   *     (JIT-compiled by the driver at the first device call)
   * @param gpuDirectRdma 1 if the driver supports GPUDirect RDMA (nvidia-peermem) for this GPU, 0
   *     if not, -1 if it cannot say
   * @param dmaBuf 1 if device memory can be exported as a dma-buf, 0 if not, -1 if unknown
   */
  public record Info(int device, String name, int major, int minor, int driverVersion,
      String pciBusId, String image, int gpuDirectRdma, int dmaBuf) {

    /** "9.0". */
    public String computeCapability() {
      return major + "." + minor;
    }

    /** "13.0" from {@link #driverVersion}. */
    public String cudaVersion() {
      return (driverVersion / 1000) + "." + (driverVersion % 1000 / 10);
    }
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
