/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Communicator;
import io.colibri.UniqueId;
import io.colibri.spi.NativeCalls;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.jar.JarFile;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The Java 22+ part (io.colibri.Segments) stays out of Java 17's view: colibri-api's classes for
 * 17 do not include it, its jar keeps it under META-INF/versions/22 with {@code Multi-Release:
 * true}, and the communicator offers the hook it calls through.
 */
class MultiReleaseJarTest {

  @Test
  void onJava17TheSegmentCallsAreNotThere() {
    Assumptions.assumeTrue(Runtime.version().feature() < 22, "runs on Java 17..21");
    assertThrows(ClassNotFoundException.class, () -> Class.forName("io.colibri.Segments"));
  }

  @Test
  void theApiJarKeepsTheJava22PartInItsVersionedDirectory() throws Exception {
    File api =
        new File(Communicator.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Assumptions.assumeTrue(api.isFile(), "colibri-api is " + api + ", not a jar (mvn test)");
    try (JarFile jar = new JarFile(api)) {
      assertNull(
          jar.getEntry("io/colibri/Segments.class"),
          "io.colibri.Segments must not be a Java 17 class of " + api);
      if (jar.getEntry("META-INF/versions/22/io/colibri/Segments.class") != null) {
        assertEquals(
            "true",
            jar.getManifest().getMainAttributes().getValue("Multi-Release"),
            api + " has META-INF/versions/22 but is not a multi-release jar");
      }
    }
  }

  @Test
  void theCommunicatorNamesTheLibraryItsHandleBelongsTo() {
    try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1)) {
      assertTrue(comm instanceof NativeCalls, comm.getClass().getName());
      Path lib = Path.of(((NativeCalls) comm).nativeLibrary());
      assertEquals("libcolibri.so.0", lib.getFileName().toString());
      assertTrue(Files.isRegularFile(lib), lib + " is not a file");
    }
  }
}
