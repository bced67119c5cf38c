/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.examples;

import io.colibri.LaunchEnvironment;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Starts N processes of {@link Rank} on this machine, the way torchrun would: each gets the same
 * class path and the variables that {@code Communicator.fromEnvironment()} reads ({@code
 * MASTER_ADDR}, {@code MASTER_PORT}, {@code RANK}, {@code WORLD_SIZE}, {@code LOCAL_RANK} and a
 * {@code COLIBRI_BOOTSTRAP_SECRET} made here). Waits for them; exits 0 when every rank exited 0,
 * and 1 when one fails (the others get 5 s to exit, then are stopped) or when the time is up.
 *
 * <p>Usage: {@code java -cp <class path> io.colibri.examples.Launcher [ranks [timeoutSeconds]]},
 * 2 ranks and 60 s by default. It needs only colibri-api: the native library is loaded by the
 * ranks.
 */
public final class Launcher {

  private Launcher() {}

  /**
   * Runs the ranks.
   *
   * @param args the number of ranks (default 2) and the time limit in seconds (default 60)
   * @throws Exception when a rank cannot be started
   */
  public static void main(String[] args) throws Exception {
    int ranks = args.length > 0 ? Integer.parseInt(args[0]) : 2;
    long timeoutSeconds = args.length > 1 ? Long.parseLong(args[1]) : 60;
    if (ranks < 1) {
      System.err.println("launcher: the number of ranks must be 1 or more, not " + ranks);
      System.exit(2);
    }

    // Where rank 0 opens the bootstrap root. A port free now may be taken before rank 0 binds
    // it; a real launcher uses a port it owns.
    int port = freeLoopbackPort();
    // Without a secret every rank derives it from host:port, and a WARN says that anyone who can
    // reach the port could join.
    byte[] secret = new byte[32];
    new SecureRandom().nextBytes(secret);

    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String classPath = System.getProperty("java.class.path");
    List<Process> processes = new ArrayList<>();
    // Stops the ranks if this JVM is stopped (Ctrl-C, or `timeout` sending SIGTERM).
    Runtime.getRuntime().addShutdownHook(new Thread(() -> processes.forEach(Process::destroy)));

    long start = System.nanoTime();
    System.out.printf("launcher: %d ranks, bootstrap at 127.0.0.1:%d%n", ranks, port);
    for (int rank = 0; rank < ranks; rank++) {
      ProcessBuilder builder = new ProcessBuilder(java, "-cp", classPath, Rank.class.getName());
      Map<String, String> env = builder.environment();
      env.put(LaunchEnvironment.MASTER_ADDR, "127.0.0.1");
      env.put(LaunchEnvironment.MASTER_PORT, Integer.toString(port));
      env.put(LaunchEnvironment.RANK, Integer.toString(rank));
      env.put(LaunchEnvironment.WORLD_SIZE, Integer.toString(ranks));
      env.put(LaunchEnvironment.LOCAL_RANK, Integer.toString(rank));
      env.put(LaunchEnvironment.BOOTSTRAP_SECRET, Base64.getEncoder().encodeToString(secret));
      processes.add(builder.inheritIO().start());
    }

    // Done when every rank has exited, or as soon as one exits with an error.
    CompletableFuture<Process> failed = new CompletableFuture<>();
    for (Process p : processes) {
      p.onExit()
          .thenAccept(
              exited -> {
                if (exited.exitValue() != 0) {
                  failed.complete(exited);
                }
              });
    }
    CompletableFuture<Void> allExited =
        CompletableFuture.allOf(
            processes.stream().map(Process::onExit).toArray(CompletableFuture[]::new));
    if (!waitFor(CompletableFuture.anyOf(allExited, failed), timeoutSeconds)) {
      System.err.printf("launcher: the ranks did not finish within %d s%n", timeoutSeconds);
    } else if (failed.isDone()) {
      System.err.printf("launcher: rank %d failed first%n", processes.indexOf(failed.join()));
      // Colibri fails the other ranks' calls too (REMOTE_ERROR naming the rank that failed):
      // a moment for them to say so and exit before they are stopped.
      waitFor(allExited, 5);
    }

    int exitCode = 0;
    for (int rank = 0; rank < ranks; rank++) {
      Process p = processes.get(rank);
      if (p.isAlive()) {
        p.destroyForcibly();
        System.err.printf("launcher: rank %d was still running: stopped%n", rank);
        exitCode = 1;
      } else if (p.exitValue() != 0) {
        System.err.printf("launcher: rank %d exited with code %d%n", rank, p.exitValue());
        exitCode = 1;
      }
    }
    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    if (exitCode == 0) {
      System.out.printf("launcher: all %d ranks passed in %.1f s%n", ranks, millis / 1000.0);
    }
    System.exit(exitCode);
  }

  /** Whether {@code future} completed within {@code seconds}. */
  private static boolean waitFor(CompletableFuture<?> future, long seconds) throws Exception {
    try {
      future.get(seconds, TimeUnit.SECONDS);
      return true;
    } catch (TimeoutException e) {
      return false;
    }
  }

  private static int freeLoopbackPort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }
}
