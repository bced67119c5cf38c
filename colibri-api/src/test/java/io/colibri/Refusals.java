/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.function.Executable;

/** A refused value: a ColibriException with INVALID_ARGUMENT and the words of its message. */
final class Refusals {
  private Refusals() {}

  /** Runs {@code call}, which must be refused with INVALID_ARGUMENT and every fragment. */
  static ColibriException invalidArgument(Executable call, String... fragments) {
    ColibriException e = assertThrows(ColibriException.class, call);
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code(), e::toString);
    for (String f : fragments) {
      assertTrue(e.getMessage().contains(f), () -> "\"" + f + "\" not in: " + e.getMessage());
    }
    return e;
  }
}
