/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.bytedeco.cuda.global.cudart.cuDeviceGet;
import static org.bytedeco.cuda.global.cudart.cuDeviceGetName;
import static org.bytedeco.cuda.global.cudart.cudaDevAttrComputeCapabilityMajor;
import static org.bytedeco.cuda.global.cudart.cudaDevAttrComputeCapabilityMinor;
import static org.bytedeco.cuda.global.cudart.cudaDeviceGetAttribute;
import static org.bytedeco.cuda.global.cudart.cudaDriverGetVersion;
import static org.bytedeco.cuda.global.cudart.cudaFree;
import static org.bytedeco.cuda.global.cudart.cudaGetDeviceCount;
import static org.bytedeco.cuda.global.cudart.cudaGetErrorName;
import static org.bytedeco.cuda.global.cudart.cudaGetErrorString;
import static org.bytedeco.cuda.global.cudart.cudaGraphDestroy;
import static org.bytedeco.cuda.global.cudart.cudaGraphExecDestroy;
import static org.bytedeco.cuda.global.cudart.cudaGraphInstantiate;
import static org.bytedeco.cuda.global.cudart.cudaGraphLaunch;
import static org.bytedeco.cuda.global.cudart.cudaGraphUpload;
import static org.bytedeco.cuda.global.cudart.cudaMalloc;
import static org.bytedeco.cuda.global.cudart.cudaMemcpy;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDefault;
import static org.bytedeco.cuda.global.cudart.cudaMemset;
import static org.bytedeco.cuda.global.cudart.cudaRuntimeGetVersion;
import static org.bytedeco.cuda.global.cudart.cudaSetDevice;
import static org.bytedeco.cuda.global.cudart.cudaStreamBeginCapture;
import static org.bytedeco.cuda.global.cudart.cudaStreamCaptureModeThreadLocal;
import static org.bytedeco.cuda.global.cudart.cudaStreamCreateWithFlags;
import static org.bytedeco.cuda.global.cudart.cudaStreamDestroy;
import static org.bytedeco.cuda.global.cudart.cudaStreamEndCapture;
import static org.bytedeco.cuda.global.cudart.cudaStreamNonBlocking;
import static org.bytedeco.cuda.global.cudart.cudaStreamSynchronize;
import static org.bytedeco.cuda.global.cudart.cudaSuccess;

import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUgraph_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;

/**
 * The CUDA runtime through the org.bytedeco CUDA presets (JNI only: the presets bring no CUDA
 * libraries, they load the driver's libcuda.so.1 and the installed libcudart.so.13). Device
 * memory, non-blocking streams and CUDA graphs for both libraries of the benchmarks, with every
 * return code checked. {@link #load()} turns a failure to load into one clear message.
 */
final class Cuda {
  private Cuda() {}

  private static boolean loaded;
  private static RuntimeException failure;

  /** Loads the presets' CUDA runtime binding, or throws an IllegalStateException saying why not. */
  static synchronized void load() {
    if (loaded) {
      return;
    }
    if (failure != null) {
      throw failure;
    }
    try {
      Loader.load(org.bytedeco.cuda.global.cudart.class);
      int[] v = new int[1];
      cudaRuntimeGetVersion(v);
      loaded = true;
    } catch (LinkageError | RuntimeException e) {
      failure =
          new IllegalStateException(
              "the CUDA runtime could not be loaded through the"
                  + " org.bytedeco CUDA presets ("
                  + describe(e)
                  + "). They need the NVIDIA driver (libcuda.so.1) and the CUDA 13 runtime"
                  + " (libcudart.so.13) on the library path (ldconfig, or"
                  + " LD_LIBRARY_PATH=/usr/local/cuda/lib64); GPU benchmarks cannot run on this"
                  + " machine. -Dorg.bytedeco.javacpp.logger.debug=true shows what JavaCPP tried",
              e);
      throw failure;
    }
  }

  /** The innermost cause's class and message, e.g. "UnsatisfiedLinkError: libcuda.so.1: ...". */
  static String describe(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
    }
    return t.getClass().getSimpleName() + ": " + t.getMessage();
  }

  static void check(int rc, String what) {
    if (rc != cudaSuccess) {
      throw new IllegalStateException(what + " failed: " + errorText(rc));
    }
  }

  static String errorText(int rc) {
    BytePointer name = cudaGetErrorName(rc);
    BytePointer text = cudaGetErrorString(rc);
    return (name == null ? "cudaError " + rc : name.getString())
        + " ("
        + rc
        + "): "
        + (text == null ? "" : text.getString());
  }

  /** GPUs the runtime sees (CUDA_VISIBLE_DEVICES applies). */
  static int deviceCount() {
    load();
    int[] n = new int[1];
    check(cudaGetDeviceCount(n), "cudaGetDeviceCount");
    return n[0];
  }

  static void setDevice(int device) {
    check(cudaSetDevice(device), "cudaSetDevice(" + device + ")");
  }

  /** "13.0" from 13000. */
  static String versionText(int v) {
    return (v / 1000) + "." + (v % 1000) / 10;
  }

  static int runtimeVersion() {
    load();
    int[] v = new int[1];
    check(cudaRuntimeGetVersion(v), "cudaRuntimeGetVersion");
    return v[0];
  }

  static int driverVersion() {
    load();
    int[] v = new int[1];
    check(cudaDriverGetVersion(v), "cudaDriverGetVersion");
    return v[0];
  }

  /** "NVIDIA H200, compute capability 9.0". */
  static String describeDevice(int device) {
    int[] major = new int[1];
    int[] minor = new int[1];
    check(
        cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device),
        "cudaDeviceGetAttribute");
    check(
        cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device),
        "cudaDeviceGetAttribute");
    String name = "GPU " + device;
    int[] dev = new int[1];
    byte[] buf = new byte[256];
    if (cuDeviceGet(dev, device) == 0 && cuDeviceGetName(buf, buf.length, dev[0]) == 0) {
      int end = 0;
      while (end < buf.length && buf[end] != 0) {
        end++;
      }
      name = new String(buf, 0, end, java.nio.charset.StandardCharsets.UTF_8);
    }
    return name + ", compute capability " + major[0] + "." + minor[0];
  }

  /** {@code bytes} of zeroed memory on {@code device} (which becomes the current device). */
  static Pointer malloc(long bytes, int device) {
    setDevice(device);
    Pointer p = new Pointer();
    check(cudaMalloc(p, bytes), "cudaMalloc of " + bytes + " bytes on GPU " + device);
    check(cudaMemset(p, 0, bytes), "cudaMemset");
    return p;
  }

  static void free(Pointer p) {
    if (p != null && !p.isNull()) {
      cudaFree(p);
      p.setNull();
    }
  }

  /** Copies {@code bytes} between host and device memory (or any two), waiting. */
  static void copy(Pointer dst, Pointer src, long bytes) {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy of " + bytes + " bytes");
  }

  /** A new non-blocking stream on {@code device} (which becomes the current device). */
  static CUstream_st createStream(int device) {
    setDevice(device);
    CUstream_st s = new CUstream_st();
    check(
        cudaStreamCreateWithFlags(s, cudaStreamNonBlocking),
        "cudaStreamCreateWithFlags on GPU " + device);
    return s;
  }

  static void destroy(CUstream_st s) {
    if (s != null && !s.isNull()) {
      cudaStreamDestroy(s);
      s.setNull();
    }
  }

  static void synchronize(CUstream_st s) {
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }

  /** Starts capturing {@code s} into a graph (thread-local mode: other threads are not affected). */
  static void beginCapture(CUstream_st s) {
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  }

  static CUgraph_st endCapture(CUstream_st s) {
    CUgraph_st g = new CUgraph_st();
    check(cudaStreamEndCapture(s, g), "cudaStreamEndCapture");
    return g;
  }

  static CUgraphExec_st instantiate(CUgraph_st g) {
    CUgraphExec_st e = new CUgraphExec_st();
    check(cudaGraphInstantiate(e, g, 0L), "cudaGraphInstantiate");
    return e;
  }

  static void upload(CUgraphExec_st e, CUstream_st s) {
    check(cudaGraphUpload(e, s), "cudaGraphUpload");
  }

  static void launch(CUgraphExec_st e, CUstream_st s) {
    check(cudaGraphLaunch(e, s), "cudaGraphLaunch");
  }

  static void destroy(CUgraphExec_st e) {
    if (e != null && !e.isNull()) {
      cudaGraphExecDestroy(e);
      e.setNull();
    }
  }

  static void destroy(CUgraph_st g) {
    if (g != null && !g.isNull()) {
      cudaGraphDestroy(g);
      g.setNull();
    }
  }
}
