/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import io.colibri.UniqueId;
import io.colibri.it.Spec.Coll;
import io.colibri.spi.CommunicatorProvider;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;
import java.util.SplittableRandom;
import java.util.function.Supplier;
import java.util.zip.CRC32;

/**
 * One rank in its own JVM, started by {@link MultiProcessTest}, {@link FaultTest} and
 * {@link AsyncErrorTest}.
 *
 * <pre>
 *   check &lt;id-base64&gt; &lt;rank&gt; &lt;nranks&gt; &lt;transport&gt; &lt;timeoutMs&gt;
 *   loop  &lt;id-base64&gt; &lt;rank&gt; &lt;nranks&gt; &lt;transport&gt; &lt;timeoutMs&gt;
 *   init  &lt;id-base64&gt; &lt;rank&gt; &lt;nranks&gt; &lt;transport&gt; &lt;timeoutMs&gt;
 *   idle  &lt;id-base64&gt; &lt;rank&gt; &lt;nranks&gt; &lt;transport&gt; &lt;timeoutMs&gt;
 *   env   - - - &lt;transport&gt; &lt;timeoutMs&gt;   (Communicator.fromEnvironment: MASTER_ADDR, ...)
 *   envinit - - - &lt;transport&gt; &lt;timeoutMs&gt; (the same, init only, as init)
 * </pre>
 *
 * <p>A transport of {@code -} leaves it to the environment (COLIBRI_TRANSPORT, colibri.transport).
 * The other options are those of {@link #options}: a rank in the test's own JVM that joins these
 * ranks uses them too, since settings such as chunkBytes must agree across ranks.
 *
 * <p>check / env: runs every collective on several types, ops and sizes; every process generates
 * every rank's input from the shared seeds, so it checks its own output against the Java
 * reference element by element, and all ranks compare checksums of their outputs (through an
 * allGather) to prove they got the same bits. Exit 0 when everything matched, 1 otherwise (the
 * problems on stderr).
 *
 * <p>loop: allReduce in a loop until something fails; prints READY after the first one. On a
 * failure prints {@code FAILED <code> <epochMillis> <message>}, closes the communicator, prints
 * CLOSED and exits 3.
 *
 * <p>init: init only (other options from the environment, e.g. COLIBRI_VERSION_CHECK); prints
 * {@code INIT OK <the versions line of transportInfo()>} and exits 0, or prints
 * {@code FAILED <code> <message>} and exits 3. Before, {@code INIT START <epochMillis>}, and after,
 * {@code INIT END <epochMillis>} (the native library is loaded before the start).
 *
 * <p>idle: init, print READY, then make no call until killed (after two minutes it closes and
 * exits 0, so that a test that forgot it leaves nothing behind).
 */
public final class RankProcess {
  private RankProcess() {}

  public static void main(String[] args) {
    String mode = args[0];
    Options options =
        options(args[4].equals("-") ? null : Transport.valueOf(args[4]), Long.parseLong(args[5]));
    int exit;
    try {
      if (mode.equals("envinit")) {
        exit = initOnly(() -> Communicator.fromEnvironment(options));
      } else if (mode.equals("env")) {
        try (Communicator c = Communicator.fromEnvironment(options)) {
          exit = check(c);
        }
      } else {
        UniqueId id = UniqueId.parse(args[1]);
        int rank = Integer.parseInt(args[2]);
        int nranks = Integer.parseInt(args[3]);
        if (mode.equals("loop")) {
          exit = loop(id, rank, nranks, options);
        } else if (mode.equals("init")) {
          exit = initOnly(() -> Communicator.init(id, rank, nranks, options));
        } else if (mode.equals("idle")) {
          try (Communicator c = Communicator.init(id, rank, nranks, options)) {
            System.out.println("READY rank " + c.rank());
            System.out.flush();
            Thread.sleep(120_000);
          }
          exit = 0;
        } else {
          try (Communicator c = Communicator.init(id, rank, nranks, options)) {
            exit = check(c);
          }
        }
      }
    } catch (Throwable t) {
      System.err.println("rank process failed: " + t);
      t.printStackTrace();
      exit = 2;
    }
    System.out.flush();
    System.err.flush();
    System.exit(exit);
  }

  /**
   * The options of every rank process (transport null: from the environment); a rank in the
   * test's JVM that joins rank processes takes these too.
   */
  static Options options(Transport transport, long timeoutMs) {
    Options.Builder b =
        Options.builder()
            .timeout(Duration.ofMillis(timeoutMs))
            .stagingCapBytes(1024 * 1024)
            .chunkBytes(32 * 1024);
    if (transport != null) {
      b.transport(transport);
    }
    return b.build();
  }

  private static int initOnly(Supplier<Communicator> init) {
    // The native library loads first, so that the start is that of the bootstrap.
    ServiceLoader.load(CommunicatorProvider.class)
        .findFirst()
        .ifPresent(CommunicatorProvider::version);
    System.out.println("INIT START " + System.currentTimeMillis());
    try (Communicator c = init.get()) {
      System.out.println("INIT END " + System.currentTimeMillis());
      System.out.println(
          "INIT OK "
              + c.transportInfo()
                  .lines()
                  .filter(l -> l.startsWith("versions: "))
                  .findFirst()
                  .orElse("(no versions line)"));
      return 0;
    } catch (ColibriException e) {
      System.out.println("INIT END " + System.currentTimeMillis());
      System.out.println("FAILED " + e.code() + " " + e.getMessage().replace('\n', ' '));
      return 3;
    }
  }

  private static int loop(UniqueId id, int rank, int nranks, Options options) {
    Communicator c = Communicator.init(id, rank, nranks, options);
    int count = 256 * 1024;
    ByteBuffer send = ByteBuffer.allocateDirect(count * 4).order(ByteOrder.nativeOrder());
    ByteBuffer recv = ByteBuffer.allocateDirect(count * 4).order(ByteOrder.nativeOrder());
    long iterations = 0;
    try {
      while (true) {
        c.allReduce(send, recv, count, DataType.FLOAT32, ReduceOp.SUM);
        if (iterations++ == 0) {
          System.out.println("READY");
          System.out.flush();
        }
      }
    } catch (ColibriException e) {
      System.out.println(
          "FAILED "
              + e.code()
              + " "
              + System.currentTimeMillis()
              + " after "
              + iterations
              + " iterations: "
              + e.getMessage().replace('\n', ' '));
      System.out.flush();
      c.close();
      System.out.println("CLOSED");
      return 3;
    }
  }

  private static int check(Communicator c) {
    int n = c.size();
    int me = c.rank();
    List<String> problems = new ArrayList<>();
    DataType[] types = {
      DataType.INT32,
      DataType.UINT8,
      DataType.FLOAT16,
      DataType.BFLOAT16,
      DataType.FLOAT32,
      DataType.FLOAT64
    };
    ByteBuffer sums = ByteBuffer.allocateDirect(8 * n).order(ByteOrder.nativeOrder());
    ByteBuffer mySum = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
    int calls = 0;
    for (Coll coll : Coll.values()) {
      for (DataType t : types) {
        ReduceOp[] ops =
            coll.reduces()
                ? new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX}
                : new ReduceOp[] {null};
        for (ReduceOp op : ops) {
          for (long count : new long[] {7, 60_001}) {
            Spec s = new Spec(coll, t, op, count, n, (int) (count % n));
            long seed = Seeds.forCase("process " + s);
            List<ByteBuffer> inputs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
              ByteBuffer in =
                  ByteBuffer.allocateDirect(Math.toIntExact(s.sendElems() * t.size()))
                      .order(ByteOrder.nativeOrder());
              Elements.fillRandom(
                  in, t, op, s.sendElems(), new SplittableRandom(Seeds.forRank(seed, r)));
              inputs.add(in);
            }
            GuardedBuffer out = new GuardedBuffer().reset(s.recvElems() * t.size());
            out.poison(GuardedBuffer.POISON);
            ByteBuffer send = inputs.get(me);
            switch (coll) {
              case ALL_REDUCE:
                c.allReduce(send, out.data(), count, t, op);
                break;
              case ALL_GATHER:
                c.allGather(send, out.data(), count, t);
                break;
              case REDUCE_SCATTER:
                c.reduceScatter(send, out.data(), count, t, op);
                break;
              default:
                c.broadcast(me == s.root() ? send : null, out.data(), count, t, s.root());
            }
            calls++;
            String guard = out.checkGuards(GuardedBuffer.POISON);
            if (guard != null) {
              problems.add(s + ": recv buffer overrun: " + guard);
            }
            problems.addAll(
                Expected.compute(s, inputs).check(me, out.data(), 5).stream()
                    .map(p -> s + " seed 0x" + Long.toHexString(seed) + ": " + p)
                    .toList());
            if (coll != Coll.REDUCE_SCATTER) {
              CRC32 crc = new CRC32();
              crc.update(out.data());
              mySum.putLong(0, crc.getValue());
              c.allGather(mySum, sums, 1, DataType.INT64);
              for (int r = 0; r < n; r++) {
                if (sums.getLong(r * 8) != crc.getValue()) {
                  problems.add(
                      s
                          + ": rank "
                          + r
                          + "'s output has CRC32 "
                          + sums.getLong(r * 8)
                          + ", rank "
                          + me
                          + "'s "
                          + crc.getValue()
                          + ": ranks got different bits");
                }
              }
            }
          }
        }
      }
    }
    if (!problems.isEmpty()) {
      System.err.println(
          "rank "
              + me
              + " of "
              + n
              + ": "
              + problems.size()
              + " problem(s) in "
              + calls
              + " collectives ("
              + c.transportInfo().replace('\n', ';')
              + "):");
      problems.stream().limit(20).forEach(p -> System.err.println("  " + p));
      return 1;
    }
    System.out.println(
        "rank "
            + me
            + " of "
            + n
            + ": "
            + calls
            + " collectives checked, transport "
            + c.transportInfo()
                .lines()
                .filter(l -> l.startsWith("transport"))
                .findFirst()
                .orElse("?"));
    return 0;
  }
}
