/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

/**
 * Element type of a collective's buffers. {@link #code()} is the value of {@code clbDataType_t} in
 * {@code colibri.h}; {@link #size()} is the size of one element in bytes.
 */
public enum DataType {
  /** Signed 8-bit integer. */
  INT8(0, 1),
  /** Unsigned 8-bit integer. */
  UINT8(1, 1),
  /** Signed 32-bit integer. */
  INT32(2, 4),
  /** Unsigned 32-bit integer. */
  UINT32(3, 4),
  /** Signed 64-bit integer. */
  INT64(4, 8),
  /** Unsigned 64-bit integer. */
  UINT64(5, 8),
  /** IEEE 754 binary16. */
  FLOAT16(6, 2),
  /** bfloat16: the upper 16 bits of a float32. */
  BFLOAT16(7, 2),
  /** IEEE 754 binary32 ({@code float}). */
  FLOAT32(8, 4),
  /** IEEE 754 binary64 ({@code double}). */
  FLOAT64(9, 8);

  private static final DataType[] BY_CODE = values();

  private final int code;
  private final int size;

  DataType(int code, int size) {
    this.code = code;
    this.size = size;
  }

  /** {@return the {@code clbDataType_t} value} */
  public int code() {
    return code;
  }

  /** {@return bytes per element} */
  public int size() {
    return size;
  }

  /**
   * The type whose {@code clbDataType_t} value is {@code code}.
   *
   * @param code a {@code clbDataType_t} value, 0..9
   * @return the type with that code
   * @throws
   * ColibriException INVALID_ARGUMENT if no type has that code
   */
  public static DataType fromCode(int code) {
    if (code < 0 || code >= BY_CODE.length) {
      throw new ColibriException(
          ErrorCode.INVALID_ARGUMENT,
          "unknown clbDataType_t " + code + ": valid codes are 0.." + (BY_CODE.length - 1));
    }
    return BY_CODE[code];
  }
}
