/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The decoder's shapes, its split over ranks and its memory figures. */
class ModelShapeTest {

  @Test
  void parameterCountMatchesAPublishedModel() {
    // Llama-2-7B: hidden 4096, 32 heads, 32 KV heads, intermediate 11008, 32 layers, vocab 32000;
    // published with 6 738 415 616 parameters (embedding and head untied).
    ModelShape llama2 = new ModelShape(4096, 32, 32, 11008, 32, 32000, 1, 4096);
    assertEquals(6_738_415_616L, llama2.rankParams(1));
  }

  @Test
  void kvCacheBytesPerTokenFollowTheFormula() {
    ModelShape s = ModelShape.llama8b(32);
    // Llama-3-8B in bfloat16: 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 128 KiB per token.
    assertEquals(128 * 1024, s.kvBytesPerToken(1, 2));
    assertEquals(64 * 1024, s.kvBytesPerToken(2, 2));
    assertEquals(16 * 1024, s.kvBytesPerToken(8, 2));
    assertEquals(256 * 1024, s.kvBytesPerToken(1, 4));
  }

  @Test
  void aShapeThatDoesNotSplitNamesEveryProblem() {
    List<String> p = ModelShape.llama8b(4).problems(3);
    String all = String.join("\n", p);
    assertTrue(all.contains("--kv-heads 8 is not a multiple of --tp 3"), all);
    assertTrue(all.contains("--heads 32 is not a multiple of --tp 3"), all);
    assertTrue(all.contains("--intermediate 14336 is not a multiple of --tp 3"), all);
    assertTrue(all.contains("--vocab 32000 is not a multiple of --tp 3"), all);
    assertEquals(4, p.size(), all);
    for (int tp : new int[] {1, 2, 4, 8}) {
      assertEquals(List.of(), ModelShape.llama8b(4).problems(tp));
      assertEquals(List.of(), DecodeCommand.SMALL.problems(tp));
    }
    // 16 KV heads and 32 query heads over 16 ranks split; 8 KV heads do not.
    assertTrue(String.join("", ModelShape.llama8b(1).problems(16)).contains("--kv-heads 8"));
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> new ModelShape(100, 3, 2, 10, 1, 10, 1, 4).check(1));
    assertTrue(
        e.getMessage().contains("--hidden 100 is not a multiple of --heads 3"), e.getMessage());
    assertTrue(
        e.getMessage().contains("--heads 3 is not a multiple of --kv-heads 2"), e.getMessage());
    assertTrue(
        String.join("", new ModelShape(0, 1, 1, 1, 1, 1, 1, 1).problems(1)).contains("--hidden 0"));
    assertTrue(
        String.join("", new ModelShape(12, 4, 4, 4, 1, 4, 1, 4).problems(1)).contains("odd"));
  }

  @Test
  void theRanksShardsCoverEveryMatrixOnceAndKeepHeadsWhole() {
    ModelShape s = DecodeCommand.SMALL;
    for (int tp : new int[] {1, 2, 4, 8}) {
      int[] q = new int[s.qWidth()];
      int[] kv = new int[s.kvWidth()];
      int[] mlp = new int[s.intermediate()];
      int[] vocab = new int[s.vocab()];
      for (int r = 0; r < tp; r++) {
        Shard sh = new Shard(s, tp, r);
        mark(q, sh.qColumns());
        mark(kv, sh.kvColumns());
        mark(mlp, sh.mlpColumns());
        mark(vocab, sh.vocabColumns());
        assertEquals(0, sh.qColumns().start() % s.headDim());
        assertEquals(0, sh.kvColumns().start() % s.headDim());
        // Grouped-query attention: this rank's first query head uses this rank's first KV head.
        int group = s.heads() / s.kvHeads();
        assertEquals(sh.kvHeads().start(), sh.heads().start() / group);
        assertEquals(sh.kvHeads().end(), sh.heads().end() / group);
      }
      for (int[] covered : new int[][] {q, kv, mlp, vocab}) {
        for (int c : covered) {
          assertEquals(1, c, "tp " + tp + ": every column on exactly one rank");
        }
      }
    }
    assertThrows(IllegalArgumentException.class, () -> new Shard(s, 2, 2));
    assertThrows(IllegalArgumentException.class, () -> new Shard(s, 3, 0));
  }

  private static void mark(int[] covered, Shard.Range r) {
    for (int i = r.start(); i < r.end(); i++) {
      covered[i]++;
    }
  }
}
