/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.jmh;

import static org.bytedeco.cuda.global.nccl.ncclAllReduce;
import static org.bytedeco.cuda.global.nccl.ncclFloat32;
import static org.bytedeco.cuda.global.nccl.ncclGroupEnd;
import static org.bytedeco.cuda.global.nccl.ncclGroupStart;
import static org.bytedeco.cuda.global.nccl.ncclSum;

import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ReduceOp;
import io.colibri.UniqueId;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Does everything load, and does one collective give the right sum? Run before the benchmarks on a
 * GPU host ({@code java -cp colibri-jmh.jar io.colibri.bench.jmh.Probe}): prints the Java, CUDA
 * runtime, driver and NCCL versions and the GPUs, then runs a 1024-element float32 allReduce with
 * Colibri (ranks as threads) and with NCCL (one thread) on every visible GPU and checks every
 * element. Exit code 0 when all of it worked, 2 when CUDA cannot be loaded or sees no GPU (only
 * the host-path benchmarks can run), 1 for any other failure; every failure is printed with its
 * reason, and the probe goes on with what does not depend on it.
 */
public final class Probe {
  private Probe() {}

  static final int COUNT = 1024;

  /**
   * Runs the probe, printing to standard output, and exits with its code (0, 1 or 2, above).
   *
   * @param args ignored
   */
  public static void main(String[] args) {
    System.exit(run(System.out));
  }

  static int run(PrintStream out) {
    boolean ok = true;
    out.println(
        "# probe: Java "
            + System.getProperty("java.version")
            + " ("
            + System.getProperty("java.vm.name")
            + "), "
            + System.getProperty("os.name")
            + " "
            + System.getProperty("os.arch"));
    try (Communicator c = Communicator.init(UniqueId.create(), 0, 1)) {
      ByteBuffer b = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
      b.putFloat(0, 3f).putFloat(4, 4f);
      c.allReduce(b, b, 2, DataType.FLOAT32, ReduceOp.SUM);
      out.println(
          "# colibri: native library loaded, 1-rank host allReduce "
              + (b.getFloat(0) == 3f && b.getFloat(4) == 4f ? "OK" : "WRONG"));
    } catch (RuntimeException | LinkageError e) {
      ok = false;
      out.println("# colibri: FAILED to load or run on the host: " + e);
    }
    int gpus;
    try {
      Cuda.load();
      out.println(
          "# cuda: runtime "
              + Cuda.versionText(Cuda.runtimeVersion())
              + ", driver API "
              + Cuda.versionText(Cuda.driverVersion())
              + " (presets org.bytedeco:cuda built for 13.3)");
      gpus = Cuda.deviceCount();
      out.println("# cuda: " + gpus + " GPU(s) visible");
      for (int d = 0; d < gpus; d++) {
        out.println("#   GPU " + d + ": " + Cuda.describeDevice(d));
      }
    } catch (RuntimeException | LinkageError e) {
      out.println("# cuda: FAILED: " + e.getMessage());
      out.println("# probe: FAILED (no CUDA: only CallOverhead.colibriHost* can run here)");
      return 2;
    }
    boolean nccl;
    try {
      Nccl.load();
      out.println(
          "# nccl: "
              + Nccl.versionText(Nccl.version())
              + " loaded (presets built against"
              + " the headers of 2.30.7)");
      nccl = true;
    } catch (RuntimeException | LinkageError e) {
      ok = false;
      nccl = false;
      out.println("# nccl: FAILED: " + e.getMessage());
    }
    if (gpus == 0) {
      out.println("# probe: FAILED (no GPU visible: only CallOverhead.colibriHost* can run here)");
      return 2;
    }
    try {
      String result = colibriDevice(gpus, out);
      ok &= result.startsWith("OK");
      out.println("# colibri device allReduce, " + gpus + " rank(s), one per GPU: " + result);
    } catch (RuntimeException | LinkageError e) {
      ok = false;
      out.println("# colibri device allReduce: FAILED: " + e);
    }
    if (nccl) {
      try {
        String result = ncclDevice(gpus);
        ok &= result.startsWith("OK");
        out.println("# nccl device allReduce, " + gpus + " rank(s), one per GPU: " + result);
      } catch (RuntimeException | LinkageError e) {
        ok = false;
        out.println("# nccl device allReduce: FAILED: " + e);
      }
    }
    out.println("# probe: " + (ok ? "OK" : "FAILED"));
    return ok ? 0 : 1;
  }

  private static float input(int rank, int i) {
    return rank + 1 + (i % 7);
  }

  /** Rank r's input on GPU r: a zeroed recv buffer, a send buffer with {@link #input}. */
  private static Pointer[] buffers(int rank) {
    Pointer send = Cuda.malloc(COUNT * 4L, rank);
    Pointer recv = Cuda.malloc(COUNT * 4L, rank);
    try (FloatPointer host = new FloatPointer(COUNT)) {
      for (int i = 0; i < COUNT; i++) {
        host.put(i, input(rank, i));
      }
      Cuda.copy(send, host, COUNT * 4L);
    }
    return new Pointer[] {send, recv};
  }

  /** "OK" or a description of the first wrong element. */
  private static String check(Pointer recv, int rank, int n) {
    try (FloatPointer host = new FloatPointer(COUNT)) {
      Cuda.copy(host, recv, COUNT * 4L);
      for (int i = 0; i < COUNT; i++) {
        float want = 0;
        for (int p = 0; p < n; p++) {
          want += input(p, i);
        }
        if (host.get(i) != want) {
          return "WRONG: rank " + rank + " element " + i + " is " + host.get(i) + ", not " + want;
        }
      }
    }
    return "OK";
  }

  private static String colibriDevice(int n, PrintStream out) {
    UniqueId id = UniqueId.create();
    String[] result = new String[n];
    String[] info = new String[1];
    RankThreads.run(
        "probe",
        n,
        50,
        r -> {
          Pointer[] b = buffers(r);
          CUstream_st s = Cuda.createStream(r);
          try (Communicator c = Communicator.init(id, r, n)) {
            c.allReduce(
                b[0].address(), b[1].address(), COUNT, DataType.FLOAT32, ReduceOp.SUM, s.address());
            Cuda.synchronize(s);
            result[r] = check(b[1], r, n);
            if (r == 0) {
              info[0] = c.transportInfo();
            }
          } finally {
            Cuda.setDevice(r);
            Cuda.free(b[0]);
            Cuda.free(b[1]);
            Cuda.destroy(s);
          }
        });
    for (String line : info[0].split("\n")) {
      out.println("#   colibri rank 0: " + line);
    }
    return summary(result);
  }

  private static String ncclDevice(int n) {
    int[] devices = new int[n];
    for (int r = 0; r < n; r++) {
      devices[r] = r;
    }
    Pointer[][] b = new Pointer[n][];
    CUstream_st[] s = new CUstream_st[n];
    for (int r = 0; r < n; r++) {
      b[r] = buffers(r);
      s[r] = Cuda.createStream(r);
    }
    ncclComm[] comms = Nccl.initAll(devices);
    String[] result = new String[n];
    try {
      if (n > 1) {
        Nccl.check(ncclGroupStart(), "ncclGroupStart", null);
      }
      for (int r = 0; r < n; r++) {
        Nccl.check(
            ncclAllReduce(b[r][0], b[r][1], COUNT, ncclFloat32, ncclSum, comms[r], s[r]),
            "ncclAllReduce",
            comms[r]);
      }
      if (n > 1) {
        Nccl.check(ncclGroupEnd(), "ncclGroupEnd", null);
      }
      for (int r = 0; r < n; r++) {
        Cuda.synchronize(s[r]);
        Nccl.checkAsync(comms[r]);
        result[r] = check(b[r][1], r, n);
      }
    } finally {
      Nccl.destroyAll(comms);
      for (int r = 0; r < n; r++) {
        Cuda.setDevice(r);
        Cuda.free(b[r][0]);
        Cuda.free(b[r][1]);
        Cuda.destroy(s[r]);
      }
    }
    return summary(result);
  }

  private static String summary(String[] perRank) {
    for (String s : perRank) {
      if (!"OK".equals(s)) {
        return s;
      }
    }
    return "OK (all " + COUNT + " elements on every rank)";
  }
}
