/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.cuda;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.ErrorCode;
import io.colibri.jni.Device;
import java.nio.ByteBuffer;

/**
 * Memory on one GPU, freed by {@link #close()}. Pass {@link #address()} to the {@code
 * Communicator} overloads that take addresses and a stream.
 */
public final class DeviceBuffer implements AutoCloseable {
  private final long bytes;
  private final int device;
  private long address;

  private DeviceBuffer(long address, long bytes, int device) {
    this.address = address;
    this.bytes = bytes;
    this.device = device;
  }

  /**
   * Allocates {@code bytes} on GPU {@code device}.
   *
   * @param bytes size in bytes, 1 or more
   * @param device the GPU's ordinal, 0 .. {@code Device.count()} - 1
   * @return the buffer, to close when done
   */
  public static DeviceBuffer allocate(long bytes, int device) {
    return new DeviceBuffer(Device.allocate(bytes, device), bytes, device);
  }

  /**
   * {@return the start of the buffer (device memory)}
   *
   * @throws ColibriException INVALID_USAGE after {@link #close()}
   */
  public long address() {
    if (address == 0) {
      throw new ColibriException(ErrorCode.INVALID_USAGE, "device buffer is closed");
    }
    return address;
  }

  /** {@return the size of the buffer in bytes} */
  public long bytes() {
    return bytes;
  }

  /** {@return the ordinal of the GPU that holds the buffer} */
  public int device() {
    return device;
  }

  /**
   * Registers the whole buffer with {@code comm} for zero copy between ranks in different
   * processes: {@link Communicator#register(long, long)}, collective. Close the registration
   * before this buffer.
   *
   * @param comm the communicator to register with
   * @return the registration
   */
  public Communicator.Registration register(Communicator comm) {
    return comm.register(address(), bytes);
  }

  /**
   * Copies {@code src.remaining()} bytes from a direct buffer to the start of this one (waits).
   *
   * @param src a direct buffer, read from its position to its limit (neither changes)
   * @return this buffer
   */
  public DeviceBuffer copyFrom(ByteBuffer src) {
    checkFits(src.remaining());
    Device.copy(address(), Device.address(src), src.remaining(), 0);
    return this;
  }

  /**
   * Copies {@code dst.remaining()} bytes from the start of this buffer into a direct buffer (waits).
   *
   * @param dst a direct buffer, written from its position to its limit (neither changes)
   * @return this buffer
   */
  public DeviceBuffer copyTo(ByteBuffer dst) {
    checkFits(dst.remaining());
    Device.copy(Device.address(dst), address(), dst.remaining(), 0);
    return this;
  }

  private void checkFits(long n) {
    if (n > bytes) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "copy of " + n + " bytes does not fit this device buffer of " + bytes + " bytes");
    }
  }

  @Override
  public void close() {
    if (address != 0) {
      Device.free(address);
      address = 0;
    }
  }
}
