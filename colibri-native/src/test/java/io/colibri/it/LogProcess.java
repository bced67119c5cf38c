/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import io.colibri.Communicator;
import io.colibri.Options;
import io.colibri.UniqueId;
import io.colibri.jni.ColibriLib;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * A JVM of {@link NativeLogProcessTest}: a JUL handler on {@code io.colibri} prints records as
 * {@code JUL <level> <message>} on stdout (the first 20 of each level), then
 *
 * <pre>
 *   init          init a communicator of one rank, close it, exit 0
 *   exit|return   open a communicator of one rank and leave it open; while a Java thread makes
 *                 failing calls (a DEBUG line each) and another starts and releases bootstrap
 *                 roots (an INFO line each from the root's native thread), System.exit(0), or
 *                 return from main with both threads still logging (they are daemons)
 * </pre>
 */
public final class LogProcess {
  private LogProcess() {}

  private static final Logger JUL = Logger.getLogger("io.colibri");

  public static void main(String[] args) throws Exception {
    JUL.setUseParentHandlers(false);
    JUL.setLevel(Level.parse(System.getProperty("test.julLevel", "ALL")));
    Map<Level, AtomicInteger> printed = new ConcurrentHashMap<>();
    JUL.addHandler(
        new Handler() {
          @Override
          public void publish(LogRecord r) {
            if (printed.computeIfAbsent(r.getLevel(), l -> new AtomicInteger()).incrementAndGet()
                <= 20) {
              System.out.println("JUL " + r.getLevel() + " " + r.getMessage());
            }
          }

          @Override
          public void flush() {}

          @Override
          public void close() {}
        });
    Options options = Options.builder().timeout(Duration.ofSeconds(20)).build();
    if (args[0].equals("init")) {
      try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1, options)) {
        System.out.println("INIT OK " + comm.rank());
      }
      return;
    }
    Communicator open = Communicator.init(UniqueId.create(), 0, 1, options);
    System.out.println("OPEN " + open.rank());
    Thread failing =
        new Thread(
            () -> {
              int[] out = new int[1];
              while (true) {
                ColibriLib.clbTransportFromName("no-such-transport", out);
              }
            });
    Thread roots =
        new Thread(
            () -> {
              while (true) {
                UniqueId.create().close();
              }
            });
    for (Thread t : new Thread[] {failing, roots}) {
      t.setDaemon(true);
      t.start();
    }
    Thread.sleep(300);
    System.out.println("LEAVING");
    System.out.flush();
    if (args[0].equals("exit")) {
      System.exit(0);
    }
  }
}
