/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import java.util.ArrayList;
import java.util.List;

/**
 * The shape of a Llama-shaped decoder and of the work it serves: hidden size, attention heads,
 * key/value heads (grouped-query attention), the MLP's intermediate size, layers, vocabulary,
 * the batch of sequences decoded together and the KV cache's length per sequence.
 *
 * <p>{@link #llama8b(int)} is the shape of an 8B model with fewer layers (so that it fits any
 * GPU); every figure that depends on the layer count scales with it.
 *
 * @param hidden the hidden size (the residual stream's width)
 * @param heads query heads
 * @param kvHeads key/value heads; {@code heads} is a multiple of it
 * @param intermediate the MLP's intermediate size
 * @param layers decoder layers
 * @param vocab the vocabulary
 * @param batch sequences decoded together
 * @param context positions of the KV cache per sequence (prompt and generated tokens)
 */
public record ModelShape(
    int hidden,
    int heads,
    int kvHeads,
    int intermediate,
    int layers,
    int vocab,
    int batch,
    int context) {

  /** RMSNorm's epsilon. */
  public static final float NORM_EPS = 1e-5f;

  /** The rotary embedding's base. */
  public static final double ROPE_THETA = 10000.0;

  /**
   * Llama-3-8B's layer shape (hidden 4096, 32 heads, 8 KV heads, intermediate 14336) with a
   * vocabulary of 32000, a batch of 16 and 256 positions per sequence.
   *
   * @param layers how many layers (the 8B model has 32)
   * @return the shape
   */
  public static ModelShape llama8b(int layers) {
    return new ModelShape(4096, 32, 8, 14336, layers, 32000, 16, 256);
  }

  /** @return the size of one head: hidden / heads */
  public int headDim() {
    return hidden / heads;
  }

  /** @return the width of all query heads together (heads × head size) */
  public int qWidth() {
    return heads * headDim();
  }

  /** @return the width of all key (or value) heads together (KV heads × head size) */
  public int kvWidth() {
    return kvHeads * headDim();
  }

  /**
   * What is wrong with this shape split over {@code tp} ranks, as sentences that say what to
   * change; empty when it splits. Heads, KV heads, the intermediate size and the vocabulary are
   * split into equal whole parts, so each must be a multiple of {@code tp}.
   *
   * @param tp the tensor-parallel size
   * @return the problems, empty if none
   */
  public List<String> problems(int tp) {
    List<String> p = new ArrayList<>();
    positive(p, "hidden", hidden);
    positive(p, "heads", heads);
    positive(p, "kv-heads", kvHeads);
    positive(p, "intermediate", intermediate);
    positive(p, "layers", layers);
    positive(p, "vocab", vocab);
    positive(p, "batch", batch);
    positive(p, "context", context);
    if (tp < 1) {
      p.add("--tp " + tp + ": the tensor-parallel size must be 1 or more");
    }
    if (!p.isEmpty()) {
      return p;
    }
    if (hidden % heads != 0) {
      p.add(
          "--hidden "
              + hidden
              + " is not a multiple of --heads "
              + heads
              + ": every head has hidden / heads elements");
    } else if (headDim() % 2 != 0) {
      p.add(
          "the head size hidden / heads = "
              + headDim()
              + " is odd: the rotary embedding turns pairs of elements; pick an even head size");
    }
    if (heads % kvHeads != 0) {
      p.add(
          "--heads "
              + heads
              + " is not a multiple of --kv-heads "
              + kvHeads
              + ": query heads share the KV heads in equal groups");
    }
    divides(p, "kv-heads", kvHeads, tp, "each rank holds whole KV heads (and their query heads)");
    divides(p, "heads", heads, tp, "each rank holds whole query heads");
    divides(p, "intermediate", intermediate, tp, "each rank holds an equal part of the MLP");
    divides(p, "vocab", vocab, tp, "each rank holds an equal part of the vocabulary");
    return p;
  }

  /**
   * Throws when {@link #problems(int)} finds any.
   *
   * @param tp the tensor-parallel size
   * @return this shape
   * @throws IllegalArgumentException naming every problem and what to change
   */
  public ModelShape check(int tp) {
    List<String> p = problems(tp);
    if (!p.isEmpty()) {
      throw new IllegalArgumentException(
          "the model does not split over " + tp + " rank(s): " + String.join("; ", p));
    }
    return this;
  }

  /**
   * The parameters of one layer on one rank of {@code tp}: its Q, K, V, O, gate, up and down
   * shards and its two norm weights (which every rank holds whole).
   *
   * @param tp the tensor-parallel size
   * @return parameters per layer per rank
   */
  public long layerParams(int tp) {
    long h = hidden;
    long attention = h * (qWidth() + 2L * kvWidth()) + (long) qWidth() * h;
    long mlp = 3L * h * intermediate;
    return (attention + mlp) / tp + 2 * h;
  }

  /**
   * Every parameter one rank of {@code tp} holds: the layers, the embedding (whole on every
   * rank), the final norm and its part of the vocabulary head.
   *
   * @param tp the tensor-parallel size
   * @return parameters per rank
   */
  public long rankParams(int tp) {
    return layers * layerParams(tp) + (long) vocab * hidden + hidden + (long) hidden * vocab / tp;
  }

  /**
   * The KV cache's bytes per token on one rank of {@code tp}: 2 (key and value) × layers × KV
   * heads × head size × bytes per element / tp.
   *
   * @param tp the tensor-parallel size
   * @param bytesPerElement 2 for bfloat16, 4 for float32
   * @return bytes per cached token per rank
   */
  public long kvBytesPerToken(int tp, int bytesPerElement) {
    return 2L * layers * kvHeads * headDim() * bytesPerElement / tp;
  }

  private static void positive(List<String> p, String name, int v) {
    if (v < 1) {
      p.add("--" + name + " " + v + ": must be 1 or more");
    }
  }

  private static void divides(List<String> p, String name, int v, int tp, String why) {
    if (v % tp != 0) {
      p.add("--" + name + " " + v + " is not a multiple of --tp " + tp + ": " + why);
    }
  }
}
