/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.bench.common.Version;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The command line of colibri-bench.jar: commands, help, version, errors, shell completion. */
class CliTest {

  private static MainRun run(String... args) {
    return MainRun.of(args);
  }

  private static void assertContains(String haystack, String... needles) {
    for (String needle : needles) {
      assertTrue(haystack.contains(needle), "expected '" + needle + "' in:\n" + haystack);
    }
  }

  @Test
  void helpListsTheCommands() {
    for (String flag : List.of("--help", "-h")) {
      MainRun r = run(flag);
      assertEquals(0, r.rc, r.both());
      assertEquals("", r.err);
      assertContains(
          r.out,
          "Usage: java -jar colibri-bench.jar [-hV] [COMMAND]",
          "Commands:",
          "\n  perf ",
          "\n  doctor ",
          "\n  chart ",
          "\n  decode ",
          "\n  generate-completion ",
          "\n  help ",
          "the default command",
          "colibri-jmh.jar");
    }
    assertEquals(run("--help").out, run("help").out);
  }

  @Test
  void eachCommandHasItsHelp() {
    String[][] commands = {
      {
        "perf",
        "--min-bytes=SIZE",
        "--collectives=LIST",
        "--no-check",
        "--progress",
        "float32, float16, bfloat16",
        "auto, shm, socket, verbs",
        "Exit code: 0 ok, 1 wrong"
      },
      {"doctor", "--json", "--no-gpu", "--root=DIR", "docs/troubleshooting.md"},
      {"chart", "[LABEL=]FILE", "--out=DIR", "--width=PX", "--grid", "mpi_coll_bench"},
      {
        "decode",
        "--tp=N",
        "--check",
        "--model=SHAPE",
        "--transport=T",
        "Exit code: 0 ok, 1 --check failed"
      },
      {"generate-completion", "--name=NAME", "source <("}
    };
    for (String[] c : commands) {
      for (String[] args :
          List.of(
              new String[] {c[0], "--help"},
              new String[] {c[0], "-h"},
              new String[] {"help", c[0]})) {
        MainRun r = run(args);
        assertEquals(0, r.rc, r.both());
        assertContains(r.out, "Usage: java -jar colibri-bench.jar " + c[0]);
        assertContains(r.out, List.of(c).subList(1, c.length).toArray(new String[0]));
        assertContains(r.out, "-V, --version");
      }
    }
    assertTrue(!run("perf", "--help").out.contains("--child"), "internal options stay hidden");
  }

  @Test
  void versionNamesColibriAndJava() {
    for (String[] args :
        List.of(
            new String[] {"--version"},
            new String[] {"-V"},
            new String[] {"doctor", "--version"},
            new String[] {"perf", "-V"})) {
      MainRun r = run(args);
      assertEquals(0, r.rc, r.both());
      assertTrue(r.out.startsWith("colibri-bench: Colibri "), r.out);
      assertContains(r.out, "\nJava " + System.getProperty("java.version"));
    }
    String v = Version.library();
    assertTrue(v != null && v.matches("\\d+\\.\\d+\\.\\d+"), "the native library loads: " + v);
    assertTrue(run("--version").out.startsWith("colibri-bench: Colibri " + v + "\n"));
  }

  /** Each command: what was wrong, a suggestion where there is one, where to look; exit 2. */
  @Test
  void badOptionsSayWhatIsWrongAndExitWithTwo() {
    bad(
        args("--frobnicate"),
        "colibri perf: Unknown option: '--frobnicate'",
        "See 'java -jar colibri-bench.jar perf --help' for the options.");
    bad(
        args("--rank", "2"),
        "colibri perf: Unknown options: '--rank', '2'",
        "Possible solutions: --ranks");
    bad(
        args("perf", "-n", "many"),
        "colibri perf: Invalid value for option '--iters': 'many' is not an int",
        "perf --help");
    bad(
        args("-t", "complex"),
        "colibri perf: Invalid value for option '--type': unknown type 'complex': pass float32");
    bad(args("--json"), "colibri perf: Missing required parameter for option '--json' (FILE)");
    bad(
        args("doctor", "--jsno"),
        "colibri doctor: Unknown option: '--jsno'",
        "Possible solutions: --json",
        "doctor --help");
    bad(
        args("chart", "--width", "50", "x.csv"),
        "colibri chart: --width is 50: pass 200..10000 pixels",
        "chart --help");
    bad(args("chart", "--grid"), "colibri chart: no result files");
    bad(
        args("generate-completion", "--shell", "zsh"),
        "colibri generate-completion: Unknown options: '--shell', 'zsh'");
    bad(args("help", "doktor"), "colibri-bench: Unknown subcommand 'doktor'");
  }

  private static String[] args(String... args) {
    return args;
  }

  private static void bad(String[] args, String... expected) {
    MainRun r = run(args);
    assertEquals(Cli.EXIT_USAGE, r.rc, r.both());
    assertEquals("", r.out, "errors go to stderr");
    assertContains(r.err, expected);
  }

  /** picocli's bash completion for the command colibri-bench (or --name). */
  @Test
  void generatesABashCompletionScript() {
    MainRun r = run("generate-completion");
    assertEquals(0, r.rc, r.both());
    assertContains(
        r.out,
        "complete -F _complete_colibri-bench",
        "perf doctor chart",
        "'--min-bytes'",
        "'--no-gpu'",
        "'--grid'",
        "(\"float32\" \"float16\" \"bfloat16\" \"float64\"",
        "(\"auto\" \"shm\" \"socket\" \"verbs\")",
        "(\"allreduce\" \"allgather\" \"reducescatter\" \"broadcast\" \"sendrecv\" \"alltoall\""
            + " \"alltoallv\")");
    assertTrue(!r.out.contains("--child-rank"), "internal options are not completed");
    assertContains(
        run("generate-completion", "--name", "cbench").out, "complete -F _complete_cbench");
  }
}
