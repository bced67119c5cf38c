/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.DataType;
import java.util.Locale;

/**
 * The GPU decoder's element type: of its weights, activations, KV cache, logits and collectives.
 * The arithmetic inside a kernel is float32 either way, and cuBLAS accumulates in float32; a
 * bfloat16 value is rounded to nearest even each time it is stored.
 */
public enum Precision {
  /** IEEE float32: TP=N generates TP=1's tokens (the check's precision). */
  FLOAT32(4, "f32", DataType.FLOAT32, 0 /* CUDA_R_32F */, 7 /* ncclFloat32 */),
  /** bfloat16: 8 bits of mantissa, float32's range; how models are served. */
  BFLOAT16(2, "bf16", DataType.BFLOAT16, 14 /* CUDA_R_16BF */, 9 /* ncclBfloat16 */);

  private final int bytes;
  private final String suffix;
  private final DataType colibri;
  private final int cudaType;
  private final int ncclType;

  Precision(int bytes, String suffix, DataType colibri, int cudaType, int ncclType) {
    this.bytes = bytes;
    this.suffix = suffix;
    this.colibri = colibri;
    this.cudaType = cudaType;
    this.ncclType = ncclType;
  }

  /** @return bytes per element */
  public int bytes() {
    return bytes;
  }

  /** @return the suffix of the decoder's kernels for this type (src/tools/decode_kernels.cu) */
  public String suffix() {
    return suffix;
  }

  /** @return Colibri's data type */
  public DataType colibri() {
    return colibri;
  }

  /** @return cudaDataType_t, as cuBLAS takes it */
  public int cudaType() {
    return cudaType;
  }

  /** @return ncclDataType_t */
  public int ncclType() {
    return ncclType;
  }

  /** @return the name the command line takes: float32 or bfloat16 */
  public String label() {
    return name().toLowerCase(Locale.ROOT);
  }

  /**
   * @param name float32 or bfloat16 (any case)
   * @return the precision
   * @throws IllegalArgumentException naming the two there are
   */
  public static Precision parse(String name) {
    for (Precision p : values()) {
      if (p.label().equalsIgnoreCase(name)) {
        return p;
      }
    }
    throw new IllegalArgumentException("--dtype " + name + ": use float32 or bfloat16");
  }

  /**
   * float32 to bfloat16, rounded to nearest even (as the GPU's {@code __float2bfloat16_rn}); a
   * NaN stays a (quiet) NaN.
   *
   * @param f the value
   * @return its bfloat16 bits
   */
  public static short toBfloat16(float f) {
    int bits = Float.floatToRawIntBits(f);
    if (Float.isNaN(f)) {
      return (short) ((bits >>> 16) | 0x40);
    }
    return (short) ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16);
  }

  /**
   * bfloat16 to float32 (exact).
   *
   * @param b the bfloat16 bits
   * @return the value
   */
  public static float fromBfloat16(short b) {
    return Float.intBitsToFloat((b & 0xffff) << 16);
  }
}
