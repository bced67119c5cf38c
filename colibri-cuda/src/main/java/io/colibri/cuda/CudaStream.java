/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.cuda;

import io.colibri.ColibriException;
import io.colibri.ErrorCode;
import io.colibri.jni.Device;

/**
 * A non-blocking CUDA stream on one GPU, destroyed by {@link #close()}. Collectives enqueued on it
 * return at once; {@link #synchronize()} waits for them. Ranks that share a process each need their
 * own stream.
 */
public final class CudaStream implements AutoCloseable {
  private long handle;

  private CudaStream(long handle) {
    this.handle = handle;
  }

  /**
   * Creates a non-blocking stream on GPU {@code device}.
   *
   * @param device the GPU's ordinal, 0 .. {@code Device.count()} - 1
   * @return the stream, to close when done
   */
  public static CudaStream create(int device) {
    return new CudaStream(Device.createStream(device));
  }

  /**
   * {@return the raw {@code CUstream} / {@code cudaStream_t}, for the Communicator overloads}
   *
   * @throws ColibriException INVALID_USAGE after {@link #close()}
   */
  public long handle() {
    if (handle == 0) {
      throw new ColibriException(ErrorCode.INVALID_USAGE, "stream is closed");
    }
    return handle;
  }

  /**
   * Waits until everything enqueued on the stream has finished.
   *
   * @throws ColibriException INVALID_USAGE after {@link #close()}
   */
  public void synchronize() {
    Device.synchronize(handle());
  }

  @Override
  public void close() {
    if (handle != 0) {
      Device.destroyStream(handle);
      handle = 0;
    }
  }
}
