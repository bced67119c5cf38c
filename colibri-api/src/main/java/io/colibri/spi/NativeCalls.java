/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.spi;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import java.util.function.LongToIntFunction;

/**
 * A {@link Communicator} over libcolibri's C ABI ({@code colibri.h}) that lets code calling that
 * ABI itself make a call as one of the communicator's own. The {@code MemorySegment} collectives
 * of Java 22 and later ({@code io.colibri.Segments}) use it: they call the C functions through the
 * FFM linker, which keeps each segment's memory alive for as long as the call runs. Not for
 * applications.
 */
public interface NativeCalls {

  /**
   * The loaded native library whose functions take this communicator's handle: its path, or its
   * name when the loader did not say where it found it.
   *
   * @return the library's path or name
   */
  String nativeLibrary();

  /**
   * Runs {@code nativeCall} with this communicator's {@code clbComm_t} handle, as one of its calls:
   * refused like a synchronous collective after {@link Communicator#close()} or while its
   * asynchronous calls are pending, and the handle stays valid until it returns.
   *
   * @param call the call's name, e.g. "allReduce"
   * @param what the call in messages, e.g. "allReduce of 16 FLOAT32"
   * @param nativeCall makes the C call with the handle and returns its {@code clbResult_t}
   * @throws ColibriException for a refusal, or with the code and message of a nonzero result
   */
  void callNative(String call, String what, LongToIntFunction nativeCall);
}
