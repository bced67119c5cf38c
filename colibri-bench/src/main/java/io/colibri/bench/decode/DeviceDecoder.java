/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_N;
import static org.bytedeco.cuda.global.cublas.CUBLAS_STATUS_SUCCESS;
import static org.bytedeco.cuda.global.cublas.cublasCreate_v2;
import static org.bytedeco.cuda.global.cublas.cublasDestroy_v2;
import static org.bytedeco.cuda.global.cublas.cublasSetStream_v2;
import static org.bytedeco.cuda.global.cublas.cublasSgemm_v2;
import static org.bytedeco.cuda.global.cudart.CUDA_SUCCESS;
import static org.bytedeco.cuda.global.cudart.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
import static org.bytedeco.cuda.global.cudart.cuFuncSetAttribute;
import static org.bytedeco.cuda.global.cudart.cudaDevAttrMaxSharedMemoryPerBlockOptin;
import static org.bytedeco.cuda.global.cudart.cudaDeviceGetAttribute;
import static org.bytedeco.cuda.global.cudart.cuLaunchKernel;
import static org.bytedeco.cuda.global.cudart.cuModuleGetFunction;
import static org.bytedeco.cuda.global.cudart.cuModuleLoadData;
import static org.bytedeco.cuda.global.cudart.cuModuleUnload;
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
import org.bytedeco.javacpp.SizeTPointer;

/**
 * One rank of the tensor-parallel decoder on a GPU, float32: {@link HostDecoder}'s model on
 * device buffers allocated once, GEMMs through cuBLAS, the small kernels of
 * src/tools/decode_kernels.cu (PTX in this jar), the all-reduces and the all-gather through
 * {@link DeviceCollectives} (Colibri's or NCCL's) on the rank's stream. A step reads its tokens and its position
 * from device memory and leaves the next tokens (the argmax) and the next position there, so the
 * whole step, collectives included, can be captured once in a CUDA graph and replayed
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

  /** The kernels of colibri_decode_kernels.ptx this decoder launches. */
  static final List<String> KERNELS = List.of("clb_dec_embed", "clb_dec_rmsnorm", "clb_dec_rope",
      "clb_dec_cache", "clb_dec_attention", "clb_dec_silu_mul", "clb_dec_add", "clb_dec_argmax",
      "clb_dec_advance");

  private final ModelShape s;
  private final Shard shard;
  private final DeviceCollectives comm;
  private final CUstream_st stream = new CUstream_st();
  private final cublasContext blas = new cublasContext();
  private final CUmod_st module = new CUmod_st();
  private final List<Pointer> allocations = new ArrayList<>();
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
   * Loads the kernels, draws this rank's shard and uploads it, and allocates every buffer.
   *
   * @param shard the model's shape, the group's size and this rank
   * @param weights the model's weights
   * @param comm the group's collectives (rank and size those of {@code shard}; closed by their owner)
   * @param device the GPU (made current on this thread)
   */
  public DeviceDecoder(Shard shard, SeededWeights weights, DeviceCollectives comm, int device) {
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
    try {
      selectDevice(device);
      cuda(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      if (cublasCreate_v2(blas) != CUBLAS_STATUS_SUCCESS
          || cublasSetStream_v2(blas, stream) != CUBLAS_STATUS_SUCCESS) {
        throw new IllegalStateException("cuBLAS could not be set up on GPU " + device);
      }
      loadKernels();
      int scoreBytes = 4 * s.context();  // attention's dynamic shared memory: a score per position
      if (scoreBytes > 48 * 1024) {
        int[] most = new int[1];
        cuda(cudaDeviceGetAttribute(most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
        if (scoreBytes > most[0]) {
          throw new IllegalArgumentException("a context of " + s.context() + " positions needs " + scoreBytes
              + " bytes of shared memory per attention block; GPU " + device + " gives at most " + most[0]
              + ": use a context of at most " + most[0] / 4);
        }
        driver(cuFuncSetAttribute(fAttention, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, scoreBytes),
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
      x = alloc((long) b * h);
      xn = alloc((long) b * h);
      q = alloc((long) b * qw);
      k = alloc((long) b * kvw);
      v = alloc((long) b * kvw);
      att = alloc((long) b * qw);
      out = alloc((long) b * h);
      gate = alloc((long) b * iw);
      up = alloc((long) b * iw);
      part = alloc((long) b * vw);
      gathered = alloc((long) shard.tp() * b * vw);
      tokens = alloc(b);
      pos = alloc(1);
      sync();
    } catch (RuntimeException | Error e) {
      close();  // what was made so far: a half-built decoder holds no GPU memory
      throw e;
    }
  }

  /** @return the rank's stream (its address is what Colibri's device calls take) */
  public CUstream_st stream() {
    return stream;
  }

  /**
   * Sets the tokens of the next step and its position (stream-ordered copies).
   *
   * @param next one token per sequence
   * @param position the position
   */
  public void setInput(int[] next, int position) {
    if (next.length != b) {
      throw new IllegalArgumentException(next.length + " tokens for a batch of " + b);
    }
    for (int t : next) {
      if (t < 0 || t >= s.vocab()) {
        throw new IllegalArgumentException("token " + t + " is outside the vocabulary of " + s.vocab());
      }
    }
    if (position < 0 || position >= s.context()) {
      throw new IllegalArgumentException("position " + position + " is outside the KV cache's "
          + s.context() + " positions");
    }
    this.position = position;
    IntPointer t = new IntPointer(next);
    IntPointer p = new IntPointer(new int[] {position});
    cuda(cudaMemcpyAsync(tokens, t, 4L * b, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    cuda(cudaMemcpyAsync(pos, p, 4, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    sync();  // the host copies' sources live until here
    t.close();
    p.close();
  }

  /**
   * Enqueues one step on the rank's stream: the model at the device position for the device
   * tokens, then the next tokens (argmax) and position into their device words.
   */
  public void enqueueStep() {
    step();
    enqueue();
  }

  /** Counts a step on the host: one past the KV cache's last position is refused, not written. */
  private void step() {
    if (position >= s.context()) {
      throw new IllegalStateException("the KV cache's " + s.context() + " positions are full");
    }
    position++;
  }

  private void enqueue() {
    launch(fEmbed, b, 1, 0, embed, tokens, x, h);
    for (int l = 0; l < s.layers(); l++) {
      launch(fNorm, b, 1, 0, x, xn, h, ModelShape.NORM_EPS);
      gemm(xn, wq[l], q, h, qw);
      gemm(xn, wk[l], k, h, kvw);
      gemm(xn, wv[l], v, h, kvw);
      launch(fRope, b, 1, 0, q, nh, d, pos, ModelShape.ROPE_THETA);
      launch(fRope, b, 1, 0, k, nkv, d, pos, ModelShape.ROPE_THETA);
      launch(fCache, b, 1, 0, k, v, kcache[l], vcache[l], nkv, s.context(), d, pos);
      launch(fAttention, nh, b, 4 * s.context(), q, kcache[l], vcache[l], att, nh, nkv, s.context(), d, pos);
      gemm(att, wo[l], out, qw, h);
      comm.allReduceSum(out, (long) b * h, stream);
      launch(fAdd, blocks((long) b * h), 1, 0, x, out, (long) b * h);
      launch(fNorm, b, 1, 0, x, xn, h, ModelShape.NORM_EPS);
      gemm(xn, wgate[l], gate, h, iw);
      gemm(xn, wup[l], up, h, iw);
      launch(fSiluMul, blocks((long) b * iw), 1, 0, gate, up, (long) b * iw);
      gemm(gate, wdown[l], out, iw, h);
      comm.allReduceSum(out, (long) b * h, stream);
      launch(fAdd, blocks((long) b * h), 1, 0, x, out, (long) b * h);
    }
    launch(fNorm, b, 1, 0, x, xn, h, ModelShape.NORM_EPS);
    gemm(xn, head, part, h, vw);
    comm.allGather(part, gathered, (long) b * vw, stream);
    launch(fArgmax, b, 1, 0, gathered, tokens, shard.tp(), b, vw);
    launch(fAdvance, 1, 1, 0, pos);
  }

  /** Captures {@link #enqueueStep()} in a CUDA graph, instantiates and uploads it. */
  public void captureStep() {
    cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    CUgraph_st g = new CUgraph_st();
    try {
      enqueue();
    } catch (RuntimeException e) {
      cudaStreamEndCapture(stream, g);  // ends the capture; the first error is the one to report
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
    step();
    comm.launchGraph(graph, stream);
  }

  /**
   * Greedy generation as {@link Generation#run} does it on the CPU: the prompt one position per
   * step (eager), then {@code newTokens} steps, eager or as replays of one captured step. Each
   * generated step's time runs from its launch to its tokens on the host (the logits kept for
   * the check are copied after that).
   *
   * @param seed the prompt's seed
   * @param promptLength prompt tokens per sequence
   * @param newTokens tokens to generate per sequence
   * @param keepLogits whether to copy every step's logits to the host (for the check)
   * @param useGraph whether to capture the step once and replay it
   * @return what was generated
   */
  public Generation generate(long seed, int promptLength, int newTokens, boolean keepLogits,
      boolean useGraph) {
    if (promptLength < 1 || newTokens < 1 || promptLength + newTokens > s.context()) {
      throw new IllegalArgumentException("prompt " + promptLength + " + new " + newTokens
          + " tokens must be 2 or more and fit the context of " + s.context());
    }
    int[][] prompt = Generation.prompt(s, seed, promptLength);
    long first = 0;
    for (int p = 0; p < promptLength; p++) {
      long t0 = System.nanoTime();
      setInput(prompt[p], p);
      enqueueStep();
      if (p == 0) {
        sync();
        first = System.nanoTime() - t0;
      }
    }
    sync();
    if (useGraph) {
      captureStep();
    }
    int[][] out = new int[newTokens][b];
    List<float[]> kept = new ArrayList<>();
    long[] times = new long[newTokens];
    float[] logits = keepLogits ? new float[b * s.vocab()] : null;
    for (int n = 0; n < newTokens; n++) {
      long t0 = System.nanoTime();
      if (useGraph) {
        replay();
      } else {
        enqueueStep();
      }
      read(null, out[n]);
      times[n] = System.nanoTime() - t0;
      if (keepLogits) {
        // Outside the step's time: the check's copy of the whole vocabulary's logits (2 MiB at
        // batch 16 and 32000 words) to pageable host memory took longer than the step itself.
        read(logits, out[n]);
        kept.add(logits.clone());
      }
    }
    return new Generation(out, kept, times, first);
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
    FloatPointer g = logitsOut == null ? null : new FloatPointer((long) shard.tp() * b * vw);
    cuda(cudaMemcpyAsync(t, tokens, 4L * b, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    if (g != null) {
      cuda(cudaMemcpyAsync(g, gathered, 4L * shard.tp() * b * vw, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    }
    sync();
    comm.checkHealthy();
    t.get(nextOut);
    if (g != null) {
      float[] all = new float[shard.tp() * b * vw];
      g.get(all);
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
    try (SizeTPointer free = new SizeTPointer(1); SizeTPointer total = new SizeTPointer(1)) {
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
      throw new IllegalStateException("the CUDA runtime could not be loaded through the org.bytedeco"
          + " CUDA presets (" + e + "): the GPU decoder needs the NVIDIA driver (libcuda.so.1) and the"
          + " CUDA 13 runtime (libcudart.so.13) on the library path", e);
    }
  }

  private void loadKernels() {
    byte[] ptx;
    try (InputStream in = DeviceDecoder.class.getResourceAsStream(PTX)) {
      if (in == null) {
        throw new IllegalStateException("colibri_decode_kernels.ptx is not in this jar: build"
            + " colibri-bench with nvcc on the path (colibri-native's CMake build makes it)");
      }
      ptx = in.readAllBytes();
    } catch (IOException e) {
      throw new IllegalStateException("could not read colibri_decode_kernels.ptx: " + e, e);
    }
    byte[] z = java.util.Arrays.copyOf(ptx, ptx.length + 1);  // the driver wants it 0-terminated
    try (BytePointer image = new BytePointer(z)) {
      driver(cuModuleLoadData(module, image), "cuModuleLoadData of the decode kernels");
    }
    String[] names = KERNELS.toArray(new String[0]);
    CUfunc_st[] fs = {fEmbed, fNorm, fRope, fCache, fAttention, fSiluMul, fAdd, fArgmax, fAdvance};
    for (int i = 0; i < names.length; i++) {
      driver(cuModuleGetFunction(fs[i], module, names[i]), "cuModuleGetFunction(" + names[i] + ")");
    }
  }

  private Pointer alloc(long floats) {
    Pointer p = new Pointer();
    cuda(cudaMalloc(p, 4 * floats), "cudaMalloc of " + 4 * floats + " bytes");
    allocations.add(p);
    cuda(cudaMemsetAsync(p, 0, 4 * floats, stream), "cudaMemsetAsync");  // in the stream's order
    return p;
  }

  /** This rank's block of a matrix, drawn on the host and copied to the GPU. */
  private Pointer upload(SeededWeights w, Matrix m, int layer) {
    float[] a = new float[shard.rows(m).size() * shard.columns(m).size()];
    w.fill(a, m, layer, s, shard.rows(m), shard.columns(m));
    Pointer p = alloc(a.length);
    try (FloatPointer src = new FloatPointer(a)) {
      cuda(cudaMemcpyAsync(p, src, 4L * a.length, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
      sync();
    }
    return p;
  }

  /** y[b][n] = a[b][kk] · w[kk][n], row-major, as cuBLAS's column-major y^T = w^T · a^T. */
  private void gemm(Pointer a, Pointer w, Pointer y, int kk, int n) {
    int rc = cublasSgemm_v2(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, b, kk, one, new FloatPointer(w), n,
        new FloatPointer(a), kk, zero, new FloatPointer(y), n);
    if (rc != CUBLAS_STATUS_SUCCESS) {
      throw new IllegalStateException("cublasSgemm failed (status " + rc + ") for " + b + " x " + kk
          + " x " + n);
    }
  }

  /** Pointers to each 8-byte slot of {@code values} (exact addresses: no JavaCPP position involved). */
  static PointerPointer<Pointer> slots(LongPointer values) {
    PointerPointer<Pointer> p = new PointerPointer<>(MAX_ARGS);
    for (int i = 0; i < MAX_ARGS; i++) {
      final long at = values.address() + 8L * i;
      p.put(i, new Pointer() {
        {
          address = at;
        }
      });
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
      throw new IllegalArgumentException(args.length + " kernel arguments: the slots hold " + MAX_ARGS);
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
    driver(cuLaunchKernel(f, gx, gy, 1, THREADS, 1, 1, smem, stream, argSlots, null), "cuLaunchKernel");
  }

  private static void cuda(int rc, String what) {
    if (rc != cudaSuccess) {
      BytePointer text = cudaGetErrorString(rc);
      throw new IllegalStateException(what + " failed: " + (text == null ? "error " + rc : text.getString()));
    }
  }

  private static void driver(int rc, String what) {
    if (rc != CUDA_SUCCESS) {
      throw new IllegalStateException(what + " failed: CUresult " + rc);
    }
  }
}
