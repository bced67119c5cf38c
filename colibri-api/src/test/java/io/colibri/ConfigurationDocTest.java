/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.junit.jupiter.api.Test;

/**
 * docs/configuration.md holds the table of {@link Options#describeAll()}, so the documentation
 * cannot drift from the code. With {@code -Dcolibri.updateDocs=true} the test rewrites the table.
 */
class ConfigurationDocTest {

  private static final Path DOC = Paths.get("..", "docs", "configuration.md");
  private static final String HEADER_LINE = "| Option |";

  @Test
  void documentHoldsTheGeneratedTable() throws IOException {
    assertTrue(Files.isRegularFile(DOC), DOC.toAbsolutePath() + " is missing");
    String doc = Files.readString(DOC, StandardCharsets.UTF_8);
    String table = Options.describeAll();
    if (Boolean.getBoolean("colibri.updateDocs") && !doc.contains(table)) {
      int start = doc.indexOf(HEADER_LINE);
      assertTrue(start >= 0, "no table starting with \"" + HEADER_LINE + "\" in " + DOC);
      int end = start;
      while (end < doc.length() && doc.startsWith("|", end)) {
        int nl = doc.indexOf('\n', end);
        end = nl < 0 ? doc.length() : nl + 1;
      }
      doc = doc.substring(0, start) + table + doc.substring(end);
      Files.writeString(DOC, doc, StandardCharsets.UTF_8);
    }
    assertTrue(
        doc.contains(table),
        DOC
            + " is out of date with Options.describeAll(): run"
            + " mvn -pl colibri-api test -Dtest=ConfigurationDocTest -Dcolibri.updateDocs=true");
  }
}
