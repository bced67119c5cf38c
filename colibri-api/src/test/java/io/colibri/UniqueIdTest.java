/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import static io.colibri.Refusals.invalidArgument;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;

import java.util.Random;
import org.junit.jupiter.api.Test;

class UniqueIdTest {

  private static byte[] randomBytes(long seed) {
    byte[] b = new byte[UniqueId.BYTES];
    new Random(seed).nextBytes(b);
    return b;
  }

  @Test
  void base64RoundTrip() {
    for (long seed = 0; seed < 50; seed++) {
      byte[] bytes = randomBytes(seed);
      UniqueId id = UniqueId.fromBytes(bytes);
      String text = id.toString();
      assertEquals(171, text.length());
      assertFalse(text.contains("="), text);
      assertFalse(text.contains("+") || text.contains("/"), text);
      UniqueId back = UniqueId.parse(text);
      assertEquals(id, back);
      assertEquals(id.hashCode(), back.hashCode());
      assertArrayEquals(bytes, back.toBytes());
    }
  }

  @Test
  void parseIgnoresSurroundingWhitespace() {
    UniqueId id = UniqueId.fromBytes(randomBytes(7));
    assertEquals(id, UniqueId.parse("  " + id + "\n"));
  }

  @Test
  void bytesAreCopiedInAndOut() {
    byte[] bytes = randomBytes(1);
    UniqueId id = UniqueId.fromBytes(bytes);
    bytes[0] ^= 1;
    assertNotEquals(bytes[0], id.toBytes()[0]);
    byte[] out = id.toBytes();
    assertNotSame(out, id.toBytes());
    out[1] ^= 1;
    assertNotEquals(out[1], id.toBytes()[1]);
  }

  @Test
  void equalityIsByContent() {
    assertEquals(UniqueId.fromBytes(randomBytes(3)), UniqueId.fromBytes(randomBytes(3)));
    assertNotEquals(UniqueId.fromBytes(randomBytes(3)), UniqueId.fromBytes(randomBytes(4)));
    assertNotEquals(UniqueId.fromBytes(randomBytes(3)), "not an id");
  }

  @Test
  void wrongLengthBytesAreRefused() {
    invalidArgument(
        () -> UniqueId.fromBytes(new byte[127]),
        "exactly 128 bytes, got 127",
        "UniqueId.toBytes()");
    invalidArgument(() -> UniqueId.fromBytes(null), "unique id bytes are null");
  }

  @Test
  void badTextSaysWhatIsWrong() {
    String good = UniqueId.fromBytes(randomBytes(5)).toString();

    invalidArgument(
        () -> UniqueId.parse(good.substring(0, 100)), "must be 171 characters", "got 100");
    invalidArgument(() -> UniqueId.parse(good + "=="), "got 173");
    String withPlus = "+" + good.substring(1);
    invalidArgument(() -> UniqueId.parse(withPlus), "'+' at index 0", "URL-safe base64");
    String withNewline = good.substring(0, 50) + "\n" + good.substring(51);
    invalidArgument(() -> UniqueId.parse(withNewline), "\\u000a' at index 50");
    invalidArgument(() -> UniqueId.parse(null), "unique id text is null");
    invalidArgument(() -> UniqueId.parse(""), "got 0");
  }
}
