/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.cuda;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.ReduceOp;
import org.bytedeco.javacpp.Pointer;

/**
 * The collectives on JavaCPP {@link Pointer}s: device buffers from the org.bytedeco CUDA presets
 * ({@code cudaMalloc} into a {@code FloatPointer}, say) and their streams ({@code CUstream_st},
 * or null for the default stream). A pointer's element at {@code position()} is where the data
 * starts, as everywhere in JavaCPP. The calls are those of {@link Communicator} on raw addresses.
 */
public final class CudaCollectives {
  private CudaCollectives() {}

  /**
   * Address of {@code p}'s element at its position ({@code address() + position() * sizeof()}).
   *
   * @param p the pointer; not null and not a null pointer
   * @param what the pointer's name in the error message, e.g. "send"
   * @return the address
   * @throws ColibriException INVALID_ARGUMENT for a null pointer
   */
  public static long address(Pointer p, String what) {
    if (p == null || p.isNull()) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          what + " pointer is null: pass a" + " device buffer (for example from cudaMalloc)");
    }
    long element = Math.max(1, p.sizeof());
    return p.address() + p.position() * element;
  }

  private static long stream(Pointer stream) {
    return stream == null ? 0 : stream.address();
  }

  /**
   * {@link Communicator#register(long, long)} of {@code bytes} from {@code buffer}'s position:
   * collective; the memory must come from {@code cudaMalloc} or {@code cuMemAlloc}.
   *
   * @param comm the communicator to register with
   * @param buffer start of the device buffer, at its position
   * @param bytes size of the buffer in bytes, 1 or more
   * @return the registration; close it (collectively) before freeing the memory
   */
  public static Communicator.Registration register(Communicator comm, Pointer buffer, long bytes) {
    return comm.register(address(buffer, "buffer"), bytes);
  }

  /**
   * {@link Communicator#allReduce(long, long, long, DataType, ReduceOp, long)} on pointers.
   *
   * @param comm the communicator
   * @param send this rank's input, {@code count} elements of device memory, from its position
   * @param recv the output, {@code count} elements; may be {@code send} (in place)
   * @param count number of elements, 0 or more
   * @param type element type of both buffers
   * @param op how elements are combined
   * @param stream the CUDA stream to enqueue on, or null for the default stream
   */
  public static void allReduce(
      Communicator comm,
      Pointer send,
      Pointer recv,
      long count,
      DataType type,
      ReduceOp op,
      Pointer stream) {
    comm.allReduce(address(send, "send"), address(recv, "recv"), count, type, op, stream(stream));
  }

  /**
   * {@link Communicator#allGather(long, long, long, DataType, long)} on pointers.
   *
   * @param comm the communicator
   * @param send this rank's input, {@code sendCount} elements of device memory, from its position
   * @param recv the output, {@code comm.size() * sendCount} elements
   * @param sendCount number of elements each rank contributes, 0 or more
   * @param type element type of both buffers
   * @param stream the CUDA stream to enqueue on, or null for the default stream
   */
  public static void allGather(
      Communicator comm,
      Pointer send,
      Pointer recv,
      long sendCount,
      DataType type,
      Pointer stream) {
    comm.allGather(address(send, "send"), address(recv, "recv"), sendCount, type, stream(stream));
  }

  /**
   * {@link Communicator#reduceScatter(long, long, long, DataType, ReduceOp, long)} on pointers.
   *
   * @param comm the communicator
   * @param send this rank's input, {@code comm.size() * recvCount} elements of device memory, from
   *     its position
   * @param recv this rank's block of the output, {@code recvCount} elements
   * @param recvCount number of elements of each rank's block, 0 or more
   * @param type element type of both buffers
   * @param op how elements are combined
   * @param stream the CUDA stream to enqueue on, or null for the default stream
   */
  public static void reduceScatter(
      Communicator comm,
      Pointer send,
      Pointer recv,
      long recvCount,
      DataType type,
      ReduceOp op,
      Pointer stream) {
    comm.reduceScatter(
        address(send, "send"), address(recv, "recv"), recvCount, type, op, stream(stream));
  }

  /**
   * {@link Communicator#broadcast(long, long, long, DataType, int, long)} on pointers. On ranks
   * other than the root, {@code send} may be null (recv is then used).
   *
   * @param comm the communicator
   * @param send the data to broadcast, {@code count} elements of device memory, from its position;
   *     read on the root only
   * @param recv where the data goes, {@code count} elements, on every rank
   * @param count number of elements, 0 or more
   * @param type element type of both buffers
   * @param root rank whose {@code send} is broadcast, the same on every rank
   * @param stream the CUDA stream to enqueue on, or null for the default stream
   */
  public static void broadcast(
      Communicator comm,
      Pointer send,
      Pointer recv,
      long count,
      DataType type,
      int root,
      Pointer stream) {
    long r = address(recv, "recv");
    long s = send == null || send.isNull() ? r : address(send, "send");
    comm.broadcast(s, r, count, type, root, stream(stream));
  }
}
