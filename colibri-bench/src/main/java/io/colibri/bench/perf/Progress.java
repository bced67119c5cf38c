/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.perf;

import io.colibri.bench.common.SizeFormat;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Where a sweep is: "[3/24] allReduce 1 MiB" on stderr before each size starts. On a terminal
 * the line is rewritten in place and erased before each table row; otherwise (--progress with
 * stderr redirected) one line per size. Never writes to stdout, so the tables stay clean.
 */
class Progress {

  /** Prints nothing. */
  static final Progress OFF = new Progress(null, false, 0);

  private final PrintStream err;
  private final boolean inPlace;
  private final int total;
  private final long started = System.nanoTime();
  private int done;
  private boolean lineShown;

  Progress(PrintStream err, boolean inPlace, int total) {
    this.err = err;
    this.inPlace = inPlace;
    this.total = total;
  }

  /**
   * The progress for this run: on when {@code --progress} was given, or when neither
   * {@code --progress} nor {@code --no-progress} was and stdout and stderr are both terminals.
   * Rewritten in place when stderr is a terminal, else a line per size.
   */
  static Progress choose(PerfConfig config, PrintStream out, PrintStream err, int total) {
    boolean errTerminal = err == System.err && isTerminal(2);
    boolean on =
        config.progress != null
            ? config.progress
            : out == System.out && System.console() != null && errTerminal;
    return on ? new Progress(err, errTerminal, total) : OFF;
  }

  /** Whether file descriptor {@code fd} of this process is a terminal (Linux: /proc/self/fd). */
  static boolean isTerminal(int fd) {
    try {
      String target = Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString();
      return target.startsWith("/dev/pts/") || target.startsWith("/dev/tty");
    } catch (Exception e) {
      return false;
    }
  }

  /** Before a size starts. */
  void start(Collective c, long bytes) {
    if (err == null) {
      return;
    }
    done++;
    String text =
        String.format(
            Locale.ROOT,
            "[%d/%d] %s %s (%.1f s)",
            done,
            total,
            c.displayName(),
            SizeFormat.human(bytes),
            (System.nanoTime() - started) / 1e9);
    if (inPlace) {
      err.print("\r" + text + "\033[K");
      lineShown = true;
    } else {
      err.println("colibri perf: " + text);
    }
    err.flush();
  }

  /** Before anything else is printed: erases the in-place line. */
  void clear() {
    if (err != null && lineShown) {
      err.print("\r\033[K");
      err.flush();
      lineShown = false;
    }
  }
}
