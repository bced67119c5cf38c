/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import com.fasterxml.jackson.databind.JsonNode;
import io.colibri.ColibriException;
import io.colibri.ErrorCode;
import io.colibri.bench.Main;
import io.colibri.bench.common.Commands;
import io.colibri.bench.common.Mappers;
import io.colibri.bench.doctor.Doctor.Result;
import io.colibri.bench.doctor.Doctor.Status;
import io.colibri.bench.doctor.DoctorProbe.Sharing;
import io.colibri.bench.doctor.DoctorProbe.Sharing.Outcome;
import io.colibri.bench.doctor.DoctorProbe.Store;
import io.colibri.jni.Device;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The doctor against fake machines: /proc, /sys and /dev trees built in a temporary folder, with a
 * fake driver, file system and child process (machines without GPU, with a broken GPU, with a small
 * or missing /dev/shm, ...): statuses, what each line says, the fixes, the exit code and the JSON.
 * Then the doctor and its /dev/shm probe on this machine.
 */
class DoctorTest {

  @TempDir Path root;

  private static final String NO_DRIVER =
      "device count failed: no CUDA driver: cannot load libcuda.so.1 (libcuda.so.1: cannot open"
          + " shared object file: No such file or directory). Device buffers need an NVIDIA GPU and"
          + " its driver; the host path works without them\n"
          + "  at src/device/device_api.cc:52";

  // ---- the fake driver and JVM ----

  static final class FakeProbe implements DoctorProbe {
    RuntimeException libraryFailure;
    RuntimeException countFailure;
    final List<Device.Info> gpus = new ArrayList<>();
    final Set<String> noPeer = new HashSet<>(); // "a-b": a cannot access b
    final Map<String, String> env = new HashMap<>();
    final List<Path> loaded = new ArrayList<>();
    String loadError;
    Store store = new Store("tmpfs", 8L << 30, 8L << 30, "0:25");
    IOException storeFailure;
    Sharing sharing =
        new Sharing(Outcome.SHARED, "a child process shares its memory (the fake's word)");
    final List<Path> shmAsked = new ArrayList<>();

    @Override
    public Library library() {
      if (libraryFailure != null) {
        throw libraryFailure;
      }
      return new Library("0.1.0", "/cache/libcolibri.so.0", "/cache/libjniColibriLib.so");
    }

    @Override
    public int gpuCount() {
      if (countFailure != null) {
        throw countFailure;
      }
      return gpus.size();
    }

    @Override
    public Device.Info gpu(int device) {
      return gpus.get(device);
    }

    @Override
    public boolean canAccessPeer(int device, int peer) {
      return !noPeer.contains(device + "-" + peer);
    }

    @Override
    public String load(Path file) {
      loaded.add(file);
      return loadError;
    }

    @Override
    public String javaVersion() {
      return "17.0.99 (Test)";
    }

    @Override
    public Map<String, String> env() {
      return env;
    }

    @Override
    public Store store(Path dir) throws IOException {
      shmAsked.add(dir);
      if (storeFailure != null) {
        throw storeFailure;
      }
      return store;
    }

    @Override
    public Sharing sharing(Path dir) {
      shmAsked.add(dir);
      return sharing;
    }
  }

  /** A driver without libcuda.so.1: the core's NO_DRIVER answer to every device call. */
  static FakeProbe withoutLibcuda() {
    FakeProbe probe = new FakeProbe();
    probe.countFailure = new ColibriException(ErrorCode.UNSUPPORTED, NO_DRIVER);
    return probe;
  }

  static Device.Info gpu(int device, String name, int major, int minor, String bus, String image) {
    return new Device.Info(device, name, major, minor, 13000, bus, image, 1, 1);
  }

  // ---- building the fake tree ----

  /** Every machine here has a /dev/shm (its size and type come from the probe's store). */
  @BeforeEach
  void devShm() throws IOException {
    dir("/dev/shm");
  }

  private Path write(String abs, String content) throws IOException {
    Path p = root.resolve(abs.substring(1));
    Files.createDirectories(p.getParent());
    Files.writeString(p, content + "\n");
    return p;
  }

  private Path dir(String abs) throws IOException {
    return Files.createDirectories(root.resolve(abs.substring(1)));
  }

  /** A relative symlink, as sysfs has them. */
  private void link(String abs, String targetAbs) throws IOException {
    Path link = root.resolve(abs.substring(1));
    Path target = root.resolve(targetAbs.substring(1));
    Files.createDirectories(link.getParent());
    Files.createSymbolicLink(link, link.getParent().relativize(target));
  }

  /** A PCI device folder below /sys/devices, linked from /sys/bus/pci/devices. */
  private String pciDevice(String chain, int numa, String vendor, String cls) throws IOException {
    String dev = "/sys/devices/" + chain;
    String id = dev.substring(dev.lastIndexOf('/') + 1);
    write(dev + "/numa_node", String.valueOf(numa));
    write(dev + "/vendor", vendor);
    write(dev + "/class", cls);
    link("/sys/bus/pci/devices/" + id, dev);
    return dev;
  }

  /** An RDMA device on the PCI device {@code pciDev}, with one port. */
  private String rdmaDevice(String name, String pciDev, String state, String phys, String linkLayer)
      throws IOException {
    String cls = pciDev + "/infiniband/" + name;
    link("/sys/class/infiniband/" + name, cls);
    link(cls + "/device", pciDev);
    write(cls + "/fw_ver", "28.39.1002");
    String port = cls + "/ports/1";
    write(port + "/state", state);
    write(port + "/phys_state", phys);
    write(port + "/rate", "200 Gb/sec (4X HDR)");
    write(port + "/link_layer", linkLayer);
    write(port + "/lid", "0x5");
    write(port + "/gids/0", "fe80:0000:0000:0000:0c42:a103:0065:1234");
    write(port + "/gids/1", "0000:0000:0000:0000:0000:0000:0000:0000");
    return port;
  }

  private void limits(String soft, String hard) throws IOException {
    write(
        "/proc/self/limits",
        String.join(
            "\n",
            "Limit                     Soft Limit           Hard Limit           Units     ",
            "Max cpu time              unlimited            unlimited            seconds   ",
            "Max locked memory         "
                + soft
                + "              "
                + hard
                + "              bytes     ",
            "Max address space         unlimited            unlimited            bytes     "));
  }

  private void openDriver() throws IOException {
    write(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build "
            + " (dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 06:54:38 UTC 2025\n"
            + "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)");
  }

  // ---- running it ----

  private static final class Run {
    int rc;
    String out;
    String err;
    List<Result> results;

    Result get(String check) {
      for (Result r : results) {
        if (r.check().equals(check)) {
          return r;
        }
      }
      throw new AssertionError("no line '" + check + "' in:\n" + out);
    }

    Status status(String check) {
      return get(check).status();
    }
  }

  /** The checks on the fake tree, as the command would run them (once: the probe records). */
  private Run doctor(FakeProbe probe, String... flags) {
    List<String> f = List.of(flags);
    Run r = new Run();
    DoctorChecks checks =
        new DoctorChecks(root, probe, f.contains("--no-gpu"), f.contains("--no-rdma"));
    r.results = checks.run();
    r.out =
        f.contains("--json")
            ? Doctor.toJson(
                new Doctor.Report(
                    checks.libraryVersion(),
                    Doctor.Host.of(new DoctorFiles(root), probe),
                    r.results))
            : Doctor.toText(r.results);
    r.rc = Doctor.exitCode(r.results);
    return r;
  }

  /** The command itself: {@code doctor --root <the fake tree> args...}. */
  private Run command(FakeProbe probe, String... args) {
    String[] all = new String[args.length + 3];
    all[0] = "doctor";
    all[1] = "--root";
    all[2] = root.toString();
    System.arraycopy(args, 0, all, 3, args.length);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    Run r = new Run();
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      r.rc = Main.run(all, o, e, new Doctor(o, probe));
    }
    r.out = out.toString(StandardCharsets.UTF_8);
    r.err = err.toString(StandardCharsets.UTF_8);
    return r;
  }

  private static void assertContains(String haystack, String needle) {
    assertTrue(
        haystack != null && haystack.contains(needle), "expected '" + needle + "' in: " + haystack);
  }

  // ---- a machine like the CI machine: no GPU, no driver, no RDMA ----

  @Test
  void cpuMachineSkipsTheGpuAndRdmaChecksAndExitsZero() throws IOException {
    limits("8388608", "8388608");
    write("/proc/sys/kernel/osrelease", "6.1.0-18-amd64");
    write("/proc/modules", "ext4 1015808 1 - Live 0x0000000000000000");
    FakeProbe probe = withoutLibcuda();
    Run r = doctor(probe);

    assertEquals(Doctor.EXIT_OK, r.rc, r.out);
    assertEquals(
        List.of(
            "library",
            "shm",
            "driver",
            "gpus",
            "peer access",
            "rdma",
            "libibverbs",
            "gpudirect rdma",
            "pcie affinity",
            "memlock",
            "versions"),
        r.results.stream().map(Result::check).collect(Collectors.toList()));
    assertEquals(Status.PASS, r.status("library"));
    assertContains(r.get("library").found(), "Colibri 0.1.0");
    assertContains(r.get("library").found(), "/cache/libcolibri.so.0");
    assertEquals(Status.PASS, r.status("shm"));

    Result driver = r.get("driver");
    assertEquals(Status.SKIP, driver.status());
    assertNull(driver.fix());
    assertContains(driver.found(), "no /proc/driver/nvidia/version");
    assertContains(driver.found(), "cannot load libcuda.so.1");
    assertFalse(driver.found().contains("device count failed"), driver.found());
    assertFalse(driver.found().contains("device_api.cc"), driver.found());
    assertContains(driver.found(), "no /dev/nvidia*; PCI bus: no NVIDIA GPU");
    assertContains(driver.found(), "No GPU here: the host path works; device buffers need a GPU");

    Result gpus = r.get("gpus");
    assertEquals(Status.SKIP, gpus.status());
    assertContains(gpus.found(), "no GPU (see the driver line above)");
    assertEquals(Status.SKIP, r.status("peer access"));
    Result rdma = r.get("rdma");
    assertEquals(Status.SKIP, rdma.status());
    assertNull(rdma.fix());
    assertContains(rdma.found(), "no RDMA device (no /dev/infiniband, nothing in");
    assertContains(rdma.found(), "the host path works");
    assertContains(rdma.found(), "between hosts TCP sockets");
    assertEquals(Status.SKIP, r.status("libibverbs"));
    assertEquals(Status.SKIP, r.status("gpudirect rdma"));
    assertEquals(Status.SKIP, r.status("pcie affinity"));
    Result memlock = r.get("memlock");
    assertEquals(Status.SKIP, memlock.status(), "8 MiB is too low only for RDMA");
    assertContains(memlock.found(), "8 MiB (soft), 8 MiB (hard)");
    assertContains(memlock.found(), "not judged: only RDMA needs it");
    Result versions = r.get("versions");
    assertEquals(Status.PASS, versions.status());
    assertContains(versions.found(), "Java 17.0.99 (Test)");
    assertContains(versions.found(), "Linux 6.1.0-18-amd64");
    assertContains(versions.found(), "NVIDIA driver none");

    // The text: one line per check, the fix on the same line, then the counts.
    String[] lines = r.out.split("\n");
    assertEquals(r.results.size() + 1, lines.length, r.out);
    assertTrue(lines[2].startsWith("SKIP  driver: no /proc/driver"), lines[2]);
    assertEquals("colibri doctor: 3 PASS, 0 WARN, 0 FAIL, 8 SKIP", lines[lines.length - 1]);
  }

  /** The kernel module loaded, /dev/nvidia* there, but libcuda.so.1 missing: a broken GPU. */
  private FakeProbe brokenGpu() throws IOException {
    openDriver();
    write("/dev/nvidia0", "");
    write("/dev/nvidiactl", "");
    FakeProbe probe = withoutLibcuda();
    return probe;
  }

  @Test
  void gpuThatIsPresentButBrokenFailsAndExitsOne() throws IOException {
    limits("unlimited", "unlimited");
    Run r = doctor(brokenGpu());
    assertEquals(Doctor.EXIT_FAIL, r.rc, r.out);
    Result driver = r.get("driver");
    assertEquals(Status.FAIL, driver.status());
    assertContains(driver.found(), "kernel module 580.65.06 (open)");
    assertContains(driver.found(), "/dev/nvidia0, /dev/nvidiactl");
    assertContains(driver.fix(), "the kernel module is loaded but its user-space library");
    assertContains(driver.fix(), "(580.65.06)");
    assertContains(driver.fix(), "`doctor --no-gpu`");
    assertEquals(Status.FAIL, r.status("gpus"));
    assertContains(r.get("gpus").found(), "cannot load libcuda.so.1");
    assertEquals(Status.PASS, r.status("shm"));
    assertEquals(Status.SKIP, r.status("rdma"));
    assertEquals(Status.PASS, r.status("memlock"));
    assertTrue(
        r.out.endsWith("colibri doctor: 4 PASS, 0 WARN, 2 FAIL, 5 SKIP (exit code 1)\n"), r.out);
  }

  @Test
  void noGpuSkipsTheChecksOfABrokenGpuAndExitsZero() throws IOException {
    limits("unlimited", "unlimited");
    Run r = doctor(brokenGpu(), "--no-gpu");
    assertEquals(Doctor.EXIT_OK, r.rc, r.out);
    for (String c : List.of("driver", "gpus", "peer access", "gpudirect rdma", "pcie affinity")) {
      assertEquals(Status.SKIP, r.status(c), c);
    }
    assertContains(r.get("driver").found(), "--no-gpu");
    assertEquals(Status.PASS, r.status("memlock"));
    assertTrue(r.results.stream().noneMatch(x -> x.status() == Status.FAIL), r.out);
  }

  @Test
  void libraryThatDoesNotLoadFailsAndTheDriverIsNotAsked() throws IOException {
    limits("unlimited", "unlimited");
    FakeProbe probe = new FakeProbe();
    probe.libraryFailure =
        new ColibriException(
            ErrorCode.UNSUPPORTED,
            "could not load the Colibri native library for Linux aarch64 (no jniColibriLib)");
    probe.countFailure = new IllegalStateException("must not be called");
    Run r = doctor(probe);
    assertEquals(Doctor.EXIT_FAIL, r.rc);
    assertEquals(Status.FAIL, r.status("library"));
    assertContains(r.get("library").found(), "Linux aarch64");
    assertContains(r.get("library").fix(), "classifier linux-x86_64");
    assertEquals(Status.SKIP, r.status("driver"));
    assertContains(r.get("driver").found(), "the Colibri library did not load");
    assertEquals(Status.SKIP, r.status("gpus"));
    assertContains(r.get("versions").found(), "Colibri (did not load)");
  }

  // ---- driver variants ----

  @Test
  void kernelModuleWithoutLibcudaSaysToInstallTheUserSpaceLibraries() throws IOException {
    write(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module"
            + "  535.104.05  Sat Aug 19 01:15:15 UTC 2023");
    FakeProbe probe = withoutLibcuda();
    Run r = doctor(probe);
    Result d = r.get("driver");
    assertEquals(Status.FAIL, d.status(), "a loaded kernel module is a GPU that is present");
    assertContains(d.found(), "kernel module 535.104.05 (proprietary)");
    assertContains(d.fix(), "user-space");
    assertContains(d.fix(), "(535.104.05)");
    assertContains(d.fix(), "--gpus all");
    assertEquals(Doctor.EXIT_FAIL, r.rc);
  }

  @Test
  void deviceNodesWithoutLibcudaFailToo() throws IOException {
    write("/dev/nvidia0", "");
    FakeProbe probe = withoutLibcuda();
    Run r = doctor(probe);
    Result d = r.get("driver");
    assertEquals(Status.FAIL, d.status());
    assertContains(d.found(), "no /proc/driver/nvidia/version");
    assertContains(d.found(), "; /dev/nvidia0;");
    assertContains(d.fix(), "/dev/nvidia* is there but its user-space library libcuda.so.1");
    assertEquals(Doctor.EXIT_FAIL, r.rc);
  }

  /** The kernel shows a GPU (sysfs, also in a container) that this process has no driver for. */
  @Test
  void nvidiaGpuOnThePciBusWithoutDriverWarnsToInstallTheDriverAndExitsZero() throws IOException {
    pciDevice("pci0000:17/0000:17:00.0/0000:1b:00.0", 0, "0x10de", "0x030200");
    pciDevice("pci0000:17/0000:17:01.0/0000:1c:00.0", 0, "0x15b3", "0x020700"); // a NIC
    FakeProbe probe = withoutLibcuda();
    Run r = doctor(probe);
    Result d = r.get("driver");
    assertEquals(Status.WARN, d.status());
    assertContains(d.found(), "PCI bus: 1 NVIDIA GPU(s) (0000:1b:00.0)");
    assertContains(d.found(), "this process cannot use them. The host path works");
    assertContains(d.fix(), "install the NVIDIA driver");
    assertContains(d.fix(), "--gpus all");
    assertEquals(Status.SKIP, r.status("gpus"));
    assertEquals(Doctor.EXIT_OK, r.rc, r.out);
  }

  @Test
  void cuInitFailureNamesCudaVisibleDevices() throws IOException {
    openDriver();
    FakeProbe probe = new FakeProbe();
    probe.env.put("CUDA_VISIBLE_DEVICES", "");
    probe.countFailure =
        new ColibriException(
            ErrorCode.UNSUPPORTED,
            "device count failed: cuInit failed (CUDA_ERROR_NO_DEVICE): no usable GPU (check"
                + " nvidia-smi, CUDA_VISIBLE_DEVICES, and the container's GPU access)");
    Run r = doctor(probe);
    Result d = r.get("driver");
    assertEquals(Status.FAIL, d.status());
    assertContains(d.found(), "kernel module 580.65.06 (open)");
    assertContains(d.found(), "cuInit failed (CUDA_ERROR_NO_DEVICE)");
    assertContains(d.fix(), "CUDA_VISIBLE_DEVICES (=\"\")");
    assertEquals(Status.FAIL, r.status("gpus"));
  }

  // ---- a full machine: GPUs, RDMA, topology ----

  /**
   * Two GPUs and two NICs. GPU 0 (0000:1b:00.0) and mlx5_0 (0000:1c:00.0, InfiniBand) sit under one
   * PCIe switch (0000:18:00.0) of host bridge pci0000:17 on NUMA node 0; mlx5_1 (RoCE) has its own
   * root port on pci0000:17; GPU 1 (0000:9b:00.0) is on pci0000:97, NUMA node 1.
   */
  private FakeProbe fullMachine() throws IOException {
    openDriver();
    write("/proc/sys/kernel/osrelease", "6.8.0-45-generic");
    write(
        "/proc/modules",
        "nvidia_peermem 16384 0 - Live 0x0000000000000000\n"
            + "nvidia 9732096 120 nvidia_uvm,nvidia_peermem, Live 0x0000000000000000");
    limits("unlimited", "unlimited");
    String sw = "pci0000:17/0000:17:00.0/0000:18:00.0";
    pciDevice(sw + "/0000:19:00.0/0000:1b:00.0", 0, "0x10de", "0x030200");
    String nic0 = pciDevice(sw + "/0000:19:01.0/0000:1c:00.0", 0, "0x15b3", "0x020700");
    String nic1 = pciDevice("pci0000:17/0000:17:02.0/0000:2a:00.0", 0, "0x15b3", "0x020000");
    pciDevice("pci0000:97/0000:97:00.0/0000:98:00.0/0000:9b:00.0", 1, "0x10de", "0x030200");
    rdmaDevice("mlx5_0", nic0, "4: ACTIVE", "5: LinkUp", "InfiniBand");
    String p1 = rdmaDevice("mlx5_1", nic1, "4: ACTIVE", "5: LinkUp", "Ethernet");
    write(p1 + "/gids/3", "0000:0000:0000:0000:0000:ffff:0a00:0005");
    write(p1 + "/gid_attrs/types/0", "IB/RoCE v1");
    write(p1 + "/gid_attrs/types/3", "RoCE v2");
    write(p1 + "/gid_attrs/ndevs/0", "ens2f0");
    write(p1 + "/gid_attrs/ndevs/3", "ens2f0");
    write("/sys/class/net/ens2f0/mtu", "9000");
    write("/dev/infiniband/uverbs0", "");
    write("/dev/infiniband/uverbs1", "");
    write("/dev/infiniband/rdma_cm", "");
    write("/usr/lib/x86_64-linux-gnu/libibverbs.so.1", "not really ELF");
    write("/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so", "");
    write("/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", "");
    write("/usr/lib64/libibverbs.so.1", "not really ELF"); // later in the search order
    FakeProbe probe = new FakeProbe();
    probe.gpus.add(gpu(0, "NVIDIA H200", 9, 0, "0000:1b:00.0", "sm90"));
    probe.gpus.add(gpu(1, "NVIDIA A40", 8, 6, "0000:9b:00.0", "sm80"));
    return probe;
  }

  @Test
  void fullMachinePassesWhatIsRightAndWarnsAboutTheFarGpu() throws IOException {
    FakeProbe probe = fullMachine();
    probe.noPeer.add("0-1");
    Run r = doctor(probe);
    assertEquals(Doctor.EXIT_OK, r.rc, r.out);

    Result driver = r.get("driver");
    assertEquals(Status.PASS, driver.status());
    assertContains(driver.found(), "kernel module 580.65.06 (open)");
    assertContains(driver.found(), "CUDA 13.0 (cuDriverGetVersion 13000)");
    assertEquals(Status.PASS, r.status("gpus"));
    assertContains(r.get("gpus").found(), "2 GPU(s)");
    Result g0 = r.get("gpu 0");
    assertEquals(Status.PASS, g0.status());
    assertEquals(
        "NVIDIA H200, compute capability 9.0, PCI 0000:1b:00.0, kernel image sm90"
            + " (colibri_kernels_sm90.cubin, native code)",
        g0.found());
    assertEquals(Status.PASS, r.status("gpu 1"));
    assertContains(r.get("gpu 1").found(), "compute capability 8.6");

    Result peer = r.get("peer access");
    assertEquals(Status.WARN, peer.status());
    assertContains(peer.found(), "0-1 (only 1 to 0)");
    assertContains(peer.fix(), "go through host memory");

    Result rdma = r.get("rdma");
    assertEquals(Status.PASS, rdma.status(), rdma.toString());
    assertContains(rdma.found(), "2 RDMA device(s) (mlx5_0, mlx5_1), 2 of 2 port(s) ACTIVE");
    assertContains(rdma.found(), "/dev/infiniband: rdma_cm, uverbs0, uverbs1");
    Result ib = r.get("rdma mlx5_0");
    assertEquals(Status.PASS, ib.status());
    assertEquals(
        "firmware 28.39.1002; port 1: ACTIVE (LinkUp), 200 Gb/sec (4X HDR), InfiniBand,"
            + " LID 0x5, 1 GID (active MTU: not in sysfs, `ibv_devinfo` shows it)",
        ib.found());
    Result roce = r.get("rdma mlx5_1");
    assertEquals(Status.PASS, roce.status());
    assertContains(
        roce.found(),
        "Ethernet (RoCE), netdev ens2f0 MTU 9000 (RDMA path MTU up to"
            + " 4096), RoCE v2 GIDs: 3 (10.0.0.5)");

    Result verbs = r.get("libibverbs");
    assertEquals(Status.PASS, verbs.status());
    assertContains(verbs.found(), "providers: mlx5, rxe");
    assertEquals(List.of(root.resolve("usr/lib/x86_64-linux-gnu/libibverbs.so.1")), probe.loaded);

    Result gdr = r.get("gpudirect rdma");
    assertEquals(Status.PASS, gdr.status());
    assertContains(gdr.found(), "GPUDirect RDMA through nvidia-peermem");
    assertContains(gdr.found(), "dma-buf available");

    Result a0 = r.get("pcie affinity gpu 0");
    assertEquals(Status.PASS, a0.status(), a0.toString());
    assertContains(a0.found(), "GPU 0000:1b:00.0 (NUMA node 0)");
    assertContains(a0.found(), "mlx5_0: same PCIe switch (below 0000:18:00.0)");
    assertContains(a0.found(), "mlx5_1: same root complex (pci0000:17)");
    assertContains(a0.found(), "nearest mlx5_0");
    Result a1 = r.get("pcie affinity gpu 1");
    assertEquals(Status.WARN, a1.status());
    assertContains(a1.found(), "mlx5_0: across NUMA nodes (GPU on node 1, NIC on node 0)");
    assertContains(a1.fix(), "numactl --cpunodebind=1 --membind=1");
    assertContains(a1.fix(), "link between CPU sockets");

    assertEquals(Status.PASS, r.status("memlock"));
    assertContains(r.get("memlock").found(), "unlimited (soft), unlimited (hard)");
    Result v = r.get("versions");
    assertContains(v.found(), "NVIDIA driver 580.65.06 (CUDA 13.0)");
    assertContains(v.found(), "mlx5_0 firmware 28.39.1002");
  }

  @Test
  void oldAndUnknownComputeCapabilities() throws IOException {
    FakeProbe probe = fullMachine();
    probe.gpus.set(0, gpu(0, "Tesla T4", 7, 5, "0000:1b:00.0", "ptx"));
    probe.gpus.set(1, gpu(1, "Future GPU", 10, 3, "0000:9b:00.0", "ptx"));
    Run r = doctor(probe);
    assertEquals(Doctor.EXIT_FAIL, r.rc);
    Result t4 = r.get("gpu 0");
    assertEquals(Status.FAIL, t4.status());
    assertContains(t4.fix(), "compute capability 8.0 (Ampere) or newer");
    Result future = r.get("gpu 1");
    assertEquals(Status.WARN, future.status());
    assertContains(
        future.found(),
        "kernel image ptx (colibri_kernels.ptx, PTX JIT-compiled by the" + " driver)");
    assertContains(future.fix(), "compiles the kernels at the first device call");
  }

  @Test
  void oneGpuHasNoPairAndAGpuOutsideSysfsIsSkipped() throws IOException {
    FakeProbe probe = fullMachine();
    probe.gpus.clear();
    probe.gpus.add(gpu(0, "NVIDIA H200", 9, 0, "0000:3f:00.0", "sm90")); // not in the tree
    Run r = doctor(probe);
    assertEquals(Status.SKIP, r.status("peer access"));
    assertContains(r.get("peer access").found(), "one GPU");
    assertEquals(Status.SKIP, r.status("pcie affinity gpu 0"));
    assertContains(
        r.get("pcie affinity gpu 0").found(), "0000:3f:00.0 not in /sys/bus/pci/devices");
  }

  // ---- RDMA ports that are not ready ----

  @Test
  void rdmaDevicesWithEveryPortDownFailUnlessToldNotToCheck() throws IOException {
    FakeProbe probe = fullMachine();
    write("/sys/class/infiniband/mlx5_0/ports/1/state", "2: INIT");
    write("/sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN");
    write("/sys/class/infiniband/mlx5_1/ports/1/phys_state", "2: Polling");
    Run r = doctor(probe);
    Result rdma = r.get("rdma");
    assertEquals(Status.FAIL, rdma.status());
    assertContains(rdma.found(), "none of their 2 port(s) ACTIVE");
    assertContains(rdma.fix(), "`doctor --no-rdma`");
    Result ib = r.get("rdma mlx5_0");
    assertEquals(Status.FAIL, ib.status());
    assertContains(ib.found(), "port 1: INIT (LinkUp)");
    assertContains(ib.fix(), "subnet manager");
    Result roce = r.get("rdma mlx5_1");
    assertEquals(Status.FAIL, roce.status());
    assertContains(roce.fix(), "no link (physical state Polling)");
    assertContains(roce.fix(), "check the cable");
    assertEquals(Doctor.EXIT_FAIL, r.rc, "a device that is present but cannot carry RDMA");

    Run off = doctor(probe, "--no-rdma");
    assertEquals(Doctor.EXIT_OK, off.rc, off.out);
    for (String c : List.of("rdma", "libibverbs", "gpudirect rdma", "pcie affinity")) {
      assertEquals(Status.SKIP, off.status(c), c);
      assertContains(off.get(c).found(), "not checked (--no-rdma)");
    }
    assertTrue(off.results.stream().noneMatch(x -> x.check().startsWith("rdma ")), off.out);
  }

  @Test
  void oneDeviceDownNextToAnActiveOneIsAWarning() throws IOException {
    FakeProbe probe = fullMachine();
    write("/sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN");
    write("/sys/class/infiniband/mlx5_1/ports/1/phys_state", "3: Disabled");
    Run r = doctor(probe);
    assertEquals(Status.PASS, r.status("rdma"));
    assertContains(r.get("rdma").found(), "1 of 2 port(s) ACTIVE");
    Result roce = r.get("rdma mlx5_1");
    assertEquals(Status.WARN, roce.status());
    assertContains(roce.fix(), "is disabled: enable it");
    assertContains(roce.fix(), "COLIBRI_VERBS_DEVICE");
    assertEquals(Doctor.EXIT_OK, r.rc, r.out);
  }

  @Test
  void rocePortWithoutRoceV2GidAndASmallMtu() throws IOException {
    FakeProbe probe = fullMachine();
    write("/sys/class/infiniband/mlx5_1/ports/1/gid_attrs/types/3", "IB/RoCE v1");
    write("/sys/class/net/ens2f0/mtu", "1500");
    Result roce = doctor(probe).get("rdma mlx5_1");
    assertEquals(Status.WARN, roce.status());
    assertContains(roce.found(), "MTU 1500 (RDMA path MTU up to 1024)");
    assertContains(roce.found(), "RoCE v2 GIDs: none");
    assertContains(roce.fix(), "give its netdev ens2f0 an IP address");
  }

  @Test
  void devicesInSysfsButNoDevInfinibandIsAContainerProblem() throws IOException {
    FakeProbe probe = fullMachine();
    for (String n : List.of("uverbs0", "uverbs1", "rdma_cm")) {
      Files.delete(root.resolve("dev/infiniband/" + n));
    }
    Files.delete(root.resolve("dev/infiniband"));
    Result rdma = doctor(probe).get("rdma");
    assertEquals(Status.WARN, rdma.status());
    assertContains(rdma.found(), "no /dev/infiniband: this process cannot open them");
    assertContains(rdma.fix(), "--device=/dev/infiniband");
    limits("65536", "65536");
    Run r = doctor(probe);
    assertEquals(Status.SKIP, r.status("gpudirect rdma"));
    assertContains(r.get("gpudirect rdma").found(), "no RDMA device this process can open");
    assertEquals(Status.SKIP, r.status("memlock"));
    assertEquals(Doctor.EXIT_OK, r.rc, "hardware this process cannot open is not broken");
  }

  @Test
  void libibverbsMissingOrBrokenOrWithoutProvidersFailsWhereDevicesAreUsable() throws IOException {
    FakeProbe probe = fullMachine();
    probe.loadError = "libnl-3.so.200: cannot open shared object file";
    Run r = doctor(probe);
    Result broken = r.get("libibverbs");
    assertEquals(Status.FAIL, broken.status());
    assertContains(broken.found(), "does not load: libnl-3.so.200");
    assertEquals(Doctor.EXIT_FAIL, r.rc);

    probe.loadError = null;
    Files.delete(root.resolve("usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so"));
    Files.delete(root.resolve("usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"));
    Result noProviders = doctor(probe).get("libibverbs");
    assertEquals(Status.FAIL, noProviders.status());
    assertContains(noProviders.fix(), "ibverbs-providers");

    Files.delete(root.resolve("usr/lib/x86_64-linux-gnu/libibverbs.so.1"));
    Files.delete(root.resolve("usr/lib64/libibverbs.so.1"));
    Result missing = doctor(probe).get("libibverbs");
    assertEquals(Status.FAIL, missing.status());
    assertContains(missing.fix(), "rdma-core");

    // Devices this process cannot open (no /dev/infiniband): a WARN.
    for (String n : List.of("uverbs0", "uverbs1", "rdma_cm")) {
      Files.delete(root.resolve("dev/infiniband/" + n));
    }
    assertEquals(Status.WARN, doctor(probe).status("libibverbs"));

    // Found through LD_LIBRARY_PATH first.
    write("/opt/ofed/lib/libibverbs.so.1", "x");
    probe.env.put("LD_LIBRARY_PATH", "/opt/ofed/lib:relative/ignored");
    probe.loaded.clear();
    assertNotNull(doctor(probe).get("libibverbs"));
    assertEquals(root.resolve("opt/ofed/lib/libibverbs.so.1"), probe.loaded.get(0));
  }

  // ---- GPUDirect RDMA ----

  @Test
  void gpuDirectThroughDmaBufWithoutPeermem() throws IOException {
    FakeProbe probe = fullMachine();
    write("/proc/modules", "nvidia 9732096 120 nvidia_uvm, Live 0x0000000000000000");
    Result gdr = doctor(probe).get("gpudirect rdma");
    assertEquals(Status.PASS, gdr.status());
    assertContains(gdr.found(), "GPUDirect RDMA through dma-buf");
    assertContains(gdr.found(), "nvidia_peermem not loaded");
  }

  @Test
  void neitherPeermemNorDmaBufFallsBackToHostStaging() throws IOException {
    FakeProbe probe = fullMachine();
    write("/proc/modules", "nvidia 9732096 120 nvidia_uvm, Live 0x0000000000000000");
    write(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023");
    write("/proc/sys/kernel/osrelease", "5.4.0-150-generic");
    probe.gpus.set(
        0, new Device.Info(0, "NVIDIA H200", 9, 0, 12020, "0000:1b:00.0", "sm90", 1, -1));
    probe.gpus.set(1, new Device.Info(1, "NVIDIA A40", 8, 6, 12020, "0000:9b:00.0", "sm80", 1, -1));
    Run r = doctor(probe);
    Result gdr = r.get("gpudirect rdma");
    assertEquals(Status.WARN, gdr.status());
    assertContains(gdr.found(), "Linux 5.4.0-150-generic, 5.12+ needed");
    assertContains(gdr.found(), "proprietary NVIDIA kernel module");
    assertContains(gdr.fix(), "staged through pinned host memory");
    assertContains(gdr.fix(), "modprobe nvidia-peermem");
    assertEquals(Doctor.EXIT_OK, r.rc);
    assertContains(r.get("versions").found(), "NVIDIA driver 535.104.05 (CUDA 12.2)");
  }

  @Test
  void driverThatSaysNoDmaBufWins() throws IOException {
    FakeProbe probe = fullMachine();
    write("/proc/modules", "nvidia 9732096 120 nvidia_uvm, Live 0x0000000000000000");
    probe.gpus.set(1, new Device.Info(1, "NVIDIA A40", 8, 6, 13000, "0000:9b:00.0", "sm80", 0, 0));
    Result gdr = doctor(probe).get("gpudirect rdma");
    assertEquals(Status.WARN, gdr.status());
    assertContains(gdr.found(), "driver: not supported");
    assertContains(gdr.found(), "GPU(s) 1 do not support GPUDirect RDMA");
  }

  @Test
  void gpuDirectWithoutRdmaDeviceIsSkippedButDescribed() throws IOException {
    openDriver();
    write("/proc/sys/kernel/osrelease", "6.8.0");
    FakeProbe probe = new FakeProbe();
    probe.gpus.add(gpu(0, "NVIDIA H200", 9, 0, "0000:1b:00.0", "sm90"));
    Run r = doctor(probe);
    Result gdr = r.get("gpudirect rdma");
    assertEquals(Status.SKIP, gdr.status());
    assertContains(gdr.found(), "no RDMA device; no /proc/modules");
    assertContains(gdr.found(), "dma-buf available");
    assertEquals(Status.SKIP, r.status("pcie affinity"));
    assertEquals(Status.SKIP, r.status("memlock"), "no /proc/self/limits in this tree");
  }

  // ---- memlock ----

  @Test
  void memlockBelowTheThresholdFailsWithAnRdmaDeviceAndIsNotJudgedWithout() throws IOException {
    FakeProbe probe = fullMachine();
    limits(String.valueOf(64L << 20), "unlimited");
    assertEquals(Status.PASS, doctor(probe).status("memlock"));
    limits(String.valueOf((64L << 20) - 4096), "unlimited");
    Run r = doctor(probe);
    Result low = r.get("memlock");
    assertEquals(Status.FAIL, low.status());
    assertEquals(Doctor.EXIT_FAIL, r.rc);
    assertFalse(low.fix().contains("the hard limit is"), low.fix());
    assertContains(low.fix(), "limits.conf");
    assertContains(low.fix(), "`doctor --no-rdma`");
    limits("8388608", "8388608");
    Result lower = doctor(probe).get("memlock");
    assertContains(lower.found(), "8 MiB (soft), 8 MiB (hard)");
    assertContains(lower.fix(), "the hard limit is 8 MiB too");
    assertContains(lower.fix(), "ulimit -l unlimited");
    assertContains(lower.fix(), "--ulimit memlock=-1");

    limits("65536", "65536");
    Run off = doctor(probe, "--no-rdma");
    assertEquals(Status.SKIP, off.status("memlock"));
    assertContains(off.get("memlock").found(), "64 KiB (soft), 64 KiB (hard)");
    assertContains(off.get("memlock").found(), "the RDMA checks are off (--no-rdma)");
    assertEquals(Doctor.EXIT_OK, off.rc, off.out);
  }

  // ---- /dev/shm ----

  private static final long MIB = 1L << 20;

  /** A machine without GPU and RDMA, memlock unlimited. */
  private FakeProbe cpuMachine() throws IOException {
    limits("unlimited", "unlimited");
    return withoutLibcuda();
  }

  /** A CPU machine (no GPU, no RDMA) whose /dev/shm the probe describes as {@code store}. */
  private Run shmMachine(Store store, String... flags) throws IOException {
    FakeProbe probe = cpuMachine();
    probe.store = store;
    return doctor(probe, flags);
  }

  @Test
  void whatARankHoldsInDevShm() {
    DoctorShm.Need d = DoctorShm.need(Map.of());
    // 4 KiB control block + 4 slots x (64 B + 256 KiB), in pages (1028 KiB) + 64 KiB of scratch.
    assertEquals(4096 + 1028 * 1024 + 64 * 1024, d.collectives());
    assertEquals(64 * MIB + 4096, d.most());
    assertTrue(d.settings().isEmpty());

    DoctorShm.Need set =
        DoctorShm.need(
            Map.of(
                "COLIBRI_CHUNK_BYTES", "1048576",
                "COLIBRI_PIPELINE_DEPTH", "1", // runs as 2
                "COLIBRI_DIRECT_MAX_BYTES", "0",
                "COLIBRI_STAGING_CAP_BYTES", String.valueOf(256 * MIB)));
    // 2 slots x (64 B + 1 MiB), in pages: 2 MiB + 4 KiB; no direct scratch.
    assertEquals(4096 + 2 * MIB + 4096, set.collectives());
    assertEquals(256 * MIB + 4096, set.most());
    assertEquals(4, set.settings().size(), set.settings().toString());

    DoctorShm.Need capped =
        DoctorShm.need(
            Map.of(
                "COLIBRI_CHUNK_BYTES",
                String.valueOf(64 * MIB),
                "COLIBRI_STAGING_CAP_BYTES",
                "65536"));
    assertEquals(4096 + 65536, capped.collectives(), "never more than the cap");

    DoctorShm.Need bad = DoctorShm.need(Map.of("COLIBRI_STAGING_CAP_BYTES", "64M"));
    assertEquals(64 * MIB + 4096, bad.most());
    assertEquals(
        List.of("COLIBRI_STAGING_CAP_BYTES='64M' not valid: the default counted"), bad.settings());

    assertEquals("0:25", DoctorShm.deviceText(25));
    assertEquals("259:3", DoctorShm.deviceText((259L << 8) | 3));
    assertEquals("4096:256", DoctorShm.deviceText((1L << 44) | (1L << 20)));
    assertEquals("1g", DoctorShm.dockerSize(128 * MIB + 8192));
    assertEquals("3g", DoctorShm.dockerSize((2L << 30) + 1));
  }

  @Test
  void aLargeTmpfsPassesAndSaysWhatWasNotChecked() throws IOException {
    Run r = shmMachine(new Store("tmpfs", 24L << 30, 23L << 30, "0:25"));
    Result shm = r.get("shm");
    assertEquals(Status.PASS, shm.status(), shm.toString());
    assertContains(shm.found(), "/dev/shm: tmpfs, 24 GiB, 23 GiB free, device 0:25");
    assertContains(shm.found(), "a child process shares its memory");
    assertContains(shm.found(), "a rank holds about 1.1 MiB there for collectives, at most 64 MiB");
    assertContains(shm.found(), "with the default settings");
    assertContains(
        shm.found(), "room for the collectives of 22961 ranks, for 383 ranks at their cap");
    assertContains(shm.found(), "not checked: that the ranks' processes in other containers");
    assertEquals(Doctor.EXIT_OK, r.rc);
  }

  @Test
  void dockersDefault64MiBWarnsWithTheFix() throws IOException {
    write("/dev/shm/clb-j0123456789abcdef-r0-ctl", "");
    Run r = shmMachine(new Store("tmpfs", 64 * MIB, 64 * MIB, "0:99"));
    Result shm = r.get("shm");
    assertEquals(Status.WARN, shm.status(), shm.toString());
    assertContains(shm.found(), "/dev/shm: tmpfs, 64 MiB, 64 MiB free, device 0:99");
    assertContains(shm.found(), "1 Colibri segment(s) (clb-*) there now");
    assertContains(shm.found(), "room for the collectives of 59 ranks, for 0 ranks at their cap");
    assertContains(shm.found(), "smaller than two ranks at their staging cap (128 MiB + 8 KiB");
    assertContains(shm.fix(), "`docker run --shm-size=1g`");
    assertContains(shm.fix(), "--ipc=host");
    assertContains(shm.fix(), "emptyDir with medium: Memory");
    assertContains(shm.fix(), "COLIBRI_TRANSPORT=socket");
    assertEquals(Doctor.EXIT_OK, r.rc, "a small /dev/shm is a warning: small runs work");
    assertTrue(r.out.contains("\nWARN  shm: /dev/shm: tmpfs, 64 MiB"), r.out);
  }

  @Test
  void aLargerCapInTheEnvironmentRaisesTheBar() throws IOException {
    FakeProbe probe = cpuMachine();
    probe.store = new Store("tmpfs", 1L << 30, 1L << 30, null);
    assertEquals(Status.PASS, doctor(probe).status("shm"));
    probe.env.put("COLIBRI_STAGING_CAP_BYTES", String.valueOf(1L << 30));
    Result shm = doctor(probe).get("shm");
    assertEquals(Status.WARN, shm.status());
    assertContains(shm.found(), "with COLIBRI_STAGING_CAP_BYTES=1073741824");
    assertContains(shm.fix(), "--shm-size=3g");
  }

  @Test
  void missingOrTinyOrUnwritableDevShmFailsAndExitsOne() throws IOException {
    Files.delete(root.resolve("dev/shm"));
    Run missing = shmMachine(new Store("tmpfs", 64 * MIB, 64 * MIB, null));
    Result shm = missing.get("shm");
    assertEquals(Status.FAIL, shm.status());
    assertContains(shm.found(), "no /dev/shm: ranks on one host cannot share memory");
    assertContains(shm.fix(), "mount -t tmpfs");
    assertContains(shm.fix(), "COLIBRI_TRANSPORT=socket");
    assertEquals(Doctor.EXIT_FAIL, missing.rc);
    assertTrue(missing.out.endsWith("(exit code 1)\n"), missing.out);

    write("/dev/shm", "a file");
    assertContains(shmMachine(null).get("shm").found(), "/dev/shm is not a folder");
    Files.delete(root.resolve("dev/shm"));
    dir("/dev/shm");

    Run tiny = shmMachine(new Store("tmpfs", 2 * MIB, 2 * MIB, null));
    assertEquals(Status.FAIL, tiny.status("shm"));
    assertContains(tiny.get("shm").found(), "too small for the collectives of two ranks (2.1 MiB)");
    assertEquals(Doctor.EXIT_FAIL, tiny.rc);

    FakeProbe probe = cpuMachine();
    probe.sharing =
        new Sharing(
            Outcome.CANNOT_WRITE,
            "cannot make, size or map a file there: AccessDeniedException: /dev/shm/x");
    Run denied = doctor(probe);
    assertEquals(Status.FAIL, denied.status("shm"));
    assertContains(denied.get("shm").found(), "AccessDeniedException");
    assertContains(denied.get("shm").fix(), "chmod 1777 /dev/shm");
    assertEquals(Doctor.EXIT_FAIL, denied.rc);

    probe.sharing = new Sharing(Outcome.NOT_SHARED, "a child process did not share the memory");
    assertEquals(Status.FAIL, doctor(probe).status("shm"));
    assertEquals(List.of(root.resolve("dev/shm")), probe.shmAsked.subList(0, 1));
  }

  @Test
  void fullNotTmpfsOrUnknownDevShmWarns() throws IOException {
    Result full = shmMachine(new Store("tmpfs", 1L << 30, MIB, "0:25")).get("shm");
    assertEquals(Status.WARN, full.status());
    assertContains(full.found(), "almost full");
    assertContains(full.fix(), "ls -la /dev/shm");

    Result busy = shmMachine(new Store("tmpfs", 1L << 30, 100 * MIB, "0:25")).get("shm");
    assertEquals(Status.WARN, busy.status());
    assertContains(busy.found(), "less free than two ranks at their staging cap need");

    Result disk = shmMachine(new Store("overlay", 100L << 30, 90L << 30, "0:51")).get("shm");
    assertEquals(Status.WARN, disk.status());
    assertContains(disk.found(), "not a tmpfs but overlay");
    assertContains(disk.fix(), "mount a tmpfs at /dev/shm");

    FakeProbe probe = cpuMachine();
    probe.storeFailure = new IOException("statvfs: Permission denied");
    probe.sharing =
        new Sharing(
            Outcome.NOT_CHECKED, "not checked whether another process shares it: no /bin/sh");
    Run r = doctor(probe);
    Result unknown = r.get("shm");
    assertEquals(Status.WARN, unknown.status());
    assertContains(unknown.found(), "cannot read its file system (statvfs: Permission denied)");
    assertContains(unknown.found(), "no /bin/sh");
    assertContains(unknown.fix(), "df -h /dev/shm");
    assertEquals(Doctor.EXIT_OK, r.rc);
  }

  // ---- output and arguments ----

  @Test
  void jsonIsOneObjectWithVersionHostSummaryAndTheChecks() throws IOException {
    limits("8388608", "unlimited");
    write("/proc/sys/kernel/hostname", "gpu-node-7");
    write("/proc/sys/kernel/osrelease", "6.8.0-45-generic");
    write("/etc/os-release", "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nID=ubuntu");
    write("/proc/meminfo", "MemTotal:       2113511260 kB\nMemFree:        1900000000 kB");
    openDriver(); // a GPU that is present, with no libcuda.so.1: a FAIL
    FakeProbe probe = withoutLibcuda();
    Run r = command(probe, "--json");
    assertEquals(Doctor.EXIT_FAIL, r.rc);
    assertEquals("", r.err);
    JsonNode json = Mappers.JSON.readTree(r.out);
    assertEquals("colibri-doctor", json.get("tool").asText());
    assertEquals("0.1.0", json.get("version").asText(), "the Colibri version");
    JsonNode host = json.get("host");
    assertEquals("gpu-node-7", host.get("hostname").asText());
    assertEquals("Ubuntu 24.04.1 LTS", host.get("os").asText());
    assertEquals("6.8.0-45-generic", host.get("kernel").asText());
    assertEquals(System.getProperty("os.arch"), host.get("arch").asText());
    assertEquals(Runtime.getRuntime().availableProcessors(), host.get("cpus").asInt());
    assertEquals(2113511260L * 1024, host.get("memory_bytes").asLong());
    assertEquals("17.0.99 (Test)", host.get("java").asText());

    List<Result> results = doctor(probe).results;
    JsonNode checks = json.get("checks");
    assertEquals(results.size(), checks.size());
    Map<Status, Integer> counts = new HashMap<>();
    for (int i = 0; i < results.size(); i++) {
      Result want = results.get(i);
      JsonNode got = checks.get(i);
      assertEquals(Set.of("check", "status", "found", "fix"), fieldNames(got));
      assertEquals(want.check(), got.get("check").asText());
      assertEquals(want.status().name(), got.get("status").asText());
      assertEquals(want.found(), got.get("found").asText());
      assertEquals(want.fix() == null, got.get("fix").isNull(), want.check());
      counts.merge(want.status(), 1, Integer::sum);
    }
    JsonNode summary = json.get("summary");
    for (Status st : Status.values()) {
      String key = st.name().toLowerCase(Locale.ROOT);
      assertEquals(counts.getOrDefault(st, 0), summary.get(key).asInt(), key);
    }
    assertEquals("FAIL", summary.get("verdict").asText());
    assertEquals(1, summary.get("exit_code").asInt());
    assertFalse(r.out.contains("colibri doctor:"), "no text summary in JSON mode");
  }

  private static Set<String> fieldNames(JsonNode node) {
    Set<String> names = new HashSet<>();
    node.fieldNames().forEachRemaining(names::add);
    return names;
  }

  @Test
  void theCommandReadsBelowRootAndPrintsTextOrJson() throws IOException {
    FakeProbe probe = fullMachine();
    List<Result> expected = new DoctorChecks(root, probe, false, false).run();
    Run text = command(probe);
    assertEquals(Doctor.EXIT_OK, text.rc, text.out + text.err);
    assertEquals(Doctor.toText(expected), text.out);
    assertTrue(text.out.startsWith("PASS  library: Colibri 0.1.0"), text.out);
    assertContains(text.out, "\nPASS  rdma mlx5_0: firmware 28.39.1002; port 1: ACTIVE");
    Run json = command(probe, "--json");
    assertEquals(
        Doctor.toJson(
            new Doctor.Report("0.1.0", Doctor.Host.of(new DoctorFiles(root), probe), expected)),
        json.out);
    assertEquals("", json.err);
    JsonNode summary = Mappers.JSON.readTree(json.out).get("summary");
    assertEquals(0, summary.get("fail").asInt());
    assertEquals(
        summary.get("warn").asInt() > 0 ? "WARN" : "PASS", summary.get("verdict").asText());
    assertEquals(0, summary.get("exit_code").asInt());
    probe.countFailure = new ColibriException(ErrorCode.UNSUPPORTED, NO_DRIVER);
    assertEquals(Doctor.EXIT_FAIL, command(probe, "--json").rc);
    assertEquals(Doctor.EXIT_OK, command(probe, "--no-gpu", "--json").rc);
  }

  /** Quotes, backslashes, line ends and control characters come back as they were. */
  @Test
  void jsonKeepsEveryCharacterAndSaysWhenTheLibraryDoesNotLoad() throws IOException {
    String found = "a\"b\\c\nd\te\u0001 µ";
    String json =
        Doctor.toJson(
            new Doctor.Report(
                null,
                Doctor.Host.of(new DoctorFiles(root), new FakeProbe()),
                List.of(Result.warn("x", found, "g"), Result.skip("y", "n/a"))));
    JsonNode tree = Mappers.JSON.readTree(json);
    assertTrue(tree.get("version").isNull(), json);
    assertTrue(tree.get("host").get("hostname").isNull(), "no such file below the root: null");
    assertEquals(found, tree.get("checks").get(0).get("found").asText());
    assertEquals("g", tree.get("checks").get(0).get("fix").asText());
    assertEquals("WARN", tree.get("summary").get("verdict").asText());
    assertEquals(0, tree.get("summary").get("exit_code").asInt());
    assertEquals(1, tree.get("summary").get("skip").asInt());

    FakeProbe broken = new FakeProbe();
    broken.libraryFailure = new ColibriException(ErrorCode.UNSUPPORTED, "no natives here");
    broken.countFailure = new ColibriException(ErrorCode.UNSUPPORTED, NO_DRIVER);
    JsonNode none = Mappers.JSON.readTree(command(broken, "--json").out);
    assertTrue(none.get("version").isNull(), none.toString());
    assertEquals("FAIL", none.get("checks").get(0).get("status").asText());
  }

  /** The tool's whole command line, with {@code probe} behind the doctor command. */
  private static int run(String[] args, PrintStream o, PrintStream e, FakeProbe probe) {
    return Main.run(args, o, e, new Doctor(o, probe));
  }

  @Test
  void usageErrorsAndHelp() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
    PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
    FakeProbe probe = new FakeProbe();
    assertEquals(Commands.EXIT_USAGE, run(new String[] {"doctor", "--bogus"}, o, e, probe));
    assertContains(
        err.toString(StandardCharsets.UTF_8), "colibri doctor: Unknown option: '--bogus'");
    assertContains(err.toString(StandardCharsets.UTF_8), "doctor --help");
    err.reset();
    assertEquals(Commands.EXIT_USAGE, run(new String[] {"doctor", "--root"}, o, e, probe));
    assertContains(
        err.toString(StandardCharsets.UTF_8),
        "Missing required parameter for option '--root' (DIR)");
    assertEquals(Doctor.EXIT_OK, run(new String[] {"doctor", "--help"}, o, e, probe));
    assertContains(
        out.toString(StandardCharsets.UTF_8), "Usage: java -jar colibri-bench.jar doctor");
    String help = out.toString(StandardCharsets.UTF_8);
    assertContains(help, "--no-gpu");
    assertContains(help, "--no-rdma");
    assertContains(help, "the GPU checks SKIP");
    assertContains(help, "device buffers need a GPU");
    assertContains(help, "0  the host path can run here");
    assertContains(help, "1  a check FAILed: something the host path needs");
    assertContains(help, "2  bad command line");
    assertTrue(probe.loaded.isEmpty(), "help and errors check nothing");
    assertTrue(probe.shmAsked.isEmpty(), "help and errors check nothing");
  }

  // ---- pieces ----

  @Test
  void roceMtuGidTextAndStateNames() {
    assertEquals(4096, DoctorRdma.roceMtu(9000));
    assertEquals(4096, DoctorRdma.roceMtu(4096 + 96));
    assertEquals(2048, DoctorRdma.roceMtu(4096 + 95));
    assertEquals(1024, DoctorRdma.roceMtu(1500));
    assertEquals(0, DoctorRdma.roceMtu(300));
    assertEquals("10.0.0.5", DoctorRdma.gidText("0000:0000:0000:0000:0000:ffff:0a00:0005"));
    assertNull(DoctorRdma.gidText("0000:0000:0000:0000:0000:0000:0000:0000"));
    assertEquals(
        "fe80:0000:0000:0000:0c42:a103:0065:1234",
        DoctorRdma.gidText("fe80:0000:0000:0000:0c42:a103:0065:1234"));
    assertNull(DoctorRdma.gidText("garbage"));
    assertEquals("ACTIVE", DoctorRdma.stateName("4: ACTIVE"));
    assertEquals("LinkUp", DoctorRdma.stateName("5: LinkUp"));
  }

  @Test
  void pciDistances() throws IOException {
    String sw = "pci0000:17/0000:17:00.0/0000:18:00.0";
    pciDevice(sw + "/0000:19:00.0/0000:1b:00.0", 0, "0x10de", "0x030200");
    pciDevice(sw + "/0000:19:01.0/0000:1c:00.0", 0, "0x15b3", "0x020700");
    pciDevice("pci0000:17/0000:17:02.0/0000:2a:00.0", 0, "0x15b3", "0x020700");
    pciDevice("pci0000:3a/0000:3a:00.0/0000:3b:00.0", 0, "0x15b3", "0x020700");
    pciDevice("pci0000:97/0000:97:00.0/0000:9b:00.0", 1, "0x15b3", "0x020700");
    pciDevice("pci0000:d7/0000:d7:00.0/0000:d9:00.0", -1, "0x15b3", "0x020700");
    DoctorFiles f = new DoctorFiles(root);
    DoctorPci.Location g = DoctorPci.locate(f.path("/sys/bus/pci/devices/0000:1b:00.0"));
    assertNotNull(g);
    assertEquals("0000:1b:00.0", g.address());
    assertEquals("pci0000:17", g.hostBridge());
    assertEquals(List.of("0000:17:00.0", "0000:18:00.0", "0000:19:00.0"), g.bridges());
    assertEquals(0, g.numaNode());
    assertEquals(DoctorPci.Distance.SWITCH, distanceTo(f, g, "0000:1c:00.0"));
    assertEquals(DoctorPci.Distance.ROOT_COMPLEX, distanceTo(f, g, "0000:2a:00.0"));
    assertEquals(DoctorPci.Distance.NUMA_NODE, distanceTo(f, g, "0000:3b:00.0"));
    assertEquals(DoctorPci.Distance.CROSS_NUMA, distanceTo(f, g, "0000:9b:00.0"));
    assertEquals(DoctorPci.Distance.UNKNOWN, distanceTo(f, g, "0000:d9:00.0"));
    assertNull(DoctorPci.locate(f.path("/sys/bus/pci/devices/0000:ff:00.0")));
    dir("/sys/devices/virtual/infiniband/rxe0");
    assertNull(
        DoctorPci.locate(f.path("/sys/devices/virtual/infiniband/rxe0")),
        "a software device has no PCI location");
  }

  private static DoctorPci.Distance distanceTo(DoctorFiles f, DoctorPci.Location g, String id) {
    DoctorPci.Location n = DoctorPci.locate(f.path("/sys/bus/pci/devices/" + id));
    assertNotNull(n, id);
    return DoctorPci.distance(g, n);
  }

  @Test
  void reasonDropsTheContextAndTheBreadcrumbs() {
    assertEquals(
        "no CUDA driver: x",
        DoctorChecks.reason(
            new RuntimeException("device count failed: no CUDA driver: x\n  at a.cc:1")));
    assertEquals("plain", DoctorChecks.reason(new RuntimeException("plain")));
    assertTrue(DoctorChecks.kernelAtLeast("5.12.0-1", 5, 12));
    assertTrue(DoctorChecks.kernelAtLeast("6.1.0", 5, 12));
    assertFalse(DoctorChecks.kernelAtLeast("5.11.22", 5, 12));
    assertFalse(DoctorChecks.kernelAtLeast(null, 5, 12));
    assertEquals("8 MiB", DoctorFiles.bytes(8L << 20));
    assertEquals("1.5 GiB", DoctorFiles.bytes(3L << 29));
  }

  // ---- the real machine ----

  @Test
  void runsOnThisMachineWithEveryCheckInOrder() {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int rc;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      rc = Main.run(new String[] {"doctor"}, o, e);
    }
    String text = out.toString(StandardCharsets.UTF_8);
    assertTrue(rc == Doctor.EXIT_OK || rc == Doctor.EXIT_FAIL, rc + "\n" + text + err);
    assertEquals(
        rc == Doctor.EXIT_FAIL, text.contains("\nFAIL  ") || text.startsWith("FAIL  "), text);
    int last = -1;
    for (String check :
        List.of(
            "library:",
            "shm:",
            "driver:",
            "gpus:",
            "peer access:",
            "rdma:",
            "libibverbs:",
            "gpudirect rdma:",
            "pcie affinity",
            "memlock:",
            "versions:")) {
      int at = text.indexOf("  " + check);
      assertTrue(at > last, check + " missing or out of order:\n" + text);
      last = at;
    }
    assertTrue(text.contains("PASS  library: Colibri 0.1.0"), text);
    assertFalse(text.contains("the check itself failed"), text);
  }

  /** Whether this machine shows a GPU or an RDMA device to the doctor (the CI machine: neither). */
  private static boolean hasGpuOrRdma() {
    DoctorFiles real = new DoctorFiles(Path.of("/"));
    return Files.exists(real.path("/proc/driver/nvidia/version"))
        || real.list("/dev").stream().anyMatch(n -> n.startsWith("nvidia"))
        || !real.list("/sys/class/infiniband").isEmpty();
  }

  /** On a machine without GPU and RDMA (as here), the doctor says the host path works: exit 0. */
  @Test
  void thisMachineWithoutGpuOrRdmaSkipsThoseChecksAndExitsZero() {
    assumeFalse(hasGpuOrRdma(), "this machine has a GPU or an RDMA device");
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int rc;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      rc = Main.run(new String[] {"doctor"}, o, e);
    }
    String text = out.toString(StandardCharsets.UTF_8);
    assertEquals(Doctor.EXIT_OK, rc, text + err);
    assertFalse(text.contains("FAIL  "), text);
    for (String check :
        List.of("driver", "gpus", "peer access", "rdma", "gpudirect rdma", "pcie affinity")) {
      assertTrue(text.contains("\nSKIP  " + check + ": "), check + ":\n" + text);
    }
    assertContains(text, "No GPU here: the host path works; device buffers need a GPU");
    assertContains(text, "\nSKIP  rdma: no RDMA device");
    assertTrue(
        text.contains("\nPASS  shm: /dev/shm: ") || text.contains("\nWARN  shm: /dev/shm: "), text);
    assertContains(text, "a child process shares its memory");
    assertFalse(text.contains("(exit code 1)"), text);
  }

  /** The real probe: a child process shares a file's memory in a folder; none where none is. */
  @Test
  void aChildProcessSharesTheMemoryOfAFileHere() throws IOException {
    Path dir = root.resolve("dev/shm");
    Sharing here = DoctorShm.childSees(dir);
    assertEquals(Outcome.SHARED, here.outcome(), here.detail());
    assertEquals(List.of(), DoctorFiles.list(dir), "the file is removed again");
    Sharing nowhere = DoctorShm.childSees(root.resolve("no/such/folder"));
    assertEquals(Outcome.CANNOT_WRITE, nowhere.outcome(), nowhere.detail());
    assertContains(nowhere.detail(), "NoSuchFileException");

    Store store = DoctorProbe.system().store(root);
    assertTrue(store.totalBytes() > 0 && store.availableBytes() >= 0, store.toString());
    assertNotNull(store.type(), store.toString());
    assertTrue(store.device().matches("\\d+:\\d+"), store.toString());
  }
}
