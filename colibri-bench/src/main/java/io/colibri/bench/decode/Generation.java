/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Greedy generation on one rank, as a server decodes: a prompt of {@code promptLength} tokens
 * per sequence (drawn from the seed, the same for every TP size; on the CPU fed one position per
 * step, on a GPU in passes of several), then {@code newTokens} steps that each feed the argmax of
 * the last logits. Keeps the generated tokens, the prompt's last logits and every generated
 * step's (for the check against TP=1) and the times.
 *
 * @param tokens the generated tokens, [step][sequence]
 * @param logits each generated step's logits, [step][sequence × vocab] (empty unless kept)
 * @param stepNanos each generated step's time
 * @param firstTokenNanos the time to the first token: the whole prompt, to the argmax of its last
 *     position on the host (on the CPU the first time, set-up included; on a GPU after an untimed
 *     warm-up pass of the same prompt)
 * @param promptLogits the logits of the prompt's last position, [sequence × vocab], or null
 *     unless kept
 */
public record Generation(
    int[][] tokens,
    List<float[]> logits,
    long[] stepNanos,
    long firstTokenNanos,
    float[] promptLogits) {

  /**
   * Runs the prompt and the generation on {@code decoder}.
   *
   * @param decoder this rank's decoder
   * @param seed the prompt's seed
   * @param promptLength prompt tokens per sequence, 1 or more
   * @param newTokens tokens to generate per sequence, 1 or more
   * @param keepLogits whether to keep every step's logits
   * @return what was generated
   */
  public static Generation run(
      HostDecoder decoder, long seed, int promptLength, int newTokens, boolean keepLogits) {
    ModelShape s = decoder.shard().shape();
    if (promptLength < 1 || newTokens < 1 || promptLength + newTokens > s.context()) {
      throw new IllegalArgumentException(
          "prompt "
              + promptLength
              + " + new "
              + newTokens
              + " tokens must be 2 or more and fit the context of "
              + s.context());
    }
    int[][] prompt = prompt(s, seed, promptLength);
    float[] logits = new float[s.batch() * s.vocab()];
    long t0 = System.nanoTime();
    for (int p = 0; p < promptLength; p++) {
      decoder.step(prompt[p], p, logits);
    }
    int[] next = argmax(logits, s.batch(), s.vocab());
    long first = System.nanoTime() - t0;
    float[] promptLogits = keepLogits ? logits.clone() : null;
    int[][] out = new int[newTokens][];
    List<float[]> kept = new ArrayList<>();
    long[] times = new long[newTokens];
    for (int n = 0; n < newTokens; n++) {
      long s0 = System.nanoTime();
      decoder.step(next, promptLength + n, logits);
      times[n] = System.nanoTime() - s0;
      next = argmax(logits, s.batch(), s.vocab());
      out[n] = next;
      if (keepLogits) {
        kept.add(logits.clone());
      }
    }
    return new Generation(out, kept, times, first, promptLogits);
  }

  /**
   * The prompt: [position][sequence] tokens drawn from {@code seed}.
   *
   * @param s the model's shape (vocabulary and batch)
   * @param seed the seed
   * @param length positions
   * @return the tokens
   */
  public static int[][] prompt(ModelShape s, long seed, int length) {
    SplittableRandom r = new SplittableRandom(seed);
    int[][] t = new int[length][s.batch()];
    for (int p = 0; p < length; p++) {
      for (int i = 0; i < s.batch(); i++) {
        t[p][i] = r.nextInt(s.vocab());
      }
    }
    return t;
  }

  /**
   * Each row's index of its largest element (the lowest index among equals).
   *
   * @param logits rows × width
   * @param rows rows
   * @param width elements per row
   * @return one index per row
   */
  public static int[] argmax(float[] logits, int rows, int width) {
    int[] a = new int[rows];
    for (int r = 0; r < rows; r++) {
      int best = 0;
      for (int c = 1; c < width; c++) {
        if (logits[r * width + c] > logits[r * width + best]) {
          best = c;
        }
      }
      a[r] = best;
    }
    return a;
  }

  /** @return the median generated step's time in nanoseconds */
  public long medianStepNanos() {
    long[] t = stepNanos.clone();
    java.util.Arrays.sort(t);
    return t[t.length / 2];
  }
}
