/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.Algorithm;
import io.colibri.ColibriException;
import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.ErrorCode;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.Transport;
import io.colibri.UniqueId;
import io.colibri.jni.Device;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Device collectives from Java on GPU 0, ranks as threads, each with its own stream: all four
 * collectives on DeviceBuffers, poisoned outputs, element-wise checks. Tagged gpu; where there is
 * no GPU (CI) every test is skipped with the driver's reason. scripts/gpu-check.sh runs them on a
 * GPU host.
 */
@Tag("gpu")
class DeviceCollectivesGpuTest {

  @BeforeEach
  void needsAGpu() {
    assumeAGpu();
  }

  /** Skips the calling test (JUnit assumption, with the driver's reason) where there is no GPU. */
  static void assumeAGpu() {
    String why = null;
    try {
      if (Device.count() == 0) {
        why = "the CUDA driver sees no GPU";
      }
    } catch (ColibriException e) {
      why = e.getMessage();
    }
    Assumptions.assumeTrue(why == null, "skipped, no GPU here: " + why);
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 4, 8})
  @Timeout(120)
  void allFourCollectivesOnDeviceBuffers(int n) throws Exception {
    UniqueId id = UniqueId.create();
    inThreads(n, rank -> runRank(id, rank, n));
  }

  /** What one rank does (a thread of {@link #inThreads}). */
  interface RankBody {
    void run(int rank) throws Exception;
  }

  /** Runs body(rank) for ranks 0..n-1 on threads; the first failure is rethrown. */
  static void inThreads(int n, RankBody body) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(n);
    try {
      List<Future<?>> ranks = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        final int rank = r;
        ranks.add(
            pool.submit(
                () -> {
                  body.run(rank);
                  return null;
                }));
      }
      for (Future<?> f : ranks) {
        f.get(100, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  private static float input(int rank, int i) {
    return (rank + 1) * 1000 + i % 997;
  }

  private static void runRank(UniqueId id, int rank, int n) {
    int count = 100_003;
    try (Communicator comm = Communicator.init(id, rank, n);
        CudaStream stream = CudaStream.create(0);
        DeviceBuffer send = DeviceBuffer.allocate((long) count * 4 * n, 0);
        DeviceBuffer recv = DeviceBuffer.allocate((long) count * 4 * n, 0)) {
      ByteBuffer host = ByteBuffer.allocateDirect(count * 4 * n).order(ByteOrder.nativeOrder());
      for (int i = 0; i < count * n; i++) {
        host.putFloat(4 * i, input(rank, i));
      }
      send.copyFrom(host);
      ByteBuffer poison = ByteBuffer.allocateDirect(count * 4 * n);
      for (int i = 0; i < count * 4 * n; i++) {
        poison.put(i, (byte) 0xA5);
      }
      ByteBuffer out = ByteBuffer.allocateDirect(count * 4 * n).order(ByteOrder.nativeOrder());

      recv.copyFrom(poison);
      comm.allReduce(
          send.address(), recv.address(), count, DataType.FLOAT32, ReduceOp.SUM, stream.handle());
      stream.synchronize();
      assertEquals(Algorithm.DIRECT, comm.lastAlgorithm());
      recv.copyTo(out.limit(count * 4));
      for (int i = 0; i < count; i++) {
        float want = 0;
        for (int p = 0; p < n; p++) {
          want += input(p, i);
        }
        assertEquals(want, out.getFloat(4 * i), "allReduce rank " + rank + " element " + i);
      }

      recv.copyFrom(poison);
      comm.allGather(send.address(), recv.address(), count, DataType.FLOAT32, stream.handle());
      stream.synchronize();
      recv.copyTo(out.clear());
      for (int p = 0; p < n; p++) {
        for (int i = 0; i < count; i += 7) {
          assertEquals(input(p, i), out.getFloat(4 * (p * count + i)), "allGather from " + p);
        }
      }

      recv.copyFrom(poison);
      comm.reduceScatter(
          send.address(), recv.address(), count, DataType.FLOAT32, ReduceOp.MAX, stream.handle());
      stream.synchronize();
      recv.copyTo(out.clear().limit(count * 4));
      for (int i = 0; i < count; i++) {
        assertEquals(input(n - 1, rank * count + i), out.getFloat(4 * i), "reduceScatter max " + i);
      }

      recv.copyFrom(poison);
      comm.broadcast(send.address(), recv.address(), count, DataType.FLOAT32, 0, stream.handle());
      stream.synchronize();
      recv.copyTo(out.clear().limit(count * 4));
      for (int i = 0; i < count; i += 3) {
        assertEquals(input(0, i), out.getFloat(4 * i), "broadcast " + i);
      }
      assertTrue(comm.memoryStats().deviceBytes() > 0, "device staging is counted");
      assertTrue(comm.transportInfo().contains("kernels colibri_kernels_sm"), comm.transportInfo());
    }
  }

  /**
   * Transport verbs between ranks that share no memory: device buffers go over GPUDirect RDMA
   * (GPU memory registered as dma-bufs; here over the verbs emulator, the native build's stand-in
   * libibverbs.so.1, which reaches them through the driver). scripts/gpu-check.sh puts the
   * stand-in on the library path, the verbs plugin in COLIBRI_PLUGIN_DIR and sets
   * -Dcolibri.test.verbsEmulator=true for these tests.
   */
  @Test
  @Timeout(120)
  void verbsBetweenHostsGoesOverGpuDirect() throws Exception {
    Assumptions.assumeTrue(
        Boolean.getBoolean("colibri.test.verbsEmulator"),
        "skipped: needs -Dcolibri.test.verbsEmulator=true with the verbs emulator as libibverbs"
            + " (no RDMA device here)");
    int n = 2;
    int count = 300_007;
    UniqueId id = UniqueId.create();
    inThreads(
        n,
        rank -> {
          Options o = Options.builder().transport(Transport.VERBS).verbsQpsPerConnection(2).build();
          try (Communicator comm = Communicator.init(id, rank, n, o);
              CudaStream stream = CudaStream.create(0);
              DeviceBuffer send = DeviceBuffer.allocate((long) count * 4, 0);
              DeviceBuffer recv = DeviceBuffer.allocate((long) count * 4 * n, 0)) {
            ByteBuffer host =
                ByteBuffer.allocateDirect(count * 4 * n).order(ByteOrder.nativeOrder());
            for (int i = 0; i < count; i++) {
              host.putFloat(4 * i, input(rank, i));
            }
            send.copyFrom(host.limit(count * 4));
            comm.allReduce(
                send.address(),
                recv.address(),
                count,
                DataType.FLOAT32,
                ReduceOp.SUM,
                stream.handle());
            stream.synchronize();
            recv.copyTo(host.clear().limit(count * 4));
            for (int i = 0; i < count; i++) {
              assertEquals(
                  input(0, i) + input(1, i), host.getFloat(4 * i), "allReduce element " + i);
            }
            comm.allGather(
                send.address(), recv.address(), count, DataType.FLOAT32, stream.handle());
            stream.synchronize();
            recv.copyTo(host.clear());
            for (int p = 0; p < n; p++) {
              for (int i = 0; i < count; i++) {
                assertEquals(
                    input(p, i), host.getFloat(4 * (p * count + i)), "allGather from " + p);
              }
            }
            String info = comm.transportInfo();
            assertTrue(info.contains("GPUDirect RDMA through dma-buf"), info);
            assertTrue(info.contains("2 queue pairs per link"), info);
            assertTrue(comm.memoryStats().deviceBytes() > 0, "registered GPU memory is counted");
          }
        });
  }

  @Test
  @Timeout(60)
  void hostBuffersWithAStreamAreRefused() {
    try (Communicator comm = Communicator.init(UniqueId.create(), 0, 1);
        CudaStream stream = CudaStream.create(0)) {
      ByteBuffer a = ByteBuffer.allocateDirect(64);
      long addr = io.colibri.jni.Device.address(a);
      ColibriException e =
          assertThrows(
              ColibriException.class,
              () -> comm.allReduce(addr, addr, 4, DataType.FLOAT32, ReduceOp.SUM, stream.handle()));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
      assertTrue(e.getMessage().contains("host memory"), e.getMessage());
    }
  }
}
