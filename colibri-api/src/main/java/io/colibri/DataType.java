/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

/**
 * Element type of a collective's buffers. {@link #code()} is the value of {@code clbDataType_t} in
 * {@code colibri.h}; {@link #size()} is the size of one element in bytes.
 */
public enum DataType {
  INT8(0, 1),
  UINT8(1, 1),
  INT32(2, 4),
  UINT32(3, 4),
  INT64(4, 8),
  UINT64(5, 8),
  /** IEEE 754 binary16. */
  FLOAT16(6, 2),
  /** bfloat16: the upper 16 bits of a float32. */
  BFLOAT16(7, 2),
  FLOAT32(8, 4),
  FLOAT64(9, 8);

  private static final DataType[] BY_CODE = values();

  private final int code;
  private final int size;

  DataType(int code, int size) {
    this.code = code;
    this.size = size;
  }

  /** The {@code clbDataType_t} value. */
  public int code() {
    return code;
  }

  /** Bytes per element. */
  public int size() {
    return size;
  }

  /**
   * The type whose {@code clbDataType_t} value is {@code code}.
   *
   * @throws ColibriException INVALID_ARGUMENT if no type has that code
   */
  public static DataType fromCode(int code) {
    if (code < 0 || code >= BY_CODE.length) {
      throw new ColibriException(ErrorCode.INVALID_ARGUMENT, "unknown clbDataType_t " + code
          + ": valid codes are 0.." + (BY_CODE.length - 1));
    }
    return BY_CODE[code];
  }
}
