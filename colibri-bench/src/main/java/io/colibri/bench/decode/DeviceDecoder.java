/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.bytedeco.cuda.global.cublas.CUBLAS_COMPUTE_32F;
import static org.bytedeco.cuda.global.cublas.CUBLAS_GEMM_DEFAULT;
import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_N;
import static org.bytedeco.cuda.global.cublas.CUBLAS_STATUS_SUCCESS;
import static org.bytedeco.cuda.global.cublas.cublasCreate_v2;
import static org.bytedeco.cuda.global.cublas.cublasDestroy_v2;
import static org.bytedeco.cuda.global.cublas.cublasGemmEx;
import static org.bytedeco.cuda.global.cublas.cublasSetStream_v2;
import static org.bytedeco.cuda.global.cudart.CUDA_SUCCESS;
import static org.bytedeco.cuda.global.cudart.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
import static org.bytedeco.cuda.global.cudart.cuFuncSetAttribute;
import static org.bytedeco.cuda.global.cudart.cuLaunchKernel;
import static org.bytedeco.cuda.global.cudart.cuModuleGetFunction;
import static org.bytedeco.cuda.global.cudart.cuModuleLoadData;
import static org.bytedeco.cuda.global.cudart.cuModuleUnload;
import static org.bytedeco.cuda.global.cudart.cudaDevAttrMaxSharedMemoryPerBlockOptin;
import static org.bytedeco.cuda.global.cudart.cudaDeviceGetAttribute;
import static org.bytedeco.cuda.global.cudart.cudaFree;
import static org.bytedeco.cuda.global.cudart.cudaGetErrorString;
import static org.bytedeco.cuda.global.cudart.cudaGraphDestroy;
import static org.bytedeco.cuda.global.cudart.cudaGraphExecDestroy;
import static org.bytedeco.cuda.global.cudart.cudaGraphInstantiate;
import static org.bytedeco.cuda.global.cudart.cudaGraphUpload;
import static org.bytedeco.cuda.global.cudart.cudaMalloc;
import static org.bytedeco.cuda.global.cudart.cudaMemGetInfo;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyAsync;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDeviceToHost;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyHostToDevice;
import static org.bytedeco.cuda.global.cudart.cudaMemsetAsync;
import static org.bytedeco.cuda.global.cudart.cudaSetDevice;
import static org.bytedeco.cuda.global.cudart.cudaStreamBeginCapture;
import static org.bytedeco.cuda.global.cudart.cudaStreamCaptureModeThreadLocal;
import static org.bytedeco.cuda.global.cudart.cudaStreamCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaStreamDestroy;
import static org.bytedeco.cuda.global.cudart.cudaStreamEndCapture;
import static org.bytedeco.cuda.global.cudart.cudaStreamNonBlocking;
import static org.bytedeco.cuda.global.cudart.cudaStreamSynchronize;
import static org.bytedeco.cuda.global.cudart.cudaSuccess;

import io.colibri.bench.decode.SeededWeights.Matrix;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.cuda.cublas.cublasContext;
import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUgraph_st;
import org.bytedeco.cuda.cudart.CUmod_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.ShortPointer;
import org.bytedeco.javacpp.SizeTPointer;

/**
 * One rank of the tensor-parallel decoder on a GPU, in float32 or bfloat16
 * ({@link Precision}): {@link HostDecoder}'s model on device buffers allocated once, GEMMs
 * through cuBLAS (float32 accumulation), the small kernels of src/tools/decode_kernels.cu (PTX in
 * this jar), the all-reduces and the all-gather through {@link DeviceCollectives} (Colibri's or
 * NCCL's) on the rank's stream.
 *
 * <p>A pass of the model works on up to {@code chunk} positions of every sequence at once: the
 * prompt goes in passes of {@code chunk} positions (a prefill; one pass when the prompt fits),
 * the generation in steps of one. A pass reads its tokens and its position from device memory and
 * leaves the next tokens (the argmax of each sequence's last row) and the next position there, so
 * the whole decode step, collectives included, can be captured once in a CUDA graph and replayed
 * ({@link #captureStep()}, {@link #replay()}); replays go through
 * {@link DeviceCollectives#launchGraph} (Colibri's: {@code Communicator.launchGraph}, which rank
 * threads sharing a GPU need).
 *
 * <p>Needs the org.bytedeco CUDA presets' runtime loaded (a GPU host). The caller's thread must
 * have {@code device} current for every call.
 */
public final class DeviceDecoder implements AutoCloseable {

  private static final int THREADS = 256;

  /** The kernels' image, a resource beside this class. */
  static final String PTX = "colibri_decode_kernels.ptx";

  /** The kernels of colibri_decode_kernels.ptx that exist once per {@link Precision}, less its suffix. */
  private static final List<String> TYPED =
      List.of(
          "clb_dec_embed",
          "clb_dec_rmsnorm",
          "clb_dec_rope",
          "clb_dec_cache",
          "clb_dec_attention",
          "clb_dec_silu_mul",
          "clb_dec_add",
          "clb_dec_argmax");

  /** The kernel that moves the position on (no element type). */
  private static final String ADVANCE = "clb_dec_advance";

  /** Every kernel of colibri_decode_kernels.ptx this decoder launches, in any precision. */
  static final List<String> KERNELS = kernelNames();

  private static List<String> kernelNames() {
    List<String> k = new ArrayList<>();
    for (Precision p : Precision.values()) {
      TYPED.forEach(n -> k.add(n + "_" + p.suffix()));
    }
    k.add(ADVANCE);
    return List.copyOf(k);
  }

  private final ModelShape s;
  private final Precision pr;

  /** Positions per sequence a pass takes at most (the prefill's chunk). */
  private final int chunk;

  private final Shard shard;
  private final DeviceCollectives comm;
  private final CUstream_st stream = new CUstream_st();
  private final cublasContext blas = new cublasContext();
  private final CUmod_st module = new CUmod_st();
  private final List<Pointer> allocations = new ArrayList<>();
  private final List<DeviceCollectives.Registered> registrations = new ArrayList<>();
  private final FloatPointer one = new FloatPointer(1f);
  private final FloatPointer zero = new FloatPointer(0f);

  /** The kernels' argument values, 8 bytes each, and the pointers to them that cuLaunchKernel takes. */
  static final int MAX_ARGS = 12;

  private final LongPointer argValues = new LongPointer(MAX_ARGS);
  private final java.nio.ByteBuffer argBytes =
      argValues.asByteBuffer().order(java.nio.ByteOrder.nativeOrder());
  private final PointerPointer<Pointer> argSlots = slots(argValues);
  private CUgraphExec_st graph;

  /** The position the next step computes (the device's word holds the same). */
  private int position;

  /**
   * Positions per sequence the device's tokens are for: those of the last {@link #setInput}, or 1
   * after a pass (its argmax wrote one token per sequence).
   */
  private int inputPositions = 1;

  private final CUfunc_st fEmbed = new CUfunc_st();
  private final CUfunc_st fNorm = new CUfunc_st();
  private final CUfunc_st fRope = new CUfunc_st();
  private final CUfunc_st fCache = new CUfunc_st();
  private final CUfunc_st fAttention = new CUfunc_st();
  private final CUfunc_st fSiluMul = new CUfunc_st();
  private final CUfunc_st fAdd = new CUfunc_st();
  private final CUfunc_st fArgmax = new CUfunc_st();
  private final CUfunc_st fAdvance = new CUfunc_st();

  private final int b;
  private final int h;
  private final int d;
  private final int nh;
  private final int nkv;
  private final int qw;
  private final int kvw;
  private final int iw;
  private final int vw;

  private final Pointer[] wq;
  private final Pointer[] wk;
  private final Pointer[] wv;
  private final Pointer[] wo;
  private final Pointer[] wgate;
  private final Pointer[] wup;
  private final Pointer[] wdown;
  private final Pointer[] kcache;
  private final Pointer[] vcache;
  private final Pointer embed;
  private final Pointer head;
  private final Pointer x;
  private final Pointer xn;
  private final Pointer q;
  private final Pointer k;
  private final Pointer v;
  private final Pointer att;
  private final Pointer out;
  private final Pointer gate;
  private final Pointer up;
  private final Pointer part;
  private final Pointer gathered;
  private final Pointer tokens;
  private final Pointer pos;

  /**
   * A float32 decoder that feeds the prompt one position per pass.
   *
   * @param shard the model's shape, the group's size and this rank
   * @param weights the model's weights
   * @param comm the group's collectives (rank and size those of {@code shard}; closed by their owner)
   * @param device the GPU (made current on this thread)
   */
  public DeviceDecoder(Shard shard, SeededWeights weights, DeviceCollectives comm, int device) {
    this(shard, weights, comm, device, Precision.FLOAT32, 1);
  }

  /**
   * Loads the kernels, draws this rank's shard and uploads it, and allocates every buffer.
   *
   * @param shard the model's shape, the group's size and this rank
   * @param weights the model's weights
   * @param comm the group's collectives (rank and size those of {@code shard}; closed by their owner)
   * @param device the GPU (made current on this thread)
   * @param precision the element type of weights, activations, KV cache and collectives
   * @param chunk the most positions per sequence one pass takes (the prompt's chunk), 1 or more
   */
  public DeviceDecoder(
      Shard shard,
      SeededWeights weights,
      DeviceCollectives comm,
      int device,
      Precision precision,
      int chunk) {
    shard.checkGroup(comm.size(), comm.rank());
    if (chunk < 1 || chunk > shard.shape().context()) {
      throw new IllegalArgumentException(
          "a pass of " + chunk + " positions: use 1 to the context's " + shard.shape().context());
    }
    this.pr = precision;
    this.chunk = chunk;
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
    try {
      selectDevice(device);
      cuda(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      if (cublasCreate_v2(blas) != CUBLAS_STATUS_SUCCESS
          || cublasSetStream_v2(blas, stream) != CUBLAS_STATUS_SUCCESS) {
        throw new IllegalStateException("cuBLAS could not be set up on GPU " + device);
      }
      loadKernels();
      // Attention's dynamic shared memory: a float score per position.
      int scoreBytes = 4 * s.context();
      if (scoreBytes > 48 * 1024) {
        int[] most = new int[1];
        cuda(
            cudaDeviceGetAttribute(most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
            "cudaDeviceGetAttribute");
        if (scoreBytes > most[0]) {
          throw new IllegalArgumentException(
              "a context of "
                  + s.context()
                  + " positions needs "
                  + scoreBytes
                  + " bytes of shared memory per attention block; GPU "
                  + device
                  + " gives at most "
                  + most[0]
                  + ": use a context of at most "
                  + most[0] / 4);
        }
        driver(
            cuFuncSetAttribute(
                fAttention, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, scoreBytes),
            "cuFuncSetAttribute(clb_dec_attention, dynamic shared memory " + scoreBytes + ")");
      }
      int layers = s.layers();
      wq = new Pointer[layers];
      wk = new Pointer[layers];
      wv = new Pointer[layers];
      wo = new Pointer[layers];
      wgate = new Pointer[layers];
      wup = new Pointer[layers];
      wdown = new Pointer[layers];
      kcache = new Pointer[layers];
      vcache = new Pointer[layers];
      for (int l = 0; l < layers; l++) {
        wq[l] = upload(weights, Matrix.Q, l);
        wk[l] = upload(weights, Matrix.K, l);
        wv[l] = upload(weights, Matrix.V, l);
        wo[l] = upload(weights, Matrix.O, l);
        wgate[l] = upload(weights, Matrix.GATE, l);
        wup[l] = upload(weights, Matrix.UP, l);
        wdown[l] = upload(weights, Matrix.DOWN, l);
        kcache[l] = alloc((long) b * nkv * s.context() * d);
        vcache[l] = alloc((long) b * nkv * s.context() * d);
      }
      embed = upload(weights, Matrix.EMBED, 0);
      head = upload(weights, Matrix.HEAD, 0);
      long rows = (long) b * chunk;
      x = alloc(rows * h);
      xn = alloc(rows * h);
      q = alloc(rows * qw);
      k = alloc(rows * kvw);
      v = alloc(rows * kvw);
      att = alloc(rows * qw);
      out = alloc(rows * h);
      gate = alloc(rows * iw);
      up = alloc(rows * iw);
      part = alloc((long) b * vw);
      gathered = alloc((long) shard.tp() * b * vw);
      tokens = allocBytes(4 * rows);
      pos = allocBytes(4);
      sync();
      // The collectives' buffers, registered once on every rank before any step is captured:
      // rank processes then read each other's buffers in place, and the library allocates no
      // staging for them (a server registers its activation buffers the same way).
      registrations.add(comm.register(out, (long) pr.bytes() * rows * h));
      registrations.add(comm.register(part, (long) pr.bytes() * b * vw));
      registrations.add(comm.register(gathered, (long) pr.bytes() * shard.tp() * b * vw));
    } catch (RuntimeException | Error e) {
      close(); // what was made so far: a half-built decoder holds no GPU memory
      throw e;
    }
  }

  /** @return the rank's stream (its address is what Colibri's device calls take) */
  public CUstream_st stream() {
    return stream;
  }

  /**
   * Sets the tokens of the next decode step and its position (stream-ordered copies).
   *
   * @param next one token per sequence
   * @param position the position
   */
  public void setInput(int[] next, int position) {
    setInput(next, position, 1);
  }

  /**
   * Sets the tokens of the next pass and its first position (stream-ordered copies).
   *
   * @param rowTokens n tokens per sequence, sequence-major: row r is sequence r / n at position
   *     {@code position + r % n}
   * @param position the first position
   * @param n positions per sequence, 1 to the chunk
   */
  public void setInput(int[] rowTokens, int position, int n) {
    if (n < 1 || n > chunk) {
      throw new IllegalArgumentException(
          "a pass of " + n + " positions: this decoder takes 1 to " + chunk);
    }
    if (rowTokens.length != b * n) {
      throw new IllegalArgumentException(
          rowTokens.length + " tokens for a batch of " + b + " × " + n + " positions");
    }
    for (int t : rowTokens) {
      if (t < 0 || t >= s.vocab()) {
        throw new IllegalArgumentException(
            "token " + t + " is outside the vocabulary of " + s.vocab());
      }
    }
    if (position < 0 || position > s.context() - n) {
      throw new IllegalArgumentException(
          "positions "
              + position
              + " to "
              + (position + n - 1)
              + " are outside the KV cache's "
              + s.context()
              + " positions");
    }
    this.position = position;
    this.inputPositions = n;
    IntPointer t = new IntPointer(rowTokens);
    IntPointer p = new IntPointer(new int[] {position});
    cuda(
        cudaMemcpyAsync(tokens, t, 4L * rowTokens.length, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync");
    cuda(cudaMemcpyAsync(pos, p, 4, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    sync(); // the host copies' sources live until here
    t.close();
    p.close();
  }

  /**
   * Enqueues one decode step on the rank's stream: the model at the device position for the
   * device tokens, then the next tokens (argmax) and position into their device words.
   */
  public void enqueueStep() {
    enqueuePass(1);
  }

  /**
   * Enqueues one pass of {@code n} positions per sequence (as {@link #setInput(int[], int, int)}
   * set them): their KV entries go into the cache, and the next tokens are the argmax of each
   * sequence's last position.
   *
   * @param n positions per sequence, 1 to the chunk
   */
  public void enqueuePass(int n) {
    if (n != inputPositions) {
      throw new IllegalArgumentException(
          "a pass of "
              + n
              + " positions, but the device's tokens are for "
              + inputPositions
              + ": call setInput with "
              + n
              + " per sequence first");
    }
    checkRoom(n);
    enqueue(n);
    position += n;
    inputPositions = 1;
  }

  /** Positions past the KV cache's last are refused, not written. */
  private void checkRoom(int n) {
    if (position > s.context() - n) {
      throw new IllegalStateException("the KV cache's " + s.context() + " positions are full");
    }
  }

  private void enqueue(int n) {
    int rows = b * n;
    long rh = (long) rows * h;
    launch(fEmbed, rows, 1, 0, embed, tokens, x, h);
    for (int l = 0; l < s.layers(); l++) {
      launch(fNorm, rows, 1, 0, x, xn, h, ModelShape.NORM_EPS);
      gemm(rows, xn, h, wq[l], q, h, qw);
      gemm(rows, xn, h, wk[l], k, h, kvw);
      gemm(rows, xn, h, wv[l], v, h, kvw);
      launch(fRope, rows, 1, 0, q, nh, d, pos, n, ModelShape.ROPE_THETA);
      launch(fRope, rows, 1, 0, k, nkv, d, pos, n, ModelShape.ROPE_THETA);
      launch(fCache, rows, 1, 0, k, v, kcache[l], vcache[l], nkv, s.context(), d, pos, n);
      launch(
          fAttention,
          rows,
          nh,
          4 * s.context(),
          q,
          kcache[l],
          vcache[l],
          att,
          nh,
          nkv,
          s.context(),
          d,
          pos,
          n);
      gemm(rows, att, qw, wo[l], out, qw, h);
      comm.allReduceSum(out, rh, pr, stream);
      launch(fAdd, blocks(rh), 1, 0, x, out, rh);
      launch(fNorm, rows, 1, 0, x, xn, h, ModelShape.NORM_EPS);
      gemm(rows, xn, h, wgate[l], gate, h, iw);
      gemm(rows, xn, h, wup[l], up, h, iw);
      launch(fSiluMul, blocks((long) rows * iw), 1, 0, gate, up, (long) rows * iw);
      gemm(rows, gate, iw, wdown[l], out, iw, h);
      comm.allReduceSum(out, rh, pr, stream);
      launch(fAdd, blocks(rh), 1, 0, x, out, rh);
    }
    launch(fNorm, rows, 1, 0, x, xn, h, ModelShape.NORM_EPS);
    // The head reads each sequence's last row: row n - 1 of the first, every n rows after it.
    gemm(b, offset(xn, (long) (n - 1) * h * pr.bytes()), n * h, head, part, h, vw);
    comm.allGather(part, gathered, (long) b * vw, pr, stream);
    launch(fArgmax, b, 1, 0, gathered, tokens, shard.tp(), b, vw);
    launch(fAdvance, 1, 1, 0, pos, n);
  }

  /** Captures {@link #enqueueStep()} in a CUDA graph, instantiates and uploads it. */
  public void captureStep() {
    cuda(
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    CUgraph_st g = new CUgraph_st();
    try {
      enqueue(1);
    } catch (RuntimeException e) {
      cudaStreamEndCapture(stream, g); // ends the capture; the first error is the one to report
      if (!g.isNull()) {
        cudaGraphDestroy(g);
      }
      throw e;
    }
    cuda(cudaStreamEndCapture(stream, g), "cudaStreamEndCapture");
    if (graph != null) {
      cudaGraphExecDestroy(graph);
    }
    graph = new CUgraphExec_st();
    cuda(cudaGraphInstantiate(graph, g, 0L), "cudaGraphInstantiate");
    cudaGraphDestroy(g);
    cuda(cudaGraphUpload(graph, stream), "cudaGraphUpload");
    sync();
  }

  /** Replays the captured step on the rank's stream, as its collectives' library wants it. */
  public void replay() {
    if (graph == null) {
      throw new IllegalStateException("no step captured: call captureStep() first");
    }
    if (inputPositions != 1) {
      throw new IllegalStateException(
          "the device's tokens are for a pass of "
              + inputPositions
              + " positions: the captured step takes 1");
    }
    checkRoom(1);
    comm.launchGraph(graph, stream);
    position++;
  }

  /**
   * Greedy generation as {@link Generation#run} does it on the CPU: the prompt in passes of up
   * to the chunk's positions (eager; one pass when it fits), then {@code newTokens} steps, eager
   * or as replays of one captured step. The prompt runs twice: once untimed (a warm-up), then
   * timed: the time to the first token runs from its first pass to its tokens on the host. Each
   * generated step's time runs from its launch to its tokens on the host (the logits kept for
   * the check are copied after either).
   *
   * @param seed the prompt's seed
   * @param promptLength prompt tokens per sequence
   * @param newTokens tokens to generate per sequence
   * @param keepLogits whether to copy the prompt's last logits and every step's to the host
   * @param useGraph whether to capture the step once and replay it
   * @return what was generated
   */
  public Generation generate(
      long seed, int promptLength, int newTokens, boolean keepLogits, boolean useGraph) {
    if (promptLength < 1 || newTokens < 1 || promptLength + newTokens > s.context()) {
      throw new IllegalArgumentException(
          "prompt "
              + promptLength
              + " + new "
              + newTokens
              + " tokens must be 2 or more and fit the context of "
              + s.context());
    }
    int[][] prompt = Generation.prompt(s, seed, promptLength);
    int[] first = new int[b];
    // One untimed pass of the prompt first, as a server warms up before it serves: the first call
    // of each GEMM shape and each library's lazy set-up (Colibri's device paths, NCCL's
    // connections) are not the prefill's. The timed prefill overwrites its KV entries.
    prefill(prompt, promptLength);
    read(null, first);
    long t0 = System.nanoTime();
    prefill(prompt, promptLength);
    read(null, first);
    long firstToken = System.nanoTime() - t0;
    float[] promptLogits = null;
    if (keepLogits) {
      promptLogits = new float[b * s.vocab()];
      read(promptLogits, first);
    }
    if (useGraph) {
      captureStep();
    }
    int[][] out = new int[newTokens][b];
    List<float[]> kept = new ArrayList<>();
    long[] times = new long[newTokens];
    float[] logits = keepLogits ? new float[b * s.vocab()] : null;
    for (int n = 0; n < newTokens; n++) {
      long s0 = System.nanoTime();
      if (useGraph) {
        replay();
      } else {
        enqueueStep();
      }
      read(null, out[n]);
      times[n] = System.nanoTime() - s0;
      if (keepLogits) {
        // Outside the step's time: the check's copy of the whole vocabulary's logits (2 MiB at
        // batch 16 and 32000 words) to pageable host memory took longer than the step itself.
        read(logits, out[n]);
        kept.add(logits.clone());
      }
    }
    return new Generation(out, kept, times, firstToken, promptLogits);
  }

  /** The prompt from position 0, in passes of up to the chunk's positions. */
  private void prefill(int[][] prompt, int promptLength) {
    for (int p = 0; p < promptLength; p += chunk) {
      int n = Math.min(chunk, promptLength - p);
      int[] rowTokens = new int[b * n];
      for (int seq = 0; seq < b; seq++) {
        for (int i = 0; i < n; i++) {
          rowTokens[seq * n + i] = prompt[p + i][seq];
        }
      }
      setInput(rowTokens, p, n);
      enqueuePass(n);
    }
  }

  /** @return the KV cache's bytes per token on this rank: keys and values of every layer */
  public long kvBytesPerToken() {
    return 2L * s.layers() * nkv * d * pr.bytes();
  }

  /** Waits for the rank's stream. */
  public void sync() {
    cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  /**
   * Copies the last step's logits (every sequence's whole vocabulary, in order) and the next
   * tokens to the host; waits for the stream.
   *
   * @param logitsOut batch × vocab, or null
   * @param nextOut one token per sequence
   */
  public void read(float[] logitsOut, int[] nextOut) {
    IntPointer t = new IntPointer(b);
    int count = shard.tp() * b * vw;
    Pointer g =
        logitsOut == null
            ? null
            : pr == Precision.FLOAT32 ? new FloatPointer(count) : new ShortPointer(count);
    cuda(cudaMemcpyAsync(t, tokens, 4L * b, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    if (g != null) {
      cuda(
          cudaMemcpyAsync(g, gathered, (long) pr.bytes() * count, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    }
    sync();
    comm.checkHealthy();
    t.get(nextOut);
    if (g != null) {
      float[] all = new float[count];
      if (g instanceof FloatPointer f) {
        f.get(all);
      } else {
        short[] raw = new short[count];
        ((ShortPointer) g).get(raw);
        for (int i = 0; i < count; i++) {
          all[i] = Precision.fromBfloat16(raw[i]);
        }
      }
      shard.vocabularyOrder(all, logitsOut);
      g.close();
    }
    t.close();
  }

  @Override
  public void close() {
    if (graph != null) {
      cudaGraphExecDestroy(graph);
      graph = null;
    }
    // Deregistered (collectively) after the graph that uses them is gone, before the memory is;
    // a deregistration that fails still lets everything else go, and is thrown last.
    RuntimeException failed = null;
    for (int i = registrations.size() - 1; i >= 0; i--) {
      try {
        registrations.get(i).close();
      } catch (RuntimeException e) {
        if (failed == null) {
          failed = e;
        } else {
          failed.addSuppressed(e);
        }
      }
    }
    registrations.clear();
    for (Pointer p : allocations) {
      cudaFree(p);
    }
    allocations.clear();
    if (!blas.isNull()) {
      cublasDestroy_v2(blas);
      blas.setNull();
    }
    if (!module.isNull()) {
      cuModuleUnload(module);
      module.setNull();
    }
    if (!stream.isNull()) {
      cudaStreamDestroy(stream);
      stream.setNull();
    }
    if (failed != null) {
      throw failed;
    }
  }

  /**
   * Makes {@code device} current on this thread and creates its CUDA context.
   *
   * @param device the GPU
   */
  public static void selectDevice(int device) {
    cuda(cudaSetDevice(device), "cudaSetDevice(" + device + ")");
    cuda(cudaFree(null), "creating the CUDA context of GPU " + device);
  }

  /** @return the current GPU's memory in use (total less free, cudaMemGetInfo), in bytes */
  public static long usedBytes() {
    try (SizeTPointer free = new SizeTPointer(1);
        SizeTPointer total = new SizeTPointer(1)) {
      cuda(cudaMemGetInfo(free, total), "cudaMemGetInfo");
      return total.get() - free.get();
    }
  }

  /**
   * The GPUs this process sees, through the org.bytedeco CUDA presets.
   *
   * @return how many
   * @throws IllegalStateException saying why the CUDA runtime could not be loaded (no driver, no
   *     CUDA 13 runtime on the library path)
   */
  public static int gpuCount() {
    try {
      org.bytedeco.javacpp.Loader.load(org.bytedeco.cuda.global.cudart.class);
      int[] n = new int[1];
      int rc = org.bytedeco.cuda.global.cudart.cudaGetDeviceCount(n);
      return rc == cudaSuccess ? n[0] : 0;
    } catch (LinkageError | RuntimeException e) {
      throw new IllegalStateException(
          "the CUDA runtime could not be loaded through the org.bytedeco"
              + " CUDA presets ("
              + e
              + "): the GPU decoder needs the NVIDIA driver (libcuda.so.1) and the"
              + " CUDA 13 runtime (libcudart.so.13) on the library path",
          e);
    }
  }

  private void loadKernels() {
    byte[] ptx;
    try (InputStream in = DeviceDecoder.class.getResourceAsStream(PTX)) {
      if (in == null) {
        throw new IllegalStateException(
            "colibri_decode_kernels.ptx is not in this jar: build"
                + " colibri-bench with nvcc on the path (colibri-native's CMake build makes it)");
      }
      ptx = in.readAllBytes();
    } catch (IOException e) {
      throw new IllegalStateException("could not read colibri_decode_kernels.ptx: " + e, e);
    }
    byte[] z = java.util.Arrays.copyOf(ptx, ptx.length + 1); // the driver wants it 0-terminated
    try (BytePointer image = new BytePointer(z)) {
      driver(cuModuleLoadData(module, image), "cuModuleLoadData of the decode kernels");
    }
    CUfunc_st[] fs = {fEmbed, fNorm, fRope, fCache, fAttention, fSiluMul, fAdd, fArgmax};
    for (int i = 0; i < fs.length; i++) {
      String name = TYPED.get(i) + "_" + pr.suffix();
      driver(cuModuleGetFunction(fs[i], module, name), "cuModuleGetFunction(" + name + ")");
    }
    driver(cuModuleGetFunction(fAdvance, module, ADVANCE), "cuModuleGetFunction(" + ADVANCE + ")");
  }

  /** Device memory for {@code elements} of the decoder's precision, zeroed in the stream's order. */
  private Pointer alloc(long elements) {
    return allocBytes((long) pr.bytes() * elements);
  }

  private Pointer allocBytes(long bytes) {
    Pointer p = new Pointer();
    cuda(cudaMalloc(p, bytes), "cudaMalloc of " + bytes + " bytes");
    allocations.add(p);
    cuda(cudaMemsetAsync(p, 0, bytes, stream), "cudaMemsetAsync"); // in the stream's order
    return p;
  }

  /** This rank's block of a matrix, drawn on the host, rounded to the precision and copied to the GPU. */
  private Pointer upload(SeededWeights w, Matrix m, int layer) {
    float[] a = new float[shard.rows(m).size() * shard.columns(m).size()];
    w.fill(a, m, layer, s, shard.rows(m), shard.columns(m));
    Pointer p = alloc(a.length);
    Pointer src;
    if (pr == Precision.FLOAT32) {
      src = new FloatPointer(a);
    } else {
      short[] h16 = new short[a.length];
      for (int i = 0; i < a.length; i++) {
        h16[i] = Precision.toBfloat16(a[i]);
      }
      src = new ShortPointer(h16);
    }
    try (src) {
      cuda(
          cudaMemcpyAsync(p, src, (long) pr.bytes() * a.length, cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
      sync();
    }
    return p;
  }

  /**
   * y[m][n] = a[m][kk] · w[kk][n], row-major, a's rows {@code lda} elements apart, as cuBLAS's
   * column-major y^T = w^T · a^T; float32 accumulation in either precision.
   */
  private void gemm(int m, Pointer a, int lda, Pointer w, Pointer y, int kk, int n) {
    int t = pr.cudaType();
    int rc =
        cublasGemmEx(
            blas,
            CUBLAS_OP_N,
            CUBLAS_OP_N,
            n,
            m,
            kk,
            one,
            w,
            t,
            n,
            a,
            t,
            lda,
            zero,
            y,
            t,
            n,
            CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT);
    if (rc != CUBLAS_STATUS_SUCCESS) {
      throw new IllegalStateException(
          "cublasGemmEx failed (status "
              + rc
              + ") for "
              + m
              + " x "
              + kk
              + " x "
              + n
              + " in "
              + pr.label());
    }
  }

  /** {@code p} moved on by {@code bytes} (a view: nothing is allocated or freed). */
  private static Pointer offset(Pointer p, long bytes) {
    return at(p.address() + bytes);
  }

  /**
   * A pointer to {@code address} exactly (no JavaCPP position involved; a view: nothing is
   * allocated or freed).
   *
   * @param where the address
   * @return the pointer
   */
  static Pointer at(long where) {
    return new Pointer() {
      {
        address = where; // Pointer's field (a parameter named address would be hidden by it)
      }
    };
  }

  /** Pointers to each 8-byte slot of {@code values} (exact addresses: no JavaCPP position involved). */
  static PointerPointer<Pointer> slots(LongPointer values) {
    PointerPointer<Pointer> p = new PointerPointer<>(MAX_ARGS);
    for (int i = 0; i < MAX_ARGS; i++) {
      p.put(i, at(values.address() + 8L * i));
    }
    return p;
  }

  private static int blocks(long n) {
    return (int) Math.min((n + THREADS - 1) / THREADS, 1024);
  }

  /**
   * Launches {@code f} on (gx, gy) blocks of THREADS with the arguments as the kernel takes them.
   * The values go into one 8-byte slot each of a buffer allocated once (the driver copies them at
   * the launch, and at a captured launch too), so an eager step allocates nothing per launch.
   */
  private void launch(CUfunc_st f, int gx, int gy, int smem, Object... args) {
    if (args.length > MAX_ARGS) {
      throw new IllegalArgumentException(
          args.length + " kernel arguments: the slots hold " + MAX_ARGS);
    }
    for (int i = 0; i < args.length; i++) {
      Object a = args[i];
      int at = 8 * i;
      if (a instanceof Pointer p) {
        argBytes.putLong(at, p.address());
      } else if (a instanceof Integer n) {
        argBytes.putInt(at, n);
      } else if (a instanceof Long n) {
        argBytes.putLong(at, n);
      } else if (a instanceof Float n) {
        argBytes.putFloat(at, n);
      } else if (a instanceof Double n) {
        argBytes.putDouble(at, n);
      } else {
        throw new IllegalArgumentException("kernel argument of type " + a.getClass());
      }
    }
    driver(
        cuLaunchKernel(f, gx, gy, 1, THREADS, 1, 1, smem, stream, argSlots, null),
        "cuLaunchKernel");
  }

  private static void cuda(int rc, String what) {
    if (rc != cudaSuccess) {
      BytePointer text = cudaGetErrorString(rc);
      throw new IllegalStateException(
          what + " failed: " + (text == null ? "error " + rc : text.getString()));
    }
  }

  private static void driver(int rc, String what) {
    if (rc != CUDA_SUCCESS) {
      throw new IllegalStateException(what + " failed: CUresult " + rc);
    }
  }
}
