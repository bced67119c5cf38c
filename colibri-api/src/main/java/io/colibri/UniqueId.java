/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import java.security.MessageDigest;
import java.util.Arrays;
import java.util.Base64;

/**
 * The meeting point of the ranks of one communicator: the bootstrap root's address, a random secret
 * and the protocol version, in exactly {@value #BYTES} bytes ({@code clbUniqueId}).
 *
 * <p>One process calls {@link #create()}, which starts the bootstrap root inside that process, and
 * hands the id to every rank (for example as {@link #toString()} text through a launcher, a shared
 * file or a key-value store); each rank then calls {@link Communicator#init(UniqueId, int, int)}.
 *
 * <p>The id carries the secret that admits ranks: treat its bytes and its string form like a
 * password (do not log them where others can read them). The secret itself never goes on the
 * wire: every bootstrap connection proves it by challenge-response.
 *
 * <p>{@link #close()} stops the root of an id made here once it is no longer needed (for example an
 * id whose communicator will never be made); a root also stops by itself once its communicator has
 * formed, or when none forms within {@code COLIBRI_TIMEOUT_MS} (60 s by default, counted again from
 * each rank's join with that rank's timeout).
 */
public final class UniqueId implements AutoCloseable {
  /** Size of an id in bytes ({@code CLB_UNIQUE_ID_BYTES}). */
  public static final int BYTES = 128;

  private static final Base64.Encoder ENCODER = Base64.getUrlEncoder().withoutPadding();
  private static final Base64.Decoder DECODER = Base64.getUrlDecoder();

  /** Length of {@link #toString()}: 128 bytes in unpadded base64. */
  private static final int TEXT_LENGTH = (BYTES * 8 + 5) / 6;

  private final byte[] bytes;

  private UniqueId(byte[] bytes) {
    this.bytes = bytes;
  }

  /**
   * Creates a new id and starts its bootstrap root in this process (it lives until every rank has
   * joined, until no communicator forms within the timeout, until {@link #close()}, or until the
   * process ends).
   *
   * @return the new id, to hand to every rank
   * @throws ColibriException UNSUPPORTED if no native provider is on the class path
   */
  public static UniqueId create() {
    return ProviderLookup.provider().createUniqueId();
  }

  /**
   * An id from the {@value #BYTES} bytes that {@link #toBytes()} gave on some rank.
   *
   * @param bytes the id's bytes, exactly {@value #BYTES}; copied
   * @return the id
   * @throws ColibriException INVALID_ARGUMENT if {@code bytes} is null or not exactly
   *     {@value #BYTES} long
   */
  public static UniqueId fromBytes(byte[] bytes) {
    if (bytes == null) {
      throw invalid(
          "unique id bytes are null: pass the "
              + BYTES
              + " bytes that UniqueId.toBytes() returned");
    }
    if (bytes.length != BYTES) {
      throw invalid(
          "unique id must be exactly "
              + BYTES
              + " bytes, got "
              + bytes.length
              + ": pass the bytes that UniqueId.toBytes() returned, unchanged");
    }
    return new UniqueId(bytes.clone());
  }

  /**
   * Parses the text that {@link #toString()} gave on some rank (URL-safe base64 without padding;
   * surrounding whitespace is ignored).
   *
   * @param text the id's string form, 171 characters
   * @return the id
   * @throws ColibriException INVALID_ARGUMENT if {@code text} is null, not base64, or not
   *     {@value #BYTES} bytes long once decoded
   */
  public static UniqueId parse(String text) {
    if (text == null) {
      throw invalid("unique id text is null: pass the string that UniqueId.toString() returned");
    }
    String t = text.strip();
    if (t.length() != TEXT_LENGTH) {
      throw invalid(
          "unique id text must be "
              + TEXT_LENGTH
              + " characters of URL-safe base64, got "
              + t.length()
              + ": pass the whole string that UniqueId.toString() returned (was it cut or"
              + " padded?)");
    }
    for (int i = 0; i < t.length(); i++) {
      char c = t.charAt(i);
      boolean ok =
          (c >= 'A' && c <= 'Z')
              || (c >= 'a' && c <= 'z')
              || (c >= '0' && c <= '9')
              || c == '-'
              || c == '_';
      if (!ok) {
        throw invalid(
            "unique id text has '"
                + printable(c)
                + "' at index "
                + i
                + ", which is not URL-safe base64 (A-Z a-z 0-9 - _): pass the string that"
                + " UniqueId.toString() returned, unchanged");
      }
    }
    byte[] decoded;
    try {
      decoded = DECODER.decode(t);
    } catch (IllegalArgumentException e) { // the JDK decoder's refusal
      throw invalid(
          "unique id text is not valid base64 ("
              + e.getMessage()
              + "): pass the string that UniqueId.toString() returned, unchanged",
          e);
    }
    if (decoded.length != BYTES) {
      throw invalid(
          "unique id text decodes to "
              + decoded.length
              + " bytes, not "
              + BYTES
              + ": pass the string that UniqueId.toString() returned");
    }
    return new UniqueId(decoded);
  }

  /**
   * Stops this id's bootstrap root if it runs in this process ({@link #create()} here); otherwise
   * does nothing. Ranks still joining it fail; communicators already made are not affected. Closing
   * twice is harmless.
   *
   * @throws ColibriException UNSUPPORTED if no native provider is on the class path
   */
  @Override
  public void close() {
    ProviderLookup.provider().releaseUniqueId(this);
  }

  /** {@return a copy of the {@value #BYTES} bytes} */
  public byte[] toBytes() {
    return bytes.clone();
  }

  /**
   * The id as URL-safe base64 without padding (171 characters), for {@link #parse(String)}. It
   * contains the secret.
   */
  @Override
  public String toString() {
    return ENCODER.encodeToString(bytes);
  }

  @Override
  public boolean equals(Object o) {
    // Constant time: the bytes hold a secret.
    return o instanceof UniqueId && MessageDigest.isEqual(bytes, ((UniqueId) o).bytes);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(bytes);
  }

  private static ColibriException invalid(String message) {
    return new ColibriException(ErrorCode.INVALID_ARGUMENT, message);
  }

  private static ColibriException invalid(String message, Throwable cause) {
    return new ColibriException(ErrorCode.INVALID_ARGUMENT, message, cause);
  }

  private static String printable(char c) {
    return c >= 0x20 && c < 0x7f ? String.valueOf(c) : String.format("\\u%04x", (int) c);
  }
}
