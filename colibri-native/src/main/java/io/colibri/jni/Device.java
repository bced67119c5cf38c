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

  /** {@return the number of GPUs the driver sees} */
  public static int count() {
    NativeLibrary.ensureLoaded();
    int[] n = new int[1];
    check(ColibriLib.clbDeviceCount(n), "device count");
    return n[0];
  }

  /**
   * What the driver says about GPU {@code device} (0 .. {@link #count()} - 1). Creates no CUDA
   * context and allocates nothing on the GPU.
   *
   * @param device the GPU's ordinal, 0 .. {@link #count()} - 1
   * @return the driver's facts about that GPU
   */
  public static Info info(int device) {
    NativeLibrary.ensureLoaded();
    try (ColibriLib.ClbDeviceInfo i = new ColibriLib.ClbDeviceInfo()) {
      check(ColibriLib.clbDeviceInfo(device, i), "GPU info for device " + device);
      return new Info(
          device,
          i.name(),
          i.major(),
          i.minor(),
          i.driverVersion(),
          i.pciBusId(),
          i.image(),
          i.gpuDirectRdma(),
          i.dmaBuf());
    }
  }

  /**
   * Whether GPU {@code device} can map GPU {@code peer}'s memory (true for the same GPU). Ranks on
   * GPUs without peer access run device collectives through host memory, which is slower.
   *
   * @param device ordinal of the GPU that maps the memory
   * @param peer ordinal of the GPU whose memory is mapped
   * @return true if {@code device} can access {@code peer}'s memory
   */
  public static boolean canAccessPeer(int device, int peer) {
    NativeLibrary.ensureLoaded();
    int[] can = new int[1];
    check(
        ColibriLib.clbDeviceCanAccessPeer(device, peer, can),
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
   * @param image the kernel image device collectives load: sm80, sm90, ... (one per compute
   *     capability the native build lists, COLIBRI_KERNEL_ARCHS in src/CMakeLists.txt), or ptx
   *     (JIT-compiled by the driver at the first device call)
   * @param gpuDirectRdma 1 if the driver supports GPUDirect RDMA (nvidia-peermem) for this GPU, 0
   *     if not, -1 if it cannot say
   * @param dmaBuf 1 if device memory can be exported as a dma-buf, 0 if not, -1 if unknown
   */
  public record Info(
      int device,
      String name,
      int major,
      int minor,
      int driverVersion,
      String pciBusId,
      String image,
      int gpuDirectRdma,
      int dmaBuf) {

    /** {@return the compute capability as "major.minor", e.g. "9.0"} */
    public String computeCapability() {
      return major + "." + minor;
    }

    /** {@return the CUDA version the driver supports, e.g. "13.0", from {@link #driverVersion}} */
    public String cudaVersion() {
      return (driverVersion / 1000) + "." + (driverVersion % 1000 / 10);
    }
  }

  /**
   * Allocates {@code bytes} of memory on GPU {@code device}; returns its address.
   *
   * @param bytes size in bytes, 1 or more
   * @param device the GPU's ordinal, 0 .. {@link #count()} - 1
   * @return the device address; free it with {@link #free}
   */
  public static long allocate(long bytes, int device) {
    if (bytes <= 0) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "cannot allocate " + bytes + " bytes of device memory: pass a positive size");
    }
    NativeLibrary.ensureLoaded();
    long[] p = new long[1];
    check(
        ColibriLib.clbDeviceAlloc(p, bytes, device),
        "allocation of " + bytes + " bytes on GPU " + device);
    return p[0];
  }

  /**
   * Frees memory from {@link #allocate}.
   *
   * @param address the device address that {@link #allocate} returned
   */
  public static void free(long address) {
    NativeLibrary.ensureLoaded();
    check(ColibriLib.clbDeviceFree(address), "free");
  }

  /**
   * Copies between any host or device addresses; with a stream (not 0) asynchronously on it.
   *
   * @param dst destination address (host or device)
   * @param src source address (host or device)
   * @param bytes number of bytes, 0 or more
   * @param stream stream handle to enqueue the copy on, or 0 to copy before returning
   */
  public static void copy(long dst, long src, long bytes, long stream) {
    if (bytes < 0) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT, "byte count " + bytes + " is negative");
    }
    NativeLibrary.ensureLoaded();
    check(ColibriLib.clbMemcpy(dst, src, bytes, stream), "copy of " + bytes + " bytes");
  }

  /**
   * Address of a direct buffer's position (for {@link #copy}).
   *
   * @param direct a direct buffer; not null
   * @return the native address of its element at {@code position()}
   */
  public static long address(ByteBuffer direct) {
    if (direct == null || !direct.isDirect()) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "a direct ByteBuffer is needed (ByteBuffer.allocateDirect), got " + direct);
    }
    NativeLibrary.ensureLoaded();
    return ColibriLib.addressOf(direct);
  }

  /**
   * A new non-blocking stream on GPU {@code device}.
   *
   * @param device the GPU's ordinal, 0 .. {@link #count()} - 1
   * @return the stream handle ({@code cudaStream_t}); destroy it with {@link #destroyStream}
   */
  public static long createStream(int device) {
    NativeLibrary.ensureLoaded();
    long[] s = new long[1];
    check(ColibriLib.clbStreamCreate(s, device), "stream creation on GPU " + device);
    return s[0];
  }

  /**
   * Destroys a stream from {@link #createStream}.
   *
   * @param stream the stream handle
   */
  public static void destroyStream(long stream) {
    NativeLibrary.ensureLoaded();
    check(ColibriLib.clbStreamDestroy(stream), "stream destruction");
  }

  /**
   * Waits until everything enqueued on {@code stream} has finished.
   *
   * @param stream the stream handle
   */
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
