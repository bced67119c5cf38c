/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.cuda;

import io.colibri.Communicator;
import io.colibri.DataType;
import io.colibri.Options;
import io.colibri.ReduceOp;
import io.colibri.UniqueId;
import io.colibri.jni.Device;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;

/**
 * One rank in a JVM of its own, on device memory: started by {@link
 * DeviceCollectivesProcessGpuTest}, which gives every child the same id.
 *
 * <pre>
 *   java -cp CLASSPATH io.colibri.cuda.DeviceRankProcess RANK NRANKS
 *   environment: CLB_TEST_UNIQUE_ID  the id as UniqueId.toString() (kept off the command line:
 *                                    it holds the bootstrap secret)
 *                CLB_TEST_SPREAD=1   rank r on GPU r % (number of GPUs), else every rank on GPU 0
 *                CLB_TEST_REGISTER=1 registered buffers (zero copy), see below
 * </pre>
 *
 * <p>Runs allReduce (sum: float32, bfloat16, int32), allGather (float32, bfloat16), reduceScatter
 * (sum: float32, bfloat16) and broadcast (float32, bfloat16, roots varying) with 1, 7, 65 537 and
 * 1 000 003 elements, out of place and in place, on DeviceBuffers and its own CudaStream. Every
 * output (and 64 bytes after it) is poisoned first. Every rank computes every rank's input from a
 * hash of (call, rank, index), so the reference is computed here on the host, element by element:
 * sums in rank order, float32 accumulation (bfloat16 inputs widened to float32 and the sum rounded
 * once, to nearest even), int32 wrapping. Copies and data are compared bit for bit; a float sum
 * that is not bit-identical to the rank-order sum is accepted only within the error bound of
 * docs/semantics.md (and counted in the summary line). At the end the communicator must hold
 * device memory and name the kernel image it loaded (the device path ran).
 *
 * <p>With CLB_TEST_REGISTER=1 every rank registers its send and recv buffers ({@link
 * DeviceBuffer#register}) before the calls, runs the same calls with 262 144 elements only (1 MiB
 * of float32 per rank: above the LL limit, so the registered path runs) and checks them the same
 * way; after every call the transport info's "last call" fact must say "zero copy". It closes the
 * registrations (twice: the second does nothing) before the buffers and the communicator.
 *
 * <p>Uses java.base only (the GPU host runs a trimmed JRE). Exit 0: every element matched; 1: a
 * mismatch (the first of each call on stderr: rank, collective, element index, got, want; the
 * rank keeps going so that its peers are not left waiting); 2: an exception (stack on stderr).
 */
public final class DeviceRankProcess {
  /** Environment variable that carries the id's text. */
  public static final String ID_ENV = "CLB_TEST_UNIQUE_ID";

  /** Environment variable that spreads the ranks over every GPU when "1". */
  public static final String SPREAD_ENV = "CLB_TEST_SPREAD";

  /** Environment variable that registers the send and recv buffers when "1". */
  public static final String REGISTER_ENV = "CLB_TEST_REGISTER";

  static final long[] COUNTS = {1, 7, 65_537, 1_000_003};

  /** With registered buffers: 1 MiB of float32 per rank, above the LL limit. */
  static final long[] REGISTERED_COUNTS = {262_144};

  /** Poisoned bytes after every output, checked after the call. */
  static final int GUARD = 64;

  static final byte POISON = (byte) 0xA5;

  private enum Coll {
    ALL_REDUCE("allReduce"),
    ALL_GATHER("allGather"),
    REDUCE_SCATTER("reduceScatter"),
    BROADCAST("broadcast");

    final String label;

    Coll(String label) {
      this.label = label;
    }
  }

  /** One collective: what, on which type; the op is always SUM where there is one. */
  private static final class Case {
    final Coll coll;
    final DataType type;

    Case(Coll coll, DataType type) {
      this.coll = coll;
      this.type = type;
    }
  }

  private static final Case[] CASES = {
    new Case(Coll.ALL_REDUCE, DataType.FLOAT32),
    new Case(Coll.ALL_REDUCE, DataType.BFLOAT16),
    new Case(Coll.ALL_REDUCE, DataType.INT32),
    new Case(Coll.ALL_GATHER, DataType.FLOAT32),
    new Case(Coll.ALL_GATHER, DataType.BFLOAT16),
    new Case(Coll.REDUCE_SCATTER, DataType.FLOAT32),
    new Case(Coll.REDUCE_SCATTER, DataType.BFLOAT16),
    new Case(Coll.BROADCAST, DataType.FLOAT32),
    new Case(Coll.BROADCAST, DataType.BFLOAT16),
  };

  private DeviceRankProcess() {}

  public static void main(String[] args) {
    int exit;
    String who = "rank ?";
    try {
      if (args.length != 2) {
        throw new IllegalArgumentException(
            "usage: DeviceRankProcess RANK NRANKS (id in $"
                + ID_ENV
                + "), got "
                + args.length
                + " argument(s)");
      }
      int rank = Integer.parseInt(args[0]);
      int n = Integer.parseInt(args[1]);
      who = "rank " + rank + " of " + n;
      String idText = System.getenv(ID_ENV);
      if (idText == null || idText.isBlank()) {
        throw new IllegalArgumentException(
            "$" + ID_ENV + " is not set: the parent passes the" + " UniqueId's text there");
      }
      exit = new DeviceRankProcess.Rank(UniqueId.parse(idText), rank, n).run();
    } catch (Throwable t) {
      System.err.println(who + ": failed with " + t);
      t.printStackTrace();
      exit = 2;
    }
    System.out.flush();
    System.err.flush();
    System.exit(exit);
  }

  /** The GPU of {@code rank}: 0, or rank % (number of GPUs) with CLB_TEST_SPREAD=1. */
  static int gpuOf(int rank) {
    if (!"1".equals(System.getenv(SPREAD_ENV))) {
      return 0;
    }
    return rank % Math.max(1, Device.count());
  }

  // ---------------------------------------------------------------------------------------------
  // Inputs: a splitmix64-style hash of (call, rank, index), so every rank knows every input.

  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** Seed of one rank's input in call number {@code call}. */
  static long seed(int call, int rank) {
    return mix(mix(0xC0L << 32 | call) + 0x9E3779B97F4A7C15L * (rank + 1));
  }

  /**
   * Element {@code i} of the input whose seed is {@code seed}, as raw bits (int32: all 32; float32:
   * a normal float with |x| in [0.5, 4) and either sign, all mantissa bits random; bfloat16: the
   * same range, in the low 16 bits). No NaN, infinity or subnormal.
   */
  static int input(DataType t, long seed, long i) {
    long h = mix(seed + 0x9E3779B97F4A7C15L * (i + 1));
    int sign = (int) (h >>> 63);
    int exp = 126 + (int) ((h >>> 40) % 3); // 2^-1, 2^0 or 2^1
    switch (t) {
      case INT32:
        return (int) h;
      case FLOAT32:
        return sign << 31 | exp << 23 | (int) (h & 0x7FFFFF);
      case BFLOAT16:
        return sign << 15 | exp << 7 | (int) (h & 0x7F);
      default:
        throw new IllegalArgumentException("no input generator for " + t);
    }
  }

  static float bf16ToFloat(int bits) {
    return Float.intBitsToFloat((bits & 0xFFFF) << 16);
  }

  /** float32 to bfloat16, rounding to nearest, ties to even (NaN stays a quiet NaN). */
  static int floatToBf16(float f) {
    int u = Float.floatToRawIntBits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) {
      return (u >>> 16 | 0x40) & 0xFFFF;
    }
    int keep = (u >>> 16) & 1;
    return ((u + 0x7FFF + keep) >>> 16) & 0xFFFF;
  }

  static float asFloat(DataType t, int bits) {
    return t == DataType.BFLOAT16 ? bf16ToFloat(bits) : Float.intBitsToFloat(bits);
  }

  static String show(DataType t, int bits) {
    switch (t) {
      case INT32:
        return Integer.toString(bits);
      case BFLOAT16:
        return bf16ToFloat(bits) + String.format(" (bf16 0x%04x)", bits & 0xFFFF);
      default:
        return Float.intBitsToFloat(bits) + String.format(" (0x%08x)", bits);
    }
  }

  /**
   * The sum over ranks 0..n-1 of element {@code i} of each rank's input, as the library documents
   * it: int32 wrapping; float32 accumulated in rank order; bfloat16 widened, accumulated in float32
   * in rank order and rounded once. Also the exact sum and the sum of magnitudes, for the bound.
   */
  static final class Sum {
    int bits;
    double exact;
    double magnitudes;

    Sum of(DataType t, long[] seeds, long i) {
      exact = 0;
      magnitudes = 0;
      if (t == DataType.INT32) {
        int s = 0;
        for (long seed : seeds) {
          s += input(t, seed, i);
        }
        bits = s;
        return this;
      }
      float acc = 0;
      for (int p = 0; p < seeds.length; p++) {
        float x = asFloat(t, input(t, seeds[p], i));
        acc = p == 0 ? x : acc + x;
        exact += x; // exact in double: multiples of 2^-24, each below 2^2
        magnitudes += Math.abs(x);
      }
      bits = t == DataType.BFLOAT16 ? floatToBf16(acc) : Float.floatToRawIntBits(acc);
      return this;
    }

    /**
     * Null if {@code got} is right: the same bits, or (floats) within docs/semantics.md's bound
     * around the exact sum: float32 (n-1)·2^-24·Σ|x|; bfloat16, accumulated in float32 and rounded
     * once, 2^-8·|sum| + n·2^-24·Σ|x|. The poison's bits never pass.
     */
    String check(DataType t, int got, int n, int poisonBits) {
      if (got == bits) {
        return null;
      }
      if (t == DataType.INT32 || got == poisonBits) {
        return "wrong";
      }
      double g = asFloat(t, got);
      double bound =
          t == DataType.FLOAT32
              ? (n - 1) * 0x1p-24 * magnitudes
              : 0x1p-8 * Math.abs(exact) + n * 0x1p-24 * magnitudes;
      return Math.abs(g - exact) <= bound
          ? ""
          : "outside the bound " + bound + " around the exact " + exact;
    }
  }

  // ---------------------------------------------------------------------------------------------

  /** One rank: its communicator, stream, device buffers and host staging. */
  private static final class Rank {
    final UniqueId id;
    final int rank;
    final int n;
    final int gpu;
    final boolean registered;
    final long[] counts;
    final long maxBytes; // the largest region a call uses: n × count × 4
    int problems;
    long inexact; // float sums accepted within the bound but not bit-identical
    long elementsChecked;

    Rank(UniqueId id, int rank, int n) {
      this.id = id;
      this.rank = rank;
      this.n = n;
      this.gpu = gpuOf(rank);
      this.registered = "1".equals(System.getenv(REGISTER_ENV));
      this.counts = registered ? REGISTERED_COUNTS : COUNTS;
      long maxCount = 0;
      for (long c : counts) {
        maxCount = Math.max(maxCount, c);
      }
      this.maxBytes = n * maxCount * 4;
    }

    int run() {
      Options options = Options.builder().timeout(Duration.ofSeconds(30)).build();
      int calls = 0;
      long started = System.nanoTime();
      try (Communicator comm = Communicator.init(id, rank, n, options);
          CudaStream stream = CudaStream.create(gpu);
          DeviceBuffer send = DeviceBuffer.allocate(maxBytes + GUARD, gpu);
          DeviceBuffer recv = DeviceBuffer.allocate(maxBytes + GUARD, gpu);
          DeviceBuffer poison = DeviceBuffer.allocate(maxBytes + GUARD, gpu);
          // Collective, before any call; closed (if not yet) before the buffers are freed.
          Communicator.Registration sendReg = registered ? send.register(comm) : null;
          Communicator.Registration recvReg = registered ? recv.register(comm) : null) {
        ByteBuffer in =
            ByteBuffer.allocateDirect(Math.toIntExact(maxBytes + GUARD))
                .order(ByteOrder.nativeOrder());
        ByteBuffer out =
            ByteBuffer.allocateDirect(Math.toIntExact(maxBytes + GUARD))
                .order(ByteOrder.nativeOrder());
        for (int i = 0; i < out.capacity(); i++) {
          out.put(i, POISON);
        }
        Io io = new Io(stream);
        io.toDevice(poison.address(), out, out.capacity());
        int call = 0;
        for (long count : counts) {
          for (boolean inPlace : new boolean[] {false, true}) {
            for (Case c : CASES) {
              one(comm, io, c, count, inPlace, call++, send, recv, poison, in, out);
              calls++;
            }
          }
        }
        String info = comm.transportInfo().replace('\n', ';');
        long deviceBytes = comm.memoryStats().deviceBytes();
        if (!info.contains("kernels colibri_kernels_sm") || deviceBytes <= 0) {
          problems++;
          System.err.println(
              "MISMATCH rank "
                  + rank
                  + " of "
                  + n
                  + ": the device path does not"
                  + " show (device bytes held "
                  + deviceBytes
                  + ", want > 0; transport info should"
                  + " name the kernel image colibri_kernels_sm*): "
                  + info);
        }
        if (registered) {
          for (Communicator.Registration r :
              new Communicator.Registration[] {sendReg, recvReg, sendReg}) {
            r.close(); // before the communicator; the second close of sendReg does nothing
          }
        }
        System.out.printf(
            "rank %d of %d on GPU %d%s: %d collectives, %d elements checked,"
                + " %d problem(s), %d float sum(s) within the bound but not bit-identical to the"
                + " rank-order sum,"
                + " %.1f s; device bytes held %d; %s%n",
            rank,
            n,
            gpu,
            registered ? " (registered buffers)" : "",
            calls,
            elementsChecked,
            problems,
            inexact,
            (System.nanoTime() - started) / 1e9,
            deviceBytes,
            info);
      }
      return problems == 0 ? 0 : 1;
    }

    /** Sets up the buffers, runs one collective, copies the result back and checks it. */
    private void one(
        Communicator comm,
        Io io,
        Case c,
        long count,
        boolean inPlace,
        int call,
        DeviceBuffer send,
        DeviceBuffer recv,
        DeviceBuffer poison,
        ByteBuffer in,
        ByteBuffer out) {
      DataType t = c.type;
      int size = t.size();
      int root = call % n;
      long[] seeds = new long[n];
      for (int p = 0; p < n; p++) {
        seeds[p] = seed(call, p);
      }
      long sendElems = c.coll == Coll.REDUCE_SCATTER ? n * count : count;
      long recvElems = c.coll == Coll.ALL_GATHER ? n * count : count;
      // My input, in host staging.
      for (long i = 0; i < sendElems; i++) {
        put(in, t, i, input(t, seeds[rank], i));
      }
      long sendBytes = sendElems * size;
      long recvBytes = recvElems * size;
      long base = recv.address();
      long sendAt;
      long recvAt;
      long resultAt; // where this rank's result lands (in recv)
      if (!inPlace) {
        io.copy(base, poison.address(), recvBytes + GUARD);
        io.toDevice(send.address(), in, sendBytes);
        sendAt = send.address();
        recvAt = base;
        resultAt = base;
      } else {
        switch (c.coll) {
          case ALL_GATHER: // send is recv's slice at rank × count
            io.copy(base, poison.address(), recvBytes + GUARD);
            io.toDevice(base + rank * count * size, in, sendBytes);
            sendAt = base + rank * count * size;
            recvAt = base;
            resultAt = base;
            break;
          case REDUCE_SCATTER: // recv is send's slice at rank × count
            io.copy(base + sendBytes, poison.address(), GUARD);
            io.toDevice(base, in, sendBytes);
            sendAt = base;
            recvAt = base + rank * count * size;
            resultAt = recvAt;
            break;
          case BROADCAST: // the root holds its input, the others poison
            io.copy(base, poison.address(), recvBytes + GUARD);
            if (rank == root) {
              io.toDevice(base, in, sendBytes);
            }
            sendAt = base;
            recvAt = base;
            resultAt = base;
            break;
          default: // allReduce
            io.copy(base + sendBytes, poison.address(), GUARD);
            io.toDevice(base, in, sendBytes);
            sendAt = base;
            recvAt = base;
            resultAt = base;
        }
      }
      io.sync();
      long h = io.stream.handle();
      switch (c.coll) {
        case ALL_REDUCE:
          comm.allReduce(sendAt, recvAt, count, t, ReduceOp.SUM, h);
          break;
        case ALL_GATHER:
          comm.allGather(sendAt, recvAt, count, t, h);
          break;
        case REDUCE_SCATTER:
          comm.reduceScatter(sendAt, recvAt, count, t, ReduceOp.SUM, h);
          break;
        default:
          comm.broadcast(sendAt, recvAt, count, t, root, h);
      }
      io.sync();
      // The result and, after the whole recv region, the guard (reduceScatter in place: after the
      // send region, which holds recv).
      long guardAt = inPlace && c.coll == Coll.REDUCE_SCATTER ? base + sendBytes : base + recvBytes;
      io.toHost(out, resultAt, recvBytes);
      ByteBuffer guard = ByteBuffer.allocateDirect(GUARD);
      io.toHost(guard, guardAt, GUARD);
      io.sync();

      String what =
          c.coll.label
              + " "
              + t.name().toLowerCase()
              + (c.coll == Coll.BROADCAST
                  ? " root " + root
                  : c.coll == Coll.ALL_GATHER ? "" : " sum")
              + " count "
              + count
              + (inPlace ? " in place" : " out of place")
              + " (call "
              + call
              + ")";
      int poisonBits = size == 2 ? 0xA5A5 : 0xA5A5A5A5;
      String problem = null;
      String lastCall = registered ? lastCall(comm.transportInfo()) : null;
      if (lastCall != null && !lastCall.contains("zero copy")) {
        problems++;
        System.err.println(
            "MISMATCH rank "
                + rank
                + " of "
                + n
                + ", "
                + what
                + ": on registered"
                + " buffers, but the transport info says \""
                + lastCall
                + "\"");
      }
      Sum sum = new Sum();
      for (long e = 0; e < recvElems && problem == null; e++) {
        int got = get(out, t, e);
        String wrong;
        int want;
        switch (c.coll) {
          case ALL_REDUCE:
          case REDUCE_SCATTER:
            {
              long i = c.coll == Coll.REDUCE_SCATTER ? rank * count + e : e;
              sum.of(t, seeds, i);
              want = sum.bits;
              wrong = sum.check(t, got, n, poisonBits);
              if ("".equals(wrong)) {
                inexact++;
                wrong = null;
              } else if (wrong != null) {
                wrong += " (inputs: element " + i + " of each rank's send)";
              }
              break;
            }
          case ALL_GATHER:
            want = input(t, seeds[(int) (e / count)], e % count);
            wrong =
                got == want
                    ? null
                    : "wrong (element " + e % count + " of rank " + e / count + "'s send)";
            break;
          default:
            want = input(t, seeds[root], e);
            wrong = got == want ? null : "wrong (root " + root + "'s element " + e + ")";
        }
        elementsChecked++;
        if (wrong != null) {
          problem =
              "element "
                  + e
                  + ": got "
                  + show(t, got)
                  + ", want "
                  + show(t, want)
                  + ": "
                  + wrong
                  + (got == poisonBits ? " (the poison: never written)" : "");
        }
      }
      for (int b = 0; b < GUARD && problem == null; b++) {
        if (guard.get(b) != POISON) {
          problem =
              String.format(
                  "byte %d after the output was written (0x%02x): overrun", b, guard.get(b) & 0xFF);
        }
      }
      if (problem != null) {
        problems++;
        System.err.println("MISMATCH rank " + rank + " of " + n + ", " + what + ": " + problem);
        System.err.flush();
      }
    }
  }

  /**
   * The transport info's fact about the last call, e.g. "last call direct (zero copy through
   * registered buffers)" or "last call staged" (the whole info when it has none).
   */
  static String lastCall(String info) {
    int at = Math.max(0, info.indexOf("last call"));
    int end = at;
    while (end < info.length() && info.charAt(end) != ';' && info.charAt(end) != '\n') {
      end++;
    }
    return info.substring(at, end);
  }

  /** Copies, all on the rank's own stream (ordered before and after its collectives). */
  private static final class Io {
    final CudaStream stream;

    Io(CudaStream stream) {
      this.stream = stream;
    }

    void copy(long dst, long src, long bytes) {
      Device.copy(dst, src, bytes, stream.handle());
    }

    /** The first {@code bytes} of a direct buffer to device memory (the buffer stays readable). */
    void toDevice(long dst, ByteBuffer src, long bytes) {
      Device.copy(dst, Device.address(src.clear()), bytes, stream.handle());
      sync(); // the host buffer is reused right after
    }

    void toHost(ByteBuffer dst, long src, long bytes) {
      Device.copy(Device.address(dst.clear()), src, bytes, stream.handle());
    }

    void sync() {
      stream.synchronize();
    }
  }

  static void put(ByteBuffer b, DataType t, long i, int bits) {
    int at = Math.toIntExact(i * t.size());
    if (t.size() == 2) {
      b.putShort(at, (short) bits);
    } else {
      b.putInt(at, bits);
    }
  }

  static int get(ByteBuffer b, DataType t, long i) {
    int at = Math.toIntExact(i * t.size());
    return t.size() == 2 ? b.getShort(at) & 0xFFFF : b.getInt(at);
  }
}
