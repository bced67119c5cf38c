/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.it;

import io.colibri.DataType;
import io.colibri.ReduceOp;
import io.colibri.it.Spec.Coll;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The reference result of a collective, computed in Java from every rank's input, independently of
 * Colibri, and the element-by-element check of an output against it.
 *
 * <ul>
 *   <li>Integers: exact, in long arithmetic wrapped to the type's width; AVG is the wrapped sum,
 *       read as signed or unsigned, divided by nranks truncating toward zero.
 *   <li>MIN/MAX: exact (the bits of the winning input; NaN if any input is NaN).
 *   <li>Float SUM/AVG/PROD: the exact result (double-double), and a bound from the accuracy
 *       contract: each of the nranks-1 pairwise steps of the ring rounds once to the element type
 *       (halves: after a float32 operation, hence u + 2^-23 per step; the last step is the
 *       rounding of the output), so |got - exact| <= (nranks-1) * u_step * sum|x_i|; AVG:
 *       that divided by nranks plus the rounding of the division, u_step * |exact|; PROD:
 *       relative, (nranks-1) * u_step * |exact|; times (1 + nranks * u_step) for second-order
 *       terms, plus nranks subnormal quanta. The direct path (float32 accumulation, one final
 *       rounding) is inside the same bound for nranks >= 2. With one rank the output must equal
 *       the input bit for bit.
 * </ul>
 */
final class Expected {
  private final Spec spec;
  private final List<ByteBuffer> inputs;
  private final int n;
  private final DataType t;
  // Reducing collectives: per element of the full reduced vector.
  private long[] bits; // integers, MIN/MAX, one rank
  private boolean[] nan; // floats: the expected value is NaN
  private double[] hi;
  private double[] lo;
  private double[] bound;

  private Expected(Spec spec, List<ByteBuffer> inputs) {
    this.spec = spec;
    this.inputs = inputs;
    this.n = spec.nranks();
    this.t = spec.type();
  }

  /** inputs.get(r): rank r's input, {@code spec.sendElems()} elements from position 0. */
  static Expected compute(Spec spec, List<ByteBuffer> inputs) {
    Expected e = new Expected(spec, inputs);
    if (spec.coll().reduces()) {
      e.reduce();
    }
    return e;
  }

  private boolean exactBits() {
    return !Elements.isFloat(t) || n == 1 || spec.op() == ReduceOp.MIN || spec.op() == ReduceOp.MAX;
  }

  private void reduce() {
    int len = Math.toIntExact(spec.sendElems());
    ReduceOp op = spec.op();
    if (exactBits()) {
      bits = new long[len];
      if (Elements.isFloat(t)) {
        nan = new boolean[len];
      }
      for (int i = 0; i < len; i++) {
        if (Elements.isFloat(t)) {
          reduceFloatMinMax(i, op);
        } else {
          bits[i] = reduceInt(i, op);
        }
      }
      return;
    }
    hi = new double[len];
    lo = new double[len];
    bound = new double[len];
    nan = new boolean[len];
    double u = Elements.unitRoundoff(t);
    boolean half = t == DataType.FLOAT16 || t == DataType.BFLOAT16;
    double uStep = u + (half ? Math.scalb(1.0, -23) : 0);
    double sub = Elements.minSubnormal(t);
    for (int i = 0; i < len; i++) {
      double h;
      double l = 0;
      double abs = 0;
      double naive;
      if (op == ReduceOp.PROD) {
        h = 1;
        naive = 1;
        for (int r = 0; r < n; r++) {
          double x = Elements.floatValue(t, Elements.bits(inputs.get(r), t, i));
          naive *= x;
          double p = h * x;
          double err = Math.fma(h, x, -p) + l * x;
          h = p + err;
          l = err - (h - p);
        }
      } else {
        h = 0;
        naive = 0;
        for (int r = 0; r < n; r++) {
          double x = Elements.floatValue(t, Elements.bits(inputs.get(r), t, i));
          naive += x;
          abs += Math.abs(x);
          double s = h + x;
          double bb = s - h;
          double err = (h - (s - bb)) + (x - bb) + l;
          h = s + err;
          l = err - (h - s);
        }
      }
      if (!Double.isFinite(naive)) {
        // Special values: NaN if any input is NaN or infinities of both signs, else the infinity.
        nan[i] = Double.isNaN(naive);
        hi[i] = naive;
        continue;
      }
      // Second-order terms: partial results are themselves rounded, (1 + u)^k - 1 <= k u (1 + k u).
      double grow = 1 + n * uStep;
      double b;
      if (op == ReduceOp.AVG) {
        double q = h / n;
        double rem = Math.fma(-q, n, h);
        l = (rem + l) / n;
        h = q;
        // n-1 rounded additions (the last in the accumulation type), then one rounded division.
        b = ((n - 1) * uStep * abs / n + uStep * Math.abs(h)) * grow + n * sub;
      } else if (op == ReduceOp.PROD) {
        b = (n - 1) * uStep * Math.abs(h) * grow + n * sub;
      } else {
        b = (n - 1) * uStep * abs * grow + n * sub;
      }
      hi[i] = h;
      lo[i] = l;
      bound[i] = b;
    }
  }

  private long reduceInt(int i, ReduceOp op) {
    long acc = Elements.intValue(t, Elements.bits(inputs.get(0), t, i));
    for (int r = 1; r < n; r++) {
      long x = Elements.intValue(t, Elements.bits(inputs.get(r), t, i));
      switch (op) {
        case SUM:
        case AVG:
          acc += x;
          break;
        case PROD:
          acc *= x;
          break;
        case MIN:
          acc = (t == DataType.UINT64 ? Long.compareUnsigned(x, acc) < 0 : x < acc) ? x : acc;
          break;
        default:
          acc = (t == DataType.UINT64 ? Long.compareUnsigned(x, acc) > 0 : x > acc) ? x : acc;
          break;
      }
    }
    if (op == ReduceOp.AVG) {
      long wrapped = Elements.intValue(t, Elements.wrap(t, acc));
      acc = t == DataType.UINT64 ? Long.divideUnsigned(wrapped, n) : wrapped / n;
    }
    return Elements.wrap(t, acc);
  }

  private void reduceFloatMinMax(int i, ReduceOp op) {
    long best = Elements.bits(inputs.get(0), t, i);
    double bv = Elements.floatValue(t, best);
    boolean anyNan = Double.isNaN(bv);
    for (int r = 1; r < n; r++) {
      long b = Elements.bits(inputs.get(r), t, i);
      double v = Elements.floatValue(t, b);
      anyNan |= Double.isNaN(v);
      if (op == ReduceOp.MIN ? v < bv : op == ReduceOp.MAX ? v > bv : false) {
        best = b;
        bv = v;
      }
    }
    bits[i] = best;
    nan[i] = anyNan && n > 1;
  }

  /**
   * Checks rank {@code rank}'s output (from position 0). Returns at most {@code max} problems, each
   * naming the element, what was expected, what came, and the inputs.
   */
  List<String> check(int rank, ByteBuffer out, int max) {
    List<String> problems = new ArrayList<>();
    long count = spec.count();
    switch (spec.coll()) {
      case ALL_GATHER:
        for (int p = 0; p < n && problems.size() < max; p++) {
          compareBlock(
              rank,
              out,
              p * count,
              inputs.get(p),
              0,
              count,
              "rank " + p + "'s input",
              problems,
              max);
        }
        break;
      case BROADCAST:
        compareBlock(
            rank,
            out,
            0,
            inputs.get(spec.root()),
            0,
            count,
            "root " + spec.root() + "'s input",
            problems,
            max);
        break;
      default:
        long base = spec.coll() == Coll.REDUCE_SCATTER ? rank * count : 0;
        for (long i = 0; i < count && problems.size() < max; i++) {
          String p = checkReduced(Math.toIntExact(base + i), Elements.bits(out, t, i));
          if (p != null) {
            problems.add(
                "rank "
                    + rank
                    + " element "
                    + i
                    + (base != 0 ? " (element " + (base + i) + " of the reduced vector)" : "")
                    + ": "
                    + p
                    + "; inputs "
                    + inputsAt(base + i));
          }
        }
    }
    return problems;
  }

  private void compareBlock(
      int rank,
      ByteBuffer out,
      long outElem,
      ByteBuffer src,
      long srcElem,
      long count,
      String what,
      List<String> problems,
      int max) {
    int esz = t.size();
    ByteBuffer a = out.slice(Math.toIntExact(outElem * esz), Math.toIntExact(count * esz));
    ByteBuffer b = src.slice(Math.toIntExact(srcElem * esz), Math.toIntExact(count * esz));
    if (a.mismatch(b) < 0) {
      return;
    }
    a.order(out.order());
    b.order(src.order());
    for (long i = 0; i < count && problems.size() < max; i++) {
      long got = Elements.bits(a, t, i);
      long want = Elements.bits(b, t, i);
      if (got != want) {
        problems.add(
            "rank "
                + rank
                + " element "
                + (outElem + i)
                + ": got "
                + Elements.show(t, got)
                + ", expected "
                + Elements.show(t, want)
                + " (element "
                + (srcElem + i)
                + " of "
                + what
                + ")");
      }
    }
  }

  private String checkReduced(int i, long got) {
    if (bits != null) {
      if (nan != null && nan[i]) {
        return Double.isNaN(Elements.floatValue(t, got))
            ? null
            : "got " + Elements.show(t, got) + ", expected NaN";
      }
      return got == bits[i]
          ? null
          : "got " + Elements.show(t, got) + ", expected " + Elements.show(t, bits[i]);
    }
    double g = Elements.floatValue(t, got);
    if (nan[i]) {
      return Double.isNaN(g) ? null : "got " + Elements.show(t, got) + ", expected NaN";
    }
    if (Double.isInfinite(hi[i])) {
      return g == hi[i] ? null : "got " + Elements.show(t, got) + ", expected " + hi[i];
    }
    if (!Double.isFinite(g)) {
      return "got " + Elements.show(t, got) + ", expected the finite " + hi[i];
    }
    double err = Math.abs((g - hi[i]) - lo[i]);
    if (err <= bound[i]) {
      return null;
    }
    return "got "
        + Elements.show(t, got)
        + ", exact "
        + (hi[i] + lo[i])
        + ", error "
        + err
        + " exceeds the contract bound "
        + bound[i];
  }

  private String inputsAt(long i) {
    StringBuilder sb = new StringBuilder("[");
    for (int r = 0; r < n; r++) {
      if (r > 0) {
        sb.append(", ");
      }
      if (r >= 8 && n > 9) {
        sb.append("...");
        break;
      }
      sb.append("r")
          .append(r)
          .append('=')
          .append(Elements.show(t, Elements.bits(inputs.get(r), t, i)));
    }
    return sb.append(']').toString();
  }
}
