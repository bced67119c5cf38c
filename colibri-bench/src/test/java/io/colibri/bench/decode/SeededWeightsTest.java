/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.bench.decode.SeededWeights.Matrix;
import org.junit.jupiter.api.Test;

/** Weights from a seed: every TP size holds the same model, with the intended spread. */
class SeededWeightsTest {

  private static final ModelShape S = DecodeCommand.SMALL;

  private static float[] block(
      SeededWeights w, Matrix m, int layer, int r0, int r1, int c0, int c1) {
    float[] a = new float[(r1 - r0) * (c1 - c0)];
    w.fill(a, m, layer, S, new Shard.Range(r0, r1), new Shard.Range(c0, c1));
    return a;
  }

  @Test
  void aRanksShardIsTheSliceOfTheWholeMatrix() {
    SeededWeights w = new SeededWeights(7);
    int rows = S.hidden();
    int cols = S.intermediate();
    float[] whole = block(w, Matrix.GATE, 1, 0, rows, 0, cols);
    for (int tp : new int[] {2, 4, 8}) {
      for (int r = 0; r < tp; r++) {
        Shard.Range c = new Shard(S, tp, r).mlpColumns();
        float[] shard = block(w, Matrix.GATE, 1, 0, rows, c.start(), c.end());
        for (int i = 0; i < rows; i++) {
          for (int j = 0; j < c.size(); j++) {
            assertEquals(whole[i * cols + c.start() + j], shard[i * c.size() + j]);
          }
        }
        // Row-parallel down: rows of the whole matrix.
        float[] down = block(w, Matrix.DOWN, 1, c.start(), c.end(), 0, S.hidden());
        float[] wholeDown = block(w, Matrix.DOWN, 1, 0, S.intermediate(), 0, S.hidden());
        for (int i = 0; i < down.length; i++) {
          assertEquals(wholeDown[c.start() * S.hidden() + i], down[i]);
        }
      }
    }
  }

  @Test
  void elementsHaveMeanZeroAndTheMatrixsScale() {
    SeededWeights w = new SeededWeights(42);
    float[] a = block(w, Matrix.Q, 0, 0, S.hidden(), 0, S.qWidth());
    double sum = 0;
    double sq = 0;
    for (float v : a) {
      sum += v;
      sq += v * v;
    }
    double mean = sum / a.length;
    double sd = Math.sqrt(sq / a.length - mean * mean);
    double scale = SeededWeights.scale(Matrix.Q, S);
    assertEquals(1.0 / 16, scale, 1e-12); // 1 / sqrt(256)
    assertTrue(Math.abs(mean) < 0.01 * scale, "mean " + mean);
    assertEquals(scale, sd, 0.01 * scale);
    for (float v : a) {
      assertTrue(Math.abs(v) <= Math.sqrt(3) * scale + 1e-7, "uniform within sqrt(3) sd: " + v);
    }
  }

  @Test
  void theSeedTheMatrixAndTheLayerEachChangeTheValues() {
    float[] a = block(new SeededWeights(1), Matrix.K, 0, 0, 4, 0, 64);
    assertArrayEquals(a, block(new SeededWeights(1), Matrix.K, 0, 0, 4, 0, 64));
    assertNotEquals(a[0], block(new SeededWeights(2), Matrix.K, 0, 0, 4, 0, 64)[0]);
    assertNotEquals(a[0], block(new SeededWeights(1), Matrix.V, 0, 0, 4, 0, 64)[0]);
    assertNotEquals(a[0], block(new SeededWeights(1), Matrix.K, 1, 0, 4, 0, 64)[0]);
    // Neighbouring elements are not correlated in any obvious way.
    int same = 0;
    for (int i = 1; i < a.length; i++) {
      same += Math.signum(a[i]) == Math.signum(a[i - 1]) ? 1 : 0;
    }
    assertTrue(same > a.length / 2 - 40 && same < a.length / 2 + 40, "sign runs: " + same);
  }
}
