/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import static io.colibri.Refusals.invalidArgument;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

class MiscApiTest {

  @Test
  void errorCodeFromUnknownCodeIsInternalErrorAndSuccessIsRefused() {
    assertEquals(ErrorCode.INTERNAL_ERROR, ErrorCode.fromCode(99));
    assertEquals(ErrorCode.INTERNAL_ERROR, ErrorCode.fromCode(-1));
    invalidArgument(() -> ErrorCode.fromCode(0), "clbResult_t 0 is clbSuccess, not an error");
  }

  @Test
  void unknownCodesOfTheValueEnumsAreInvalidArguments() {
    for (DataType t : DataType.values()) {
      assertEquals(t, DataType.fromCode(t.code()));
    }
    invalidArgument(
        () -> DataType.fromCode(10), "unknown clbDataType_t 10", "valid codes are 0..9");
    invalidArgument(() -> DataType.fromCode(-1), "unknown clbDataType_t -1");
    for (Algorithm a : Algorithm.values()) {
      assertEquals(a, Algorithm.fromCode(a.code()));
    }
    invalidArgument(
        () -> Algorithm.fromCode(4), "unknown clbAlgorithm_t 4", "valid codes are 0..3");
  }

  @Test
  void exceptionCarriesItsCode() {
    ColibriException e = new ColibriException(ErrorCode.TIMEOUT, "peer 3 silent for 60 s");
    assertEquals(ErrorCode.TIMEOUT, e.code());
    assertTrue(e.toString().contains("[TIMEOUT]"), e.toString());
  }

  @Test
  void withoutProviderInitSaysWhichJarToAdd() {
    // colibri-api's own tests have no implementation on the class path.
    ColibriException e = assertThrows(ColibriException.class, UniqueId::create);
    assertEquals(ErrorCode.UNSUPPORTED, e.code());
    assertTrue(e.getMessage().contains("io.colibri:colibri-native"), e.getMessage());
    assertTrue(e.getMessage().contains("linux-x86_64"), e.getMessage());
  }

  @Test
  void initRefusesNullIdAndOptions() {
    ColibriException e = assertThrows(ColibriException.class, () -> Communicator.init(null, 0, 1));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().contains("unique id is null"), e.getMessage());
    UniqueId id = UniqueId.fromBytes(new byte[UniqueId.BYTES]);
    invalidArgument(() -> Communicator.init(id, 0, 1, null), "options are null");
  }

  private static Map<String, String> launcher() {
    Map<String, String> env = new HashMap<>();
    env.put("MASTER_ADDR", "10.0.0.1");
    env.put("MASTER_PORT", "29500");
    env.put("RANK", "3");
    env.put("WORLD_SIZE", "8");
    return env;
  }

  @Test
  void launchEnvironmentReadsTorchrunVariables() {
    Map<String, String> env = launcher();
    env.put("LOCAL_RANK", "1");
    env.put("COLIBRI_BOOTSTRAP_SECRET", "s3cret");
    LaunchEnvironment l = LaunchEnvironment.from(env);
    assertEquals("10.0.0.1", l.masterAddress());
    assertEquals(29500, l.masterPort());
    assertEquals(3, l.rank());
    assertEquals(8, l.worldSize());
    assertEquals(1, l.localRank());
    assertEquals("s3cret", l.secret());
    assertFalse(l.toString().contains("s3cret"), l.toString());

    LaunchEnvironment noLocal = LaunchEnvironment.from(launcher());
    assertEquals(-1, noLocal.localRank());
    assertEquals(null, noLocal.secret());
  }

  @Test
  void launchEnvironmentNamesTheMissingOrBadVariable() {
    for (String name : new String[] {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) {
      Map<String, String> env = launcher();
      env.remove(name);
      ColibriException e = assertThrows(ColibriException.class, () -> LaunchEnvironment.from(env));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
      assertTrue(
          e.getMessage().contains("environment variable " + name + " is not set"), e.getMessage());
    }
    Map<String, String> env = launcher();
    env.put("RANK", "8");
    ColibriException e = assertThrows(ColibriException.class, () -> LaunchEnvironment.from(env));
    assertTrue(e.getMessage().contains("RANK=8 is out of range"), e.getMessage());
    assertTrue(e.getMessage().contains("0..7"), e.getMessage());

    env.put("RANK", "0");
    env.put("MASTER_PORT", "http");
    invalidArgument(
        () -> LaunchEnvironment.from(env), "MASTER_PORT=\"http\" is not a whole number");
    invalidArgument(() -> LaunchEnvironment.from(null), "env is null", "System.getenv()");
  }
}
