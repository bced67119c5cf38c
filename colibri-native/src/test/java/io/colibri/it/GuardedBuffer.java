/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.bytedeco.javacpp.Pointer;

/**
 * A direct buffer whose data region is surrounded by guard bytes. Before a call the whole buffer,
 * guards included, is poisoned with one byte value; after it the guards must still hold it, so a
 * write past either end of an output is seen. Reused between calls (grows when needed).
 */
final class GuardedBuffer {
  static final int GUARD = 256;
  static final byte POISON = (byte) 0xA5;
  static final byte POISON2 = (byte) 0x5A;

  private static final byte[][] FILL = new byte[256][];

  private ByteBuffer whole;
  private int dataBytes;

  /** Makes the data region {@code bytes} long (contents undefined until poisoned). */
  GuardedBuffer reset(long bytes) {
    int b = Math.toIntExact(bytes);
    if (whole == null || whole.capacity() < b + 2 * GUARD) {
      whole = ByteBuffer.allocateDirect(b + 2 * GUARD).order(ByteOrder.nativeOrder());
    }
    dataBytes = b;
    return this;
  }

  int dataBytes() {
    return dataBytes;
  }

  /** The data region, in native byte order, position 0. */
  ByteBuffer data() {
    return whole.slice(GUARD, dataBytes).order(ByteOrder.nativeOrder());
  }

  /** {@code len} bytes of the data region from byte {@code off}. */
  ByteBuffer slice(long off, long len) {
    return whole
        .slice(GUARD + Math.toIntExact(off), Math.toIntExact(len))
        .order(ByteOrder.nativeOrder());
  }

  /** Address of the first data byte, for the raw-address overloads. */
  long address() {
    return new Pointer(data()).address();
  }

  /** Fills guards and data with {@code value}. */
  void poison(byte value) {
    fill(0, 2 * GUARD + dataBytes, value);
  }

  /** Fills only the guards with {@code value}. */
  void poisonGuards(byte value) {
    fill(0, GUARD, value);
    fill(GUARD + dataBytes, GUARD, value);
  }

  private void fill(int from, int len, byte value) {
    byte[] src = fillArray(value);
    for (int off = 0; off < len; off += src.length) {
      whole.put(from + off, src, 0, Math.min(src.length, len - off));
    }
  }

  private static byte[] fillArray(byte value) {
    synchronized (FILL) {
      byte[] a = FILL[value & 0xff];
      if (a == null) {
        a = new byte[1 << 16];
        Arrays.fill(a, value);
        FILL[value & 0xff] = a;
      }
      return a;
    }
  }

  /** Null if both guards still hold {@code value}, else where they were overwritten. */
  String checkGuards(byte value) {
    for (int i = 0; i < GUARD; i++) {
      byte b = whole.get(GUARD - 1 - i);
      if (b != value) {
        return "byte "
            + (-1 - i)
            + " before the data region (0x"
            + hex(b)
            + ", poison 0x"
            + hex(value)
            + ") was overwritten";
      }
    }
    for (int i = 0; i < GUARD; i++) {
      byte b = whole.get(GUARD + dataBytes + i);
      if (b != value) {
        return "byte "
            + i
            + " after the end of the "
            + dataBytes
            + "-byte data region (0x"
            + hex(b)
            + ", poison 0x"
            + hex(value)
            + ") was overwritten";
      }
    }
    return null;
  }

  private static String hex(byte b) {
    return String.format("%02x", b & 0xff);
  }
}
