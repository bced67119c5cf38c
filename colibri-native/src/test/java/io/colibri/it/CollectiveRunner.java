/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import io.colibri.Algorithm;
import io.colibri.Communicator;
import io.colibri.it.Spec.Coll;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Runs one {@link Spec} on a {@link RankGroup} and checks it element by element against
 * {@link Expected}:
 * <ol>
 *   <li>every rank generates its random input (seeded from the case seed and its rank), poisons
 *       its output buffer (0xA5, guards included) and makes the call;
 *   <li>the guards around every output and input must still hold their poison; an out-of-place
 *       input must be unchanged;
 *   <li>with {@code twice}, the call is repeated with the output poisoned with 0x5A and must give
 *       the same bits (determinism; an element left unwritten also shows up here);
 *   <li>each rank's output is compared with the reference, and for allReduce, allGather and
 *       broadcast every rank's output must be bitwise identical to rank 0's.
 * </ol>
 * A failure says the call, the options, the variant, the seed and the first problems found.
 */
final class CollectiveRunner {
  static final int MAX_PROBLEMS = 12;

  enum Variant {
    /** ByteBuffers, separate send and recv. */
    OUT_OF_PLACE,
    /** ByteBuffers, in place as the Communicator javadoc defines it. */
    IN_PLACE,
    /** Raw addresses, separate send and recv. */
    RAW,
    /** Raw addresses, in place. */
    RAW_IN_PLACE;

    boolean inPlace() {
      return this == IN_PLACE || this == RAW_IN_PLACE;
    }

    boolean raw() {
      return this == RAW || this == RAW_IN_PLACE;
    }
  }

  /** What each rank saw, for the caller's own assertions. */
  record Outcome(List<Algorithm> algorithms) {}

  private CollectiveRunner() {}

  /** Changes a rank's generated input before the call (special values). */
  @FunctionalInterface
  interface InputHook {
    void apply(int rank, java.nio.ByteBuffer input);
  }

  static Outcome run(RankGroup g, Spec s, long seed, Variant v, boolean twice, String context) {
    return run(g, s, seed, v, twice, context, null);
  }

  static Outcome run(
      RankGroup g, Spec s, long seed, Variant v, boolean twice, String context, InputHook hook) {
    final int esz = s.type().size();
    final long sendBytes = s.sendElems() * esz;
    final long recvBytes = s.recvElems() * esz;
    String header =
        s
            + " ["
            + v
            + (context.isEmpty() ? "" : ", " + context)
            + "], seed 0x"
            + Long.toHexString(seed)
            + " (-D"
            + Seeds.PROPERTY
            + "=0x"
            + Long.toHexString(seed)
            + " reruns it)";

    List<List<String>> perRank =
        g.run(
            header,
            r -> {
              List<String> problems = new ArrayList<>();
              r.input.reset(sendBytes).poison(GuardedBuffer.POISON);
              SplittableRandom rnd = new SplittableRandom(Seeds.forRank(seed, r.rank));
              Elements.fillRandom(r.input.data(), s.type(), s.op(), s.sendElems(), rnd);
              if (hook != null) {
                hook.apply(r.rank, r.input.data());
              }
              r.send.reset(sendBytes).poison(GuardedBuffer.POISON);
              r.recv.reset(recvBytes).poison(GuardedBuffer.POISON);
              call(r, s, v, true);
              r.state.put("algorithm", r.comm.lastAlgorithm());
              r.state.put(
                  "out",
                  v.inPlace() && s.coll() == Coll.REDUCE_SCATTER
                      ? r.recv.slice((long) r.rank * s.count() * esz, s.count() * esz)
                      : r.recv.data());
              checkGuards(r, v, GuardedBuffer.POISON, problems);
              if (!v.inPlace() && r.send.data().mismatch(r.input.data()) >= 0) {
                problems.add(
                    "rank "
                        + r.rank
                        + ": the send buffer was modified (first differing byte "
                        + r.send.data().mismatch(r.input.data())
                        + ")");
              }
              if (twice && !v.inPlace()) {
                r.first.reset(recvBytes);
                r.first.data().put(r.recv.data());
                r.recv.poison(GuardedBuffer.POISON2);
                call(r, s, v, false);
                checkGuards(r, v, GuardedBuffer.POISON2, problems);
                long m = r.recv.data().mismatch(r.first.data());
                if (m >= 0) {
                  long e = m / esz;
                  problems.add(
                      "rank "
                          + r.rank
                          + ": not deterministic: the same call gave different bits"
                          + " the second time at element "
                          + e
                          + ": first "
                          + Elements.show(s.type(), Elements.bits(r.first.data(), s.type(), e))
                          + ", then "
                          + Elements.show(s.type(), Elements.bits(r.recv.data(), s.type(), e))
                          + " (the second call's output was poisoned with 0x5a: an element not"
                          + " written shows up as 0x5a bytes)");
                }
              }
              return problems;
            });

    List<ByteBuffer> inputs = new ArrayList<>();
    for (int r = 0; r < g.size; r++) {
      inputs.add(g.rank(r).input.data());
    }
    Expected exp = Expected.compute(s, inputs);
    List<String> problems = new ArrayList<>();
    perRank.forEach(problems::addAll);
    boolean sameEverywhere = s.coll() != Coll.REDUCE_SCATTER;
    ByteBuffer out0 = (ByteBuffer) g.rank(0).state.get("out");
    problems.addAll(exp.check(0, out0, MAX_PROBLEMS));
    for (int r = 1; r < g.size && problems.size() < MAX_PROBLEMS; r++) {
      ByteBuffer out = (ByteBuffer) g.rank(r).state.get("out");
      if (sameEverywhere) {
        long m = out.mismatch(out0);
        if (m >= 0) {
          long e = m / esz;
          problems.add(
              "rank "
                  + r
                  + "'s output differs from rank 0's at element "
                  + e
                  + ": "
                  + Elements.show(s.type(), Elements.bits(out, s.type(), e))
                  + " vs "
                  + Elements.show(s.type(), Elements.bits(out0, s.type(), e))
                  + " (every rank must get the same bits)");
          problems.addAll(exp.check(r, out, MAX_PROBLEMS - problems.size()));
        }
      } else {
        problems.addAll(exp.check(r, out, MAX_PROBLEMS - problems.size()));
      }
    }
    if (!problems.isEmpty()) {
      StringBuilder sb =
          new StringBuilder(header)
              .append(": ")
              .append(problems.size() >= MAX_PROBLEMS ? "at least " : "")
              .append(problems.size())
              .append(" problem(s):");
      for (String p : problems.subList(0, Math.min(problems.size(), MAX_PROBLEMS))) {
        sb.append("\n  ").append(p);
      }
      throw new AssertionError(sb.toString());
    }
    List<Algorithm> algos = new ArrayList<>();
    for (int r = 0; r < g.size; r++) {
      algos.add((Algorithm) g.rank(r).state.get("algorithm"));
    }
    return new Outcome(algos);
  }

  private static void checkGuards(RankGroup.Rank r, Variant v, byte poison, List<String> problems) {
    String recvGuard = r.recv.checkGuards(poison);
    if (recvGuard != null) {
      problems.add("rank " + r.rank + ": recv buffer overrun: " + recvGuard);
    }
    if (!v.inPlace()) {
      String sendGuard = r.send.checkGuards(GuardedBuffer.POISON);
      if (sendGuard != null) {
        problems.add("rank " + r.rank + ": send buffer overrun: " + sendGuard);
      }
    }
  }

  /**
   * Sets up the buffers for the variant and makes the call. {@code setup}: copy the input into
   * place first (the second, out-of-place call reuses the send buffer as it is).
   */
  private static void call(RankGroup.Rank r, Spec s, Variant v, boolean setup) {
    Communicator c = r.comm;
    int esz = s.type().size();
    long count = s.count();
    int me = r.rank;
    boolean isRoot = me == s.root();
    if (!v.inPlace()) {
      if (setup) {
        r.send.data().put(r.input.data());
      }
      ByteBuffer send = r.send.data();
      ByteBuffer recv = r.recv.data();
      if (v.raw()) {
        long sa = r.send.address();
        long ra = r.recv.address();
        switch (s.coll()) {
          case ALL_REDUCE:
            c.allReduce(sa, ra, count, s.type(), s.op(), 0L);
            break;
          case ALL_GATHER:
            c.allGather(sa, ra, count, s.type(), 0L);
            break;
          case REDUCE_SCATTER:
            c.reduceScatter(sa, ra, count, s.type(), s.op(), 0L);
            break;
          default:
            c.broadcast(isRoot ? sa : 0L, ra, count, s.type(), s.root(), 0L);
            break;
        }
      } else {
        switch (s.coll()) {
          case ALL_REDUCE:
            c.allReduce(send, recv, count, s.type(), s.op());
            break;
          case ALL_GATHER:
            c.allGather(send, recv, count, s.type());
            break;
          case REDUCE_SCATTER:
            c.reduceScatter(send, recv, count, s.type(), s.op());
            break;
          default:
            c.broadcast(isRoot ? send : null, recv, count, s.type(), s.root());
            break;
        }
      }
      return;
    }
    // In place: the input goes where the javadoc says, and the output buffer (r.recv) is also
    // the input buffer. r.send is not used.
    r.send.reset(0).poison(GuardedBuffer.POISON);
    switch (s.coll()) {
      case ALL_REDUCE:
      case BROADCAST:
        r.recv.data().put(r.input.data());
        break;
      case ALL_GATHER:
        r.recv.slice((long) me * count * esz, count * esz).put(r.input.data());
        break;
      default:
        // reduceScatter: the input is the whole buffer; the output is its slice at rank * count.
        r.recv.reset(s.sendElems() * esz).poison(GuardedBuffer.POISON);
        r.recv.data().put(r.input.data());
        break;
    }
    ByteBuffer buf = r.recv.data();
    long addr = v.raw() ? r.recv.address() : 0;
    switch (s.coll()) {
      case ALL_REDUCE:
        if (v.raw()) {
          c.allReduce(addr, addr, count, s.type(), s.op(), 0L);
        } else {
          c.allReduce(buf, buf, count, s.type(), s.op());
        }
        break;
      case BROADCAST:
        if (v.raw()) {
          c.broadcast(addr, addr, count, s.type(), s.root(), 0L);
        } else {
          c.broadcast(buf, buf, count, s.type(), s.root());
        }
        break;
      case ALL_GATHER:
        if (v.raw()) {
          c.allGather(addr + (long) me * count * esz, addr, count, s.type(), 0L);
        } else {
          c.allGather(r.recv.slice((long) me * count * esz, count * esz), buf, count, s.type());
        }
        break;
      default:
        if (v.raw()) {
          c.reduceScatter(addr, addr + (long) me * count * esz, count, s.type(), s.op(), 0L);
        } else {
          c.reduceScatter(
              buf, r.recv.slice((long) me * count * esz, count * esz), count, s.type(), s.op());
        }
        break;
    }
  }
}
