/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import io.colibri.ColibriException;
import io.colibri.Option;
import io.colibri.Options;
import io.colibri.bench.doctor.Doctor.Result;
import io.colibri.bench.doctor.Doctor.Status;
import io.colibri.bench.doctor.DoctorProbe.Sharing;
import io.colibri.bench.doctor.DoctorProbe.Sharing.Outcome;
import io.colibri.bench.doctor.DoctorProbe.Store;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The doctor's /dev/shm check: that it exists, is a tmpfs, how large it is and how much is free
 * against what Colibri's ranks hold there, and that a second process shares the memory of a file
 * made there.
 *
 * <p>What one rank holds in /dev/shm (src/transport/shm/shm.h, shm.cc and peer.cc): a control block
 * of 4 KiB for the communicator's life; a data segment, made at its first collective, holding its
 * outgoing ring FIFO (pipelineDepth slots, each a 64-byte header and up to chunkBytes, rounded up to
 * whole pages) and the direct algorithm's scratch (auto takes direct only for messages of up to
 * directMaxBytes whose scratch fits half the cap); and one FIFO per peer it sends point-to-point
 * messages to (pipelineDepth slots of up to chunkBytes). stagingCapBytes caps the data segment and
 * these FIFOs together (a call that needs more fails with OUT_OF_MEMORY), so a rank holds at most
 * stagingCapBytes + 4 KiB. With the defaults: 4 KiB + 1028 KiB + 64 KiB = 1096 KiB for collectives,
 * 64 MiB + 4 KiB at most. Device collectives between GPUs without peer access add their staging
 * buffers, which this figure leaves out.
 */
final class DoctorShm {

  static final String CHECK = "shm";
  static final long CONTROL_BLOCK_BYTES = 4096;
  static final long SLOT_HEADER_BYTES = 64;
  static final long PAGE_BYTES = 4096;

  /** The knobs the figure depends on, read from the environment the ranks would inherit. */
  private static final Option[] KNOBS = {
    Option.PIPELINE_DEPTH, Option.CHUNK_BYTES, Option.DIRECT_MAX_BYTES, Option.STAGING_CAP_BYTES
  };

  /**
   * What one rank holds in /dev/shm.
   *
   * @param collectives for collectives: control block, ring FIFO and direct scratch
   * @param most the most it may hold: the control block and the staging cap
   * @param stagingCap stagingCapBytes
   * @param settings the knobs that the environment sets ("COLIBRI_CHUNK_BYTES=1048576"), or what
   *     is wrong with them; empty with the defaults
   */
  record Need(long collectives, long most, long stagingCap, List<String> settings) {}

  private final DoctorFiles files;
  private final DoctorProbe probe;
  private final Map<String, String> env;

  DoctorShm(DoctorFiles files, DoctorProbe probe, Map<String, String> env) {
    this.files = files;
    this.probe = probe;
    this.env = env;
  }

  static long roundUp(long v, long to) {
    return (v + to - 1) / to * to;
  }

  /** The figure for the knobs {@code env} sets (the defaults for the others). */
  static Need need(Map<String, String> env) {
    long[] v = new long[KNOBS.length];
    List<String> settings = new ArrayList<>();
    for (int i = 0; i < KNOBS.length; i++) {
      Option o = KNOBS[i];
      v[i] = ((Number) o.defaultValue()).longValue();
      String text = env.get(o.environmentVariable());
      if (text == null || text.isEmpty()) {
        continue;
      }
      try {
        Options.builder().set(o, text); // throws where init would refuse it
        v[i] = Long.parseLong(text);
        settings.add(o.environmentVariable() + "=" + text);
      } catch (ColibriException | NumberFormatException e) {
        settings.add(o.environmentVariable() + "='" + text + "' not valid: the default counted");
      }
    }
    long depth = Math.max(2, v[0]);
    long chunk = v[1];
    long directMax = v[2];
    long cap = v[3];
    long ring = roundUp(depth * (SLOT_HEADER_BYTES + roundUp(chunk, 64)), PAGE_BYTES);
    long direct = roundUp(Math.min(directMax, cap / 2), PAGE_BYTES);
    long collectives = CONTROL_BLOCK_BYTES + Math.min(cap, ring + direct);
    return new Need(collectives, CONTROL_BLOCK_BYTES + cap, cap, settings);
  }

  /** A device number as "major:minor", decoded as glibc's gnu_dev_major and gnu_dev_minor do. */
  static String deviceText(long dev) {
    long major = ((dev >>> 8) & 0xfffL) | ((dev >>> 32) & 0xfffff000L);
    long minor = (dev & 0xffL) | ((dev >>> 12) & 0xffffff00L);
    return major + ":" + minor;
  }

  private static String bytes(long n) {
    return DoctorFiles.bytes(n);
  }

  /** How to give containers a larger /dev/shm, {@code size} as Docker writes it ("1g"). */
  private static String sizeFix(String size) {
    return "give it a larger /dev/shm: `docker run --shm-size="
        + size
        + "` (or --ipc=host: the host's), Kubernetes: an emptyDir with medium: Memory and a"
        + " sizeLimit mounted at /dev/shm, on a host `mount -o remount,size="
        + size
        + " /dev/shm` as root; or make the need smaller: a lower COLIBRI_STAGING_CAP_BYTES, or"
        + " COLIBRI_TRANSPORT=socket (TCP between the ranks of one host, slower)";
  }

  /** Docker's --shm-size for {@code bytes}, in whole GiB, at least 1. */
  static String dockerSize(long bytes) {
    return Math.max(1, roundUp(bytes, 1L << 30) >> 30) + "g";
  }

  /** The check's line. */
  Result check() {
    Path dir = files.path("/dev/shm");
    Need need = need(env);
    String needText =
        "a rank holds about "
            + bytes(need.collectives())
            + " there for collectives, at most "
            + bytes(need.stagingCap())
            + " + 4 KiB (stagingCapBytes and its control block)"
            + (need.settings().isEmpty()
                ? " with the default settings"
                : " with " + String.join(", ", need.settings()));
    String notChecked =
        "not checked: that the ranks' processes in other containers or pods see this same"
            + " /dev/shm (compare its device number there; Colibri's init compares it and fails"
            + " if ranks of one host differ)";
    if (!Files.exists(dir)) {
      return Result.fail(
          CHECK,
          "no /dev/shm: ranks on one host cannot share memory (transport shm, which auto picks for"
              + " them, fails at init)",
          "mount a tmpfs there as root: `mount -t tmpfs -o mode=1777,size=1g tmpfs /dev/shm`"
              + " (Docker and Kubernetes give containers one unless told otherwise); or use TCP"
              + " between the ranks of one host: COLIBRI_TRANSPORT=socket");
    }
    if (!Files.isDirectory(dir)) {
      return Result.fail(
          CHECK,
          "/dev/shm is not a folder: ranks on one host cannot share memory",
          "replace it by a tmpfs: `mount -t tmpfs -o mode=1777,size=1g tmpfs /dev/shm` as root;"
              + " or COLIBRI_TRANSPORT=socket");
    }
    Store store;
    String storeError = null;
    try {
      store = probe.store(dir);
    } catch (IOException | RuntimeException e) {
      store = null;
      storeError = String.valueOf(e.getMessage());
    }
    Sharing sharing = probe.sharing(dir);
    List<String> facts = new ArrayList<>();
    if (store == null) {
      facts.add("/dev/shm: cannot read its file system (" + storeError + ")");
    } else {
      facts.add(
          "/dev/shm: "
              + (store.type() == null ? "file system type unknown" : store.type())
              + ", "
              + bytes(store.totalBytes())
              + ", "
              + bytes(store.availableBytes())
              + " free"
              + (store.device() == null ? "" : ", device " + store.device()));
    }
    long segments = files.list(dir).stream().filter(n -> n.startsWith("clb-")).count();
    if (segments > 0) {
      facts.add(segments + " Colibri segment(s) (clb-*) there now");
    }

    // What is wrong, worst first: a FAIL (the host path cannot run), else WARNs and their fixes.
    Status status = Status.PASS;
    List<String> problems = new ArrayList<>();
    List<String> fixes = new ArrayList<>();
    String two = dockerSize(2 * need.most());
    if (sharing.outcome() == Outcome.CANNOT_WRITE) {
      status = Status.FAIL;
      fixes.add(
          "ranks create their segments there: /dev/shm must be writable by every user (mode"
              + " 1777: `chmod 1777 /dev/shm`), mounted read-write, with room left");
    } else if (sharing.outcome() == Outcome.NOT_SHARED) {
      status = Status.FAIL;
      fixes.add(
          "processes of this host do not share memory through /dev/shm here (see `findmnt"
              + " /dev/shm`): mount one tmpfs there for all of them, or COLIBRI_TRANSPORT=socket");
    } else if (store == null) {
      status = Status.WARN;
      fixes.add("check its size and free space by hand: `df -h /dev/shm`, `findmnt /dev/shm`");
    } else if (store.totalBytes() < 2 * need.collectives()) {
      status = Status.FAIL;
      problems.add(
          "too small for the collectives of two ranks (" + bytes(2 * need.collectives()) + ")");
      fixes.add(sizeFix(two));
    } else {
      if (store.availableBytes() < 2 * need.collectives()) {
        problems.add(
            "almost full: less free than the collectives of two ranks need ("
                + bytes(2 * need.collectives())
                + ")");
        fixes.add(
            "free it: see what holds it with `ls -la /dev/shm` (Colibri removes the clb-j*"
                + " segments of ranks that died at its next init on this host)");
      } else if (store.totalBytes() < 2 * need.most()) {
        problems.add(
            "smaller than two ranks at their staging cap ("
                + bytes(2 * need.stagingCap())
                + " + 8 KiB; many point-to-point peers, or algorithm direct on large messages, take"
                + " it): a call that finds it full fails with 'cannot size shared memory'");
        fixes.add(
            sizeFix(two)
                + " (n ranks at their cap need n x ("
                + bytes(need.stagingCap())
                + " + 4 KiB))");
      } else if (store.availableBytes() < 2 * need.most()) {
        problems.add(
            "less free than two ranks at their staging cap need ("
                + bytes(2 * need.stagingCap())
                + " + 8 KiB)");
        fixes.add("free it: see what holds it with `ls -la /dev/shm`");
      }
      if (store.type() != null && !store.type().equals("tmpfs")) {
        problems.add(
            "not a tmpfs but " + store.type() + ": the ranks' segments would be files on it");
        fixes.add(
            "mount a tmpfs at /dev/shm (`mount -t tmpfs -o mode=1777,size="
                + two
                + " tmpfs /dev/shm` as root; containers get one unless told otherwise)");
      }
      if (!problems.isEmpty()) {
        status = Status.WARN;
      }
    }

    List<String> parts = new ArrayList<>(facts);
    parts.addAll(problems);
    parts.add(sharing.detail());
    parts.add(needText);
    if (store != null && store.totalBytes() >= 2 * need.collectives()) {
      parts.add(
          "room for the collectives of "
              + store.totalBytes() / need.collectives()
              + " ranks, for "
              + store.totalBytes() / need.most()
              + " ranks at their cap");
    }
    parts.add(notChecked);
    String found = String.join("; ", parts);
    String fix = String.join("; also ", fixes);
    switch (status) {
      case FAIL:
        return Result.fail(CHECK, found, fix);
      case WARN:
        return Result.warn(CHECK, found, fix);
      default:
        return Result.pass(CHECK, found);
    }
  }

  // ---- the real test with a child process ----

  /**
   * Makes a file in {@code dir} as Colibri makes a segment (a new file, its page reserved, mapped
   * shared), writes a token into the mapping, and runs {@code /bin/sh} to read the token back from
   * the file and write another one into it, which must then show in this process's mapping. The
   * file is removed again.
   */
  static Sharing childSees(Path dir) {
    SecureRandom random = new SecureRandom();
    byte[] raw = new byte[16];
    random.nextBytes(raw);
    String mine = HexFormat.of().formatHex(raw);
    random.nextBytes(raw);
    String theirs = HexFormat.of().formatHex(raw);
    Path file = dir.resolve("colibri-doctor-" + ProcessHandle.current().pid() + "-" + mine);
    try {
      try (FileChannel ch =
          FileChannel.open(
              file,
              StandardOpenOption.CREATE_NEW,
              StandardOpenOption.READ,
              StandardOpenOption.WRITE)) {
        ch.write(ByteBuffer.allocate((int) PAGE_BYTES), 0); // the page, reserved
        MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_WRITE, 0, PAGE_BYTES);
        map.put(0, mine.getBytes(StandardCharsets.US_ASCII));
        return runChild(file, mine, theirs, map);
      } catch (IOException | RuntimeException e) {
        return new Sharing(
            Outcome.CANNOT_WRITE,
            "cannot make, size or map a file there: "
                + e.getClass().getSimpleName()
                + ": "
                + e.getMessage());
      }
    } finally {
      try {
        Files.deleteIfExists(file);
      } catch (IOException e) {
        // it goes with the next reboot; nothing to report in a line about something else
      }
    }
  }

  private static Sharing runChild(Path file, String mine, String theirs, MappedByteBuffer map) {
    Path sh = Path.of("/bin/sh");
    if (!Files.isExecutable(sh)) {
      return new Sharing(
          Outcome.NOT_CHECKED, "not checked whether another process shares it: no /bin/sh");
    }
    ProcessBuilder pb =
        new ProcessBuilder(
                sh.toString(),
                "-c",
                "head -c " + mine.length() + " \"$1\" && printf %s \"$2\" 1<>\"$1\"",
                "sh",
                file.toString(),
                theirs)
            .redirectErrorStream(true);
    String out;
    int rc;
    try {
      Process p = pb.start();
      p.getOutputStream().close();
      // Its output (a few bytes) fits the pipe: it can finish before anything reads it.
      if (!p.waitFor(10, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return new Sharing(
            Outcome.NOT_CHECKED,
            "not checked whether another process shares it: the child did not finish in 10 s");
      }
      out = read(p.getInputStream());
      rc = p.exitValue();
    } catch (IOException e) {
      return new Sharing(
          Outcome.NOT_CHECKED,
          "not checked whether another process shares it: cannot run /bin/sh ("
              + e.getMessage()
              + ")");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Sharing(Outcome.NOT_CHECKED, "not checked whether another process shares it");
    }
    byte[] back = new byte[theirs.length()];
    map.get(0, back);
    String seen = new String(back, StandardCharsets.US_ASCII);
    if (rc != 0) {
      return new Sharing(
          Outcome.NOT_CHECKED,
          "not checked whether another process shares it: the child (/bin/sh, head, printf) exited"
              + " with "
              + rc
              + ": "
              + out.trim());
    }
    if (!out.startsWith(mine) || !seen.equals(theirs)) {
      return new Sharing(
          Outcome.NOT_SHARED,
          "a child process did not share the memory of a file made there: it read '"
              + out.trim()
              + "' where this process wrote '"
              + mine
              + "' through a shared mapping, and its write "
              + (seen.equals(theirs) ? "showed" : "did not show")
              + " in the mapping");
    }
    return new Sharing(
        Outcome.SHARED,
        "a child process shares its memory (it read what this process wrote into a file there"
            + " through a shared mapping, and its write showed in the mapping)");
  }

  private static String read(InputStream in) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    in.transferTo(b);
    return b.toString(StandardCharsets.UTF_8);
  }
}
