/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.bench.decode.SeededWeights.Matrix;
import org.junit.jupiter.api.Test;

/**
 * The CPU decoder against a reference written apart from it: the whole model (no shards), in
 * double precision, one sequence at a time, each formula spelled out.
 */
class HostDecoderTest {

  /** TP=1 without a communicator. */
  static final class Alone implements TpCollectives {
    @Override
    public int size() {
      return 1;
    }

    @Override
    public int rank() {
      return 0;
    }

    @Override
    public void allReduceSum(float[] x, int count) {}

    @Override
    public void allGather(float[] part, int count, float[] all) {
      System.arraycopy(part, 0, all, 0, count);
    }

    @Override
    public void close() {}
  }

  /** The reference: the whole model, in doubles, for one sequence. */
  static final class Dense {
    final ModelShape s;
    final SeededWeights w;
    final double[][][][] kc; // [layer][position][kv head][d]
    final double[][][][] vc;

    Dense(ModelShape s, SeededWeights w) {
      this.s = s;
      this.w = w;
      kc = new double[s.layers()][s.context()][s.kvHeads()][s.headDim()];
      vc = new double[s.layers()][s.context()][s.kvHeads()][s.headDim()];
    }

    double wt(Matrix m, int layer, int row, int col) {
      return w.value(m, layer, row, col, SeededWeights.columns(m, s), SeededWeights.scale(m, s));
    }

    double[] times(double[] in, Matrix m, int layer, int outWidth) {
      double[] y = new double[outWidth];
      for (int j = 0; j < outWidth; j++) {
        double acc = 0;
        for (int i = 0; i < in.length; i++) {
          acc += in[i] * wt(m, layer, i, j);
        }
        y[j] = acc;
      }
      return y;
    }

    static double[] norm(double[] a) {
      double ms = 0;
      for (double e : a) {
        ms += e * e / a.length;
      }
      double[] y = new double[a.length];
      for (int i = 0; i < a.length; i++) {
        y[i] = a[i] / Math.sqrt(ms + ModelShape.NORM_EPS);
      }
      return y;
    }

    void rotate(double[] a, int heads, int pos) {
      int d = s.headDim();
      for (int hh = 0; hh < heads; hh++) {
        for (int i = 0; i < d / 2; i++) {
          double th = pos / Math.pow(ModelShape.ROPE_THETA, 2.0 * i / d);
          double re = a[hh * d + 2 * i];
          double im = a[hh * d + 2 * i + 1];
          a[hh * d + 2 * i] = re * Math.cos(th) - im * Math.sin(th);
          a[hh * d + 2 * i + 1] = re * Math.sin(th) + im * Math.cos(th);
        }
      }
    }

    double[] logits(int token, int pos) {
      int d = s.headDim();
      double[] x = new double[s.hidden()];
      for (int i = 0; i < x.length; i++) {
        x[i] = wt(Matrix.EMBED, 0, token, i);
      }
      for (int l = 0; l < s.layers(); l++) {
        double[] hn = norm(x);
        double[] q = times(hn, Matrix.Q, l, s.qWidth());
        double[] k = times(hn, Matrix.K, l, s.kvWidth());
        double[] v = times(hn, Matrix.V, l, s.kvWidth());
        rotate(q, s.heads(), pos);
        rotate(k, s.kvHeads(), pos);
        for (int kh = 0; kh < s.kvHeads(); kh++) {
          for (int e = 0; e < d; e++) {
            kc[l][pos][kh][e] = k[kh * d + e];
            vc[l][pos][kh][e] = v[kh * d + e];
          }
        }
        double[] att = new double[s.qWidth()];
        for (int qh = 0; qh < s.heads(); qh++) {
          int kh = qh * s.kvHeads() / s.heads();
          double[] sc = new double[pos + 1];
          double z = 0;
          for (int p = 0; p <= pos; p++) {
            double dot = 0;
            for (int e = 0; e < d; e++) {
              dot += q[qh * d + e] * kc[l][p][kh][e];
            }
            sc[p] = Math.exp(dot / Math.sqrt(d));
            z += sc[p];
          }
          for (int p = 0; p <= pos; p++) {
            for (int e = 0; e < d; e++) {
              att[qh * d + e] += sc[p] / z * vc[l][p][kh][e];
            }
          }
        }
        double[] o = times(att, Matrix.O, l, s.hidden());
        for (int i = 0; i < x.length; i++) {
          x[i] += o[i];
        }
        hn = norm(x);
        double[] g = times(hn, Matrix.GATE, l, s.intermediate());
        double[] u = times(hn, Matrix.UP, l, s.intermediate());
        double[] m = new double[g.length];
        for (int i = 0; i < m.length; i++) {
          m[i] = g[i] / (1 + Math.exp(-g[i])) * u[i];
        }
        double[] dn = times(m, Matrix.DOWN, l, s.hidden());
        for (int i = 0; i < x.length; i++) {
          x[i] += dn[i];
        }
      }
      return times(norm(x), Matrix.HEAD, 0, s.vocab());
    }
  }

  @Test
  void stepsMatchTheDenseReference() {
    ModelShape s = new ModelShape(64, 8, 4, 96, 2, 200, 3, 8);
    SeededWeights w = new SeededWeights(99);
    HostDecoder dec = new HostDecoder(new Shard(s, 1, 0), w, new Alone());
    Dense[] ref = new Dense[s.batch()];
    for (int i = 0; i < ref.length; i++) {
      ref[i] = new Dense(s, w);
    }
    int[][] tokens = {{5, 17, 199}, {0, 3, 3}, {150, 2, 77}, {9, 9, 9}};
    float[] logits = new float[s.batch() * s.vocab()];
    double worst = 0;
    double spread = 0;
    for (int pos = 0; pos < tokens.length; pos++) {
      dec.step(tokens[pos], pos, logits);
      for (int i = 0; i < s.batch(); i++) {
        double[] want = ref[i].logits(tokens[pos][i], pos);
        for (int t = 0; t < s.vocab(); t++) {
          worst = Math.max(worst, Math.abs(want[t] - logits[i * s.vocab() + t]));
          spread = Math.max(spread, Math.abs(want[t]));
        }
      }
    }
    assertTrue(spread > 0.5, "logits of a random model are not all near 0: " + spread);
    assertTrue(worst < 1e-4, "largest difference from the reference: " + worst);
  }

  @Test
  void badTokensAndPositionsAreRefused() {
    ModelShape s = new ModelShape(64, 8, 4, 96, 1, 200, 2, 8);
    HostDecoder dec = new HostDecoder(new Shard(s, 1, 0), new SeededWeights(1), new Alone());
    float[] logits = new float[2 * 200];
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> dec.step(new int[] {0, 200}, 0, logits));
    assertTrue(
        e.getMessage().contains("token 200 is outside the vocabulary of 200"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> dec.step(new int[] {0, 1}, 8, logits));
    assertTrue(e.getMessage().contains("position 8 is outside"), e.getMessage());
    e =
        assertThrows(
            IllegalArgumentException.class,
            () -> new HostDecoder(new Shard(s, 2, 1), new SeededWeights(1), new Alone()));
    assertTrue(
        e.getMessage().contains("the communicator is rank 0 of 1, the shard rank 1 of 2"),
        e.getMessage());
  }

  @Test
  void argmaxTakesTheLowestIndexAmongEquals() {
    assertEquals(1, Generation.argmax(new float[] {0, 3, 3, 1}, 1, 4)[0]);
    int[] a = Generation.argmax(new float[] {-5, -1, -2, 7, 7, 0}, 2, 3);
    assertEquals(1, a[0]);
    assertEquals(0, a[1]);
  }
}
