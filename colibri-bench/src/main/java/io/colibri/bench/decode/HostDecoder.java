/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.bench.decode.SeededWeights.Matrix;

/**
 * One rank of a tensor-parallel Llama-shaped decoder in float32 on the CPU: the reference that
 * the GPU decoder is checked against, and the model code read in one place. Per layer: RMSNorm,
 * this rank's Q/K/V heads (column-parallel), the rotary embedding, attention over this rank's KV
 * cache, its part of O (row-parallel) and an all-reduce; RMSNorm, its part of gate and up, SiLU ·
 * up, its part of down and an all-reduce. Then the final norm, its part of the vocabulary head
 * and an all-gather of the logits. Every array is allocated once, in the constructor.
 *
 * <p>Matrices are row-major [inputs][outputs]; activations are [batch][width].
 */
public final class HostDecoder {

  private final ModelShape s;
  private final Shard shard;
  private final TpCollectives comm;
  private final int b;
  private final int h;
  private final int d;
  private final int nh;
  private final int nkv;
  private final int qw;
  private final int kvw;
  private final int iw;
  private final int vw;

  private final float[][] wq;
  private final float[][] wk;
  private final float[][] wv;
  private final float[][] wo;
  private final float[][] wgate;
  private final float[][] wup;
  private final float[][] wdown;
  private final float[] embed;
  private final float[] head;
  private final float[][] kcache; // [layer][batch][kv head][position][d]
  private final float[][] vcache;
  private final float[] cos;
  private final float[] sin;

  private final float[] x;
  private final float[] xn;
  private final float[] q;
  private final float[] k;
  private final float[] v;
  private final float[] att;
  private final float[] scores;
  private final float[] out;
  private final float[] gate;
  private final float[] up;
  private final float[] part;
  private final float[] logits;

  /**
   * Draws this rank's shard of the model and allocates every buffer.
   *
   * @param shard the model's shape, the group's size and this rank
   * @param weights the model's weights
   * @param comm the group's collectives (its rank and size those of {@code shard})
   */
  public HostDecoder(Shard shard, SeededWeights weights, TpCollectives comm) {
    shard.checkGroup(comm.size(), comm.rank());
    this.s = shard.shape();
    this.shard = shard;
    this.comm = comm;
    b = s.batch();
    h = s.hidden();
    d = s.headDim();
    nh = shard.heads().size();
    nkv = shard.kvHeads().size();
    qw = shard.qColumns().size();
    kvw = shard.kvColumns().size();
    iw = shard.mlpColumns().size();
    vw = shard.vocabColumns().size();
    int layers = s.layers();
    wq = new float[layers][];
    wk = new float[layers][];
    wv = new float[layers][];
    wo = new float[layers][];
    wgate = new float[layers][];
    wup = new float[layers][];
    wdown = new float[layers][];
    kcache = new float[layers][];
    vcache = new float[layers][];
    for (int l = 0; l < layers; l++) {
      wq[l] = draw(weights, Matrix.Q, l);
      wk[l] = draw(weights, Matrix.K, l);
      wv[l] = draw(weights, Matrix.V, l);
      wo[l] = draw(weights, Matrix.O, l);
      wgate[l] = draw(weights, Matrix.GATE, l);
      wup[l] = draw(weights, Matrix.UP, l);
      wdown[l] = draw(weights, Matrix.DOWN, l);
      kcache[l] = new float[b * nkv * s.context() * d];
      vcache[l] = new float[b * nkv * s.context() * d];
    }
    embed = draw(weights, Matrix.EMBED, 0);
    head = draw(weights, Matrix.HEAD, 0);
    cos = new float[s.context() * d / 2];
    sin = new float[s.context() * d / 2];
    for (int p = 0; p < s.context(); p++) {
      for (int i = 0; i < d / 2; i++) {
        double angle = p * Math.pow(ModelShape.ROPE_THETA, -2.0 * i / d);
        cos[p * d / 2 + i] = (float) Math.cos(angle);
        sin[p * d / 2 + i] = (float) Math.sin(angle);
      }
    }
    x = new float[b * h];
    xn = new float[b * h];
    q = new float[b * qw];
    k = new float[b * kvw];
    v = new float[b * kvw];
    att = new float[b * qw];
    scores = new float[s.context()];
    out = new float[b * h];
    gate = new float[b * iw];
    up = new float[b * iw];
    part = new float[b * vw];
    logits = new float[shard.tp() * b * vw];
  }

  /** This rank's block of a matrix (its rows and columns: {@link Shard#rows}, {@link Shard#columns}). */
  private float[] draw(SeededWeights w, Matrix m, int layer) {
    float[] a = new float[shard.rows(m).size() * shard.columns(m).size()];
    w.fill(a, m, layer, s, shard.rows(m), shard.columns(m));
    return a;
  }

  /** @return the shard this rank holds */
  public Shard shard() {
    return shard;
  }

  /**
   * One decode step: every sequence's token {@code tokens[i]} at position {@code pos} goes
   * through the model, its keys and values into the cache.
   *
   * @param tokens one token per sequence of the batch
   * @param pos the position, 0 to context - 1 (the cache holds positions 0..pos afterwards)
   * @param logitsOut batch × vocab, the whole vocabulary's logits of every sequence
   */
  public void step(int[] tokens, int pos, float[] logitsOut) {
    if (pos < 0 || pos >= s.context()) {
      throw new IllegalArgumentException(
          "position " + pos + " is outside the KV cache's " + s.context() + " positions");
    }
    for (int i = 0; i < b; i++) {
      int t = tokens[i];
      if (t < 0 || t >= s.vocab()) {
        throw new IllegalArgumentException(
            "token " + t + " is outside the vocabulary of " + s.vocab());
      }
      System.arraycopy(embed, t * h, x, i * h, h);
    }
    for (int l = 0; l < s.layers(); l++) {
      // Attention: this rank's heads, then its part of O, summed over the ranks.
      rmsNorm(x, xn, b, h);
      matmul(xn, wq[l], q, b, h, qw);
      matmul(xn, wk[l], k, b, h, kvw);
      matmul(xn, wv[l], v, b, h, kvw);
      rope(q, nh, pos);
      rope(k, nkv, pos);
      cache(l, pos);
      attention(l, pos);
      matmul(att, wo[l], out, b, qw, h);
      comm.allReduceSum(out, b * h);
      add(x, out);
      // MLP: this rank's part of the intermediate, then its part of down, summed.
      rmsNorm(x, xn, b, h);
      matmul(xn, wgate[l], gate, b, h, iw);
      matmul(xn, wup[l], up, b, h, iw);
      for (int i = 0; i < gate.length; i++) {
        float g = gate[i];
        gate[i] = g / (1f + (float) Math.exp(-g)) * up[i];
      }
      matmul(gate, wdown[l], out, b, iw, h);
      comm.allReduceSum(out, b * h);
      add(x, out);
    }
    rmsNorm(x, xn, b, h);
    matmul(xn, head, part, b, h, vw);
    comm.allGather(part, b * vw, logits);
    shard.vocabularyOrder(logits, logitsOut);
  }

  private void cache(int l, int pos) {
    int c = s.context();
    for (int i = 0; i < b; i++) {
      for (int kh = 0; kh < nkv; kh++) {
        int at = ((i * nkv + kh) * c + pos) * d;
        System.arraycopy(k, i * kvw + kh * d, kcache[l], at, d);
        System.arraycopy(v, i * kvw + kh * d, vcache[l], at, d);
      }
    }
  }

  private void attention(int l, int pos) {
    int c = s.context();
    int group = nh / nkv;
    float scale = (float) (1.0 / Math.sqrt(d));
    for (int i = 0; i < b; i++) {
      for (int qh = 0; qh < nh; qh++) {
        int kh = qh / group;
        int qo = i * qw + qh * d;
        int base = (i * nkv + kh) * c * d;
        float max = Float.NEGATIVE_INFINITY;
        for (int p = 0; p <= pos; p++) {
          float dot = 0;
          for (int e = 0; e < d; e++) {
            dot += q[qo + e] * kcache[l][base + p * d + e];
          }
          scores[p] = dot * scale;
          max = Math.max(max, scores[p]);
        }
        float sum = 0;
        for (int p = 0; p <= pos; p++) {
          scores[p] = (float) Math.exp(scores[p] - max);
          sum += scores[p];
        }
        for (int e = 0; e < d; e++) {
          att[qo + e] = 0;
        }
        for (int p = 0; p <= pos; p++) {
          float wgt = scores[p] / sum;
          for (int e = 0; e < d; e++) {
            att[qo + e] += wgt * vcache[l][base + p * d + e];
          }
        }
      }
    }
  }

  /** Rotates each pair (2i, 2i + 1) of every head by position × theta^(-2i / d). */
  private void rope(float[] a, int heads, int pos) {
    int half = d / 2;
    int width = heads * d;
    for (int i = 0; i < b; i++) {
      for (int hh = 0; hh < heads; hh++) {
        int o = i * width + hh * d;
        for (int e = 0; e < half; e++) {
          float c = cos[pos * half + e];
          float sn = sin[pos * half + e];
          float x1 = a[o + 2 * e];
          float x2 = a[o + 2 * e + 1];
          a[o + 2 * e] = x1 * c - x2 * sn;
          a[o + 2 * e + 1] = x1 * sn + x2 * c;
        }
      }
    }
  }

  /** RMSNorm with weights 1: each row divided by the root of its mean square (plus eps). */
  static void rmsNorm(float[] in, float[] outArr, int rows, int width) {
    for (int r = 0; r < rows; r++) {
      double ss = 0;
      for (int c = 0; c < width; c++) {
        float e = in[r * width + c];
        ss += e * e;
      }
      float inv = (float) (1.0 / Math.sqrt(ss / width + ModelShape.NORM_EPS));
      for (int c = 0; c < width; c++) {
        outArr[r * width + c] = in[r * width + c] * inv;
      }
    }
  }

  /** y[rows][n] = a[rows][k] · w[k][n]. */
  static void matmul(float[] a, float[] w, float[] y, int rows, int k, int n) {
    for (int r = 0; r < rows; r++) {
      int yo = r * n;
      for (int j = 0; j < n; j++) {
        y[yo + j] = 0;
      }
      for (int i = 0; i < k; i++) {
        float ai = a[r * k + i];
        int wo = i * n;
        for (int j = 0; j < n; j++) {
          y[yo + j] += ai * w[wo + j];
        }
      }
    }
  }

  private static void add(float[] acc, float[] a) {
    for (int i = 0; i < acc.length; i++) {
      acc[i] += a[i];
    }
  }
}
