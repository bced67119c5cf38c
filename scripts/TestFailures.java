/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * The failing tests of the last Maven run, for the end of scripts/test.sh: every test case with a
 * failure or an error in the surefire and failsafe reports under the current directory, its
 * message's first line, and the end of its class's output (the tests write their output to files,
 * redirectTestOutputToFile, so that a passing run stays quiet). Run from the repository root:
 * {@code java scripts/TestFailures.java}; exits 0 whatever it finds.
 */
public final class TestFailures {
  private static final int OUTPUT_LINES = 30;

  public static void main(String[] args) throws Exception {
    List<Path> reports = new ArrayList<>();
    try (Stream<Path> modules = Files.list(Paths.get("."))) {
      for (Path m : (Iterable<Path>) modules::iterator) {
        for (String kind : new String[] {"surefire-reports", "failsafe-reports"}) {
          Path dir = m.resolve("target").resolve(kind);
          if (!Files.isDirectory(dir)) {
            continue;
          }
          try (Stream<Path> files = Files.list(dir)) {
            files
                .filter(f -> f.getFileName().toString().matches("TEST-.*\\.xml"))
                .sorted()
                .forEach(reports::add);
          }
        }
      }
    }
    int failed = 0;
    for (Path report : reports) {
      NodeList cases =
          DocumentBuilderFactory.newInstance()
              .newDocumentBuilder()
              .parse(report.toFile())
              .getElementsByTagName("testcase");
      boolean classShown = false;
      for (int i = 0; i < cases.getLength(); i++) {
        Element c = (Element) cases.item(i);
        String problem = problem(c);
        if (problem == null) {
          continue;
        }
        failed++;
        System.out.println(
            "FAILED "
                + c.getAttribute("classname")
                + "."
                + c.getAttribute("name")
                + ": "
                + problem);
        if (!classShown) {
          classShown = true;
          printOutputTail(report, c.getAttribute("classname"));
        }
      }
    }
    System.out.println(
        failed == 0
            ? "no failing test in the Maven reports (the failure is elsewhere: see the build's log)"
            : failed + " failing test(s) in the Maven reports");
  }

  /** The first line of a test case's failure or error, or null when it passed. */
  private static String problem(Element testCase) {
    for (Node n = testCase.getFirstChild(); n != null; n = n.getNextSibling()) {
      if (n instanceof Element
          && ("failure".equals(n.getNodeName()) || "error".equals(n.getNodeName()))) {
        Element e = (Element) n;
        String m = e.getAttribute("message");
        if (m.isEmpty()) {
          m = e.getTextContent().strip();
        }
        int nl = m.indexOf('\n');
        return (nl >= 0 ? m.substring(0, nl) : m) + " (" + n.getNodeName() + ")";
      }
    }
    return null;
  }

  /** The last lines of a test class's redirected output, when there is any. */
  private static void printOutputTail(Path report, String className) throws IOException {
    Path out = report.resolveSibling(className + "-output.txt");
    if (!Files.isRegularFile(out)) {
      return;
    }
    List<String> lines = Files.readAllLines(out);
    int from = Math.max(0, lines.size() - OUTPUT_LINES);
    System.out.println(
        "  the last "
            + (lines.size() - from)
            + " line(s) of "
            + out
            + " (the whole output there):");
    for (String l : lines.subList(from, lines.size())) {
      System.out.println("  | " + l);
    }
  }
}
