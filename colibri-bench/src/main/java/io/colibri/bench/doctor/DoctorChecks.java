/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import io.colibri.bench.doctor.Doctor.Result;
import io.colibri.bench.doctor.DoctorPci.Distance;
import io.colibri.bench.doctor.DoctorPci.Location;
import io.colibri.bench.doctor.DoctorRdma.RdmaDevice;
import io.colibri.jni.Device;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The doctor's checks, in order; later checks use what earlier ones found (the GPUs, the RDMA
 * devices). Each returns one or more {@link Result}s; a check that throws becomes a WARN line
 * rather than ending the run.
 *
 * <p>FAIL is kept for what the host path needs (the library, /dev/shm) and for a device that is
 * present but broken: a GPU counts as present when the NVIDIA kernel module is loaded or
 * /dev/nvidia* exists, an RDMA device when /sys/class/infiniband lists it and /dev/infiniband has
 * a uverbs node for this process. Without the device its checks SKIP; hardware that the kernel
 * shows but this process cannot open (an NVIDIA GPU on the PCI bus without a driver, RDMA devices
 * without /dev/infiniband, as in a container) is a WARN.
 */
final class DoctorChecks {

  /** Below this, a memlock limit is a WARN (RDMA registrations of host memory count against it). */
  static final long MEMLOCK_MIN_BYTES = 64L << 20;

  private static final Pattern MODULE_VERSION =
      Pattern.compile("Kernel Module(?: for \\S+)?\\s+(\\d+(?:\\.\\d+)+)");

  /** Whether this process has an NVIDIA GPU, as far as the files tell. */
  enum GpuPresence {
    /** No kernel module, no /dev/nvidia*, none on the PCI bus. */
    NONE,
    /** NVIDIA GPUs on the PCI bus, but no kernel module and no /dev/nvidia*. */
    UNREACHABLE,
    /** The kernel module is loaded or /dev/nvidia* exists. */
    PRESENT
  }

  private static final Pattern NVIDIA_NODE = Pattern.compile("nvidia(ctl|\\d+)");

  private final DoctorFiles files;
  private final DoctorProbe probe;
  private final boolean noGpu;
  private final boolean noRdma;
  private final Map<String, String> env;
  private final DoctorRdma rdma;
  private final DoctorShm shm;

  // What the checks found, for the later ones.
  private DoctorProbe.Library library;
  private String driverProblem; // the core's reason when the driver cannot be used
  private GpuPresence gpuPresence = GpuPresence.PRESENT;
  private String moduleVersion; // "580.65.06" from /proc/driver/nvidia/version
  private boolean openModule;
  private final List<Device.Info> gpus = new ArrayList<>();
  private final List<Result> gpuProblems = new ArrayList<>();

  /**
   * The checks of the machine below {@code root}.
   *
   * @param noGpu SKIP the GPU checks even where a GPU is present
   * @param noRdma SKIP the RDMA checks even where an RDMA device is present
   */
  DoctorChecks(Path root, DoctorProbe probe, boolean noGpu, boolean noRdma) {
    this.files = new DoctorFiles(root);
    this.probe = probe;
    this.noGpu = noGpu;
    this.noRdma = noRdma;
    this.env = probe.env();
    this.rdma = new DoctorRdma(files, probe, noRdma);
    this.shm = new DoctorShm(files, probe, env);
  }

  List<Result> run() {
    List<Result> out = new ArrayList<>();
    step(out, "library", () -> List.of(library()));
    step(out, DoctorShm.CHECK, () -> List.of(shm.check()));
    step(out, "driver", () -> List.of(driver()));
    step(out, "gpus", this::gpuResults);
    step(out, "peer access", () -> List.of(peerAccess()));
    step(out, "rdma", () -> rdma.check(env));
    step(out, "gpudirect rdma", () -> List.of(gpuDirect()));
    step(out, "pcie affinity", this::affinity);
    step(out, "memlock", () -> List.of(memlock()));
    step(out, "versions", () -> List.of(versions()));
    return out;
  }

  /** The Colibri library's version ("0.1.0") after {@link #run}; null if it did not load. */
  String libraryVersion() {
    return library == null ? null : library.version();
  }

  private static void step(List<Result> out, String name, Supplier<List<Result>> check) {
    try {
      out.addAll(check.get());
    } catch (RuntimeException | LinkageError e) {
      out.add(
          Result.warn(
              name,
              "the check itself failed: " + e,
              "a bug in the doctor: please report this line"));
    }
  }

  /** First line of a failure's message, without "X failed: " and the "at file:line" lines. */
  static String reason(Throwable e) {
    String m = String.valueOf(e.getMessage());
    int nl = m.indexOf('\n');
    if (nl >= 0) {
      m = m.substring(0, nl);
    }
    int failed = m.indexOf(" failed: ");
    if (failed >= 0 && failed < 80) {
      m = m.substring(failed + " failed: ".length());
    }
    return m.trim();
  }

  // ---- 1. library ----

  private Result library() {
    try {
      library = probe.library();
    } catch (RuntimeException | LinkageError e) {
      return Result.fail(
          "library",
          "the Colibri native library does not load: " + reason(e),
          "run colibri-bench.jar as built (it carries the natives for linux-x86_64); in an"
              + " application add io.colibri:colibri-native with classifier linux-x86_64"
              + " (linux-arm64 on aarch64; same version); if the home folder is read-only add"
              + " -Dorg.bytedeco.javacpp.cachedir=/tmp/javacpp; details with"
              + " -Dorg.bytedeco.javacpp.logger.debug=true");
    }
    return Result.pass(
        "library",
        "Colibri "
            + library.version()
            + ", libcolibri.so.0 from "
            + (library.core() == null ? "(unknown)" : library.core())
            + ", JNI library "
            + (library.jni() == null ? "(unknown)" : library.jni()));
  }

  // ---- 2. driver ----

  /** NVIDIA GPUs (vendor 0x10de, display class) on the PCI bus, from sysfs. */
  List<String> nvidiaPciDevices() {
    List<String> out = new ArrayList<>();
    for (String id : files.list("/sys/bus/pci/devices")) {
      Path d = files.path("/sys/bus/pci/devices/" + id);
      String vendor = DoctorFiles.read(d.resolve("vendor"));
      String cls = DoctorFiles.read(d.resolve("class"));
      if ("0x10de".equalsIgnoreCase(vendor) && cls != null && cls.startsWith("0x03")) {
        out.add(id);
      }
    }
    return out;
  }

  /** The NVIDIA device nodes in /dev ("/dev/nvidia0", "/dev/nvidiactl"). */
  List<String> nvidiaNodes() {
    List<String> out = new ArrayList<>();
    for (String n : files.list("/dev")) {
      if (NVIDIA_NODE.matcher(n).matches()) {
        out.add("/dev/" + n);
      }
    }
    return out;
  }

  private Result driver() {
    String proc = files.read("/proc/driver/nvidia/version");
    String module;
    if (proc != null) {
      Matcher m = MODULE_VERSION.matcher(proc);
      moduleVersion = m.find() ? m.group(1) : null;
      openModule = proc.contains("Open Kernel Module");
      module =
          "kernel module "
              + (moduleVersion == null ? "(version not recognized)" : moduleVersion)
              + (openModule ? " (open)" : " (proprietary)");
    } else {
      module = "no /proc/driver/nvidia/version (no NVIDIA kernel module loaded)";
    }
    if (library == null) {
      driverProblem = "not checked: the Colibri library did not load";
    } else {
      try {
        int n = probe.gpuCount();
        for (int g = 0; g < n; g++) {
          try {
            gpus.add(probe.gpu(g));
          } catch (RuntimeException e) {
            gpuProblems.add(Result.fail("gpu " + g, reason(e), "check the GPU with `nvidia-smi`"));
          }
        }
        if (n == 0) {
          driverProblem = "the driver sees no GPU";
        }
      } catch (RuntimeException e) {
        driverProblem = reason(e);
      }
    }
    String cuda;
    if (driverProblem == null) {
      cuda =
          "libcuda.so.1 loads"
              + (gpus.isEmpty()
                  ? ""
                  : ", CUDA "
                      + gpus.get(0).cudaVersion()
                      + " (cuDriverGetVersion "
                      + gpus.get(0).driverVersion()
                      + ")");
    } else {
      cuda = "libcuda.so.1: " + driverProblem;
    }
    String found = module + "; " + cuda;
    if (noGpu) {
      return Result.skip("driver", found + " (not judged: --no-gpu)");
    }
    if (driverProblem == null) {
      return Result.pass("driver", found);
    }
    if (library == null) {
      return Result.skip("driver", found);
    }
    List<String> nodes = nvidiaNodes();
    List<String> pci = nvidiaPciDevices();
    found +=
        "; "
            + (nodes.isEmpty() ? "no /dev/nvidia*" : String.join(", ", nodes))
            + "; PCI bus: "
            + (pci.isEmpty()
                ? "no NVIDIA GPU"
                : pci.size() + " NVIDIA GPU(s) (" + String.join(", ", pci) + ")");
    gpuPresence =
        proc != null || !nodes.isEmpty()
            ? GpuPresence.PRESENT
            : pci.isEmpty() ? GpuPresence.NONE : GpuPresence.UNREACHABLE;
    if (gpuPresence == GpuPresence.NONE) {
      return Result.skip(
          "driver", found + ". No GPU here: the host path works; device buffers need a GPU");
    }
    if (gpuPresence == GpuPresence.UNREACHABLE) {
      return Result.warn(
          "driver",
          found
              + ", without an NVIDIA kernel module or /dev/nvidia*: this process cannot use them."
              + " The host path works; device buffers need a GPU",
          "install the NVIDIA driver (CUDA 12 or newer: R525+) and check `nvidia-smi`; in a"
              + " container run it with the NVIDIA Container Toolkit (`docker run --gpus all`;"
              + " Kubernetes: nvidia.com/gpu resources)");
    }
    String fix;
    if (driverProblem.contains("built without CUDA")) {
      fix = "use a libcolibri built where cuda.h was found (the released natives jar is)";
    } else if (driverProblem.contains("lacks")) {
      fix = "update the NVIDIA driver to one for CUDA 12 or newer (R525+)";
    } else if (driverProblem.contains("cuInit") || driverProblem.contains("no GPU")) {
      fix =
          "check `nvidia-smi`, CUDA_VISIBLE_DEVICES"
              + visibleDevices()
              + " and, in a container, its GPU access (`docker run --gpus all`, the NVIDIA"
              + " Container Toolkit)";
    } else {
      fix =
          (proc != null ? "the kernel module is loaded" : "/dev/nvidia* is there")
              + " but its user-space library libcuda.so.1 is not found:"
              + " install the driver's user-space libraries of the same version"
              + (moduleVersion != null ? " (" + moduleVersion + ")" : "")
              + ", or in a container use"
              + " the NVIDIA Container Toolkit (`--gpus all`), which mounts them; check with"
              + " `ldconfig -p | grep libcuda`";
    }
    return Result.fail(
        "driver",
        found,
        fix
            + ". Host collectives work without a GPU: if you do not use this one, `doctor"
            + " --no-gpu`");
  }

  private String visibleDevices() {
    String v = env.get("CUDA_VISIBLE_DEVICES");
    return v == null ? " (not set)" : " (=" + (v.isEmpty() ? "\"\"" : v) + ")";
  }

  // ---- 3. GPUs ----

  private List<Result> gpuResults() {
    List<Result> out = new ArrayList<>();
    if (noGpu) {
      out.add(Result.skip("gpus", "not checked (--no-gpu)"));
      return out;
    }
    if (driverProblem != null) {
      out.add(
          library == null
              ? Result.skip("gpus", driverProblem)
              : gpuPresence != GpuPresence.PRESENT
                  ? Result.skip("gpus", "no GPU (see the driver line above)")
                  : Result.fail(
                      "gpus",
                      "no usable GPU (" + driverProblem + ")",
                      "see the driver line above"));
      return out;
    }
    String visible = env.get("CUDA_VISIBLE_DEVICES");
    out.add(
        Result.pass(
            "gpus",
            (gpus.size() + gpuProblems.size())
                + " GPU(s)"
                + (visible != null ? " (CUDA_VISIBLE_DEVICES=" + visible + ")" : "")));
    for (Device.Info g : gpus) {
      out.add(gpu(g));
    }
    out.addAll(gpuProblems);
    return out;
  }

  static String imageFile(String image) {
    return "ptx".equals(image) ? "colibri_kernels.ptx" : "colibri_kernels_" + image + ".cubin";
  }

  private static Result gpu(Device.Info g) {
    String check = "gpu " + g.device();
    String found =
        g.name()
            + ", compute capability "
            + g.computeCapability()
            + ", PCI "
            + g.pciBusId()
            + ", kernel image "
            + g.image()
            + " ("
            + imageFile(g.image())
            + ("ptx".equals(g.image()) ? ", PTX JIT-compiled by the driver" : ", native code")
            + ")";
    if (g.major() < 8) {
      return Result.fail(
          check,
          found,
          "Colibri's kernels need compute capability 8.0 (Ampere)"
              + " or newer: device collectives cannot run on this GPU (host buffers work)");
    }
    if ("ptx".equals(g.image())) {
      return Result.warn(
          check,
          found,
          "no native image for compute capability "
              + g.computeCapability()
              + ": it runs, but the driver compiles the kernels at the first device call of each"
              + " process (seconds; cached in ~/.nv/ComputeCache, keep it with CUDA_CACHE_PATH on a"
              + " persistent volume); a Colibri build with an image for it avoids this");
    }
    return Result.pass(check, found);
  }

  // ---- 4. peer access ----

  private Result peerAccess() {
    if (noGpu) {
      return Result.skip("peer access", "not checked (--no-gpu)");
    }
    if (gpus.size() < 2) {
      return Result.skip("peer access", gpus.isEmpty() ? "no GPU" : "one GPU: no pair to check");
    }
    List<String> without = new ArrayList<>();
    int pairs = 0;
    for (int i = 0; i < gpus.size(); i++) {
      for (int j = i + 1; j < gpus.size(); j++) {
        int a = gpus.get(i).device();
        int b = gpus.get(j).device();
        pairs++;
        boolean ab = probe.canAccessPeer(a, b);
        boolean ba = probe.canAccessPeer(b, a);
        if (!ab || !ba) {
          without.add(
              a
                  + "-"
                  + b
                  + (ab == ba
                      ? ""
                      : ab ? " (only " + a + " to " + b + ")" : " (only " + b + " to " + a + ")"));
        }
      }
    }
    if (without.isEmpty()) {
      return Result.pass(
          "peer access",
          "all "
              + pairs
              + " pair(s) of the "
              + gpus.size()
              + " GPUs can access each other's memory");
    }
    return Result.warn(
        "peer access",
        "no peer access between GPUs "
            + String.join(", ", without)
            + " ("
            + without.size()
            + " of "
            + pairs
            + " pairs)",
        "device collectives between ranks on these GPUs go through host memory, far slower:"
            + " give one communicator GPUs with peer access (`nvidia-smi topo -p2p r`);"
            + " on bare metal check that the IOMMU or PCIe ACS does not block peer-to-peer, in a VM"
            + " that the hypervisor supports it");
  }

  // ---- 6. GPUDirect RDMA ----

  static boolean kernelAtLeast(String release, int major, int minor) {
    if (release == null) {
      return false;
    }
    Matcher m = Pattern.compile("^(\\d+)\\.(\\d+)").matcher(release);
    if (!m.find()) {
      return false;
    }
    int a = Integer.parseInt(m.group(1));
    int b = Integer.parseInt(m.group(2));
    return a > major || (a == major && b >= minor);
  }

  private Result gpuDirect() {
    String check = "gpudirect rdma";
    if (noGpu) {
      return Result.skip(check, "not checked (--no-gpu)");
    }
    if (gpus.isEmpty()) {
      return Result.skip(check, "no GPU");
    }
    if (noRdma) {
      return Result.skip(check, "not checked (--no-rdma)");
    }
    List<String> modules = DoctorFiles.lines(files.path("/proc/modules"));
    Set<String> loaded = new HashSet<>();
    if (modules != null) {
      for (String line : modules) {
        String[] f = line.trim().split("\\s+");
        if (f.length > 0) {
          loaded.add(f[0]);
        }
      }
    }
    boolean peermem = loaded.contains("nvidia_peermem") || loaded.contains("nv_peer_mem");
    String kernel = files.read("/proc/sys/kernel/osrelease");
    boolean kernelOk = kernelAtLeast(kernel, 5, 12);
    boolean driverYes = gpus.stream().allMatch(g -> g.dmaBuf() == 1);
    boolean driverNo = gpus.stream().anyMatch(g -> g.dmaBuf() == 0);
    boolean dmaBuf = kernelOk && !driverNo && (driverYes || openModule);
    List<String> noGdr = new ArrayList<>();
    for (Device.Info g : gpus) {
      if (g.gpuDirectRdma() == 0) {
        noGdr.add(String.valueOf(g.device()));
      }
    }
    List<String> parts = new ArrayList<>();
    parts.add(
        modules == null
            ? "no /proc/modules (nvidia_peermem unknown)"
            : peermem ? "nvidia_peermem loaded" : "nvidia_peermem not loaded");
    parts.add(
        "dma-buf "
            + (dmaBuf ? "available" : "not available")
            + " (Linux "
            + (kernel == null ? "?" : kernel)
            + (kernelOk ? "" : ", 5.12+ needed")
            + ", "
            + (moduleVersion == null && !openModule
                ? "NVIDIA module type unknown"
                : openModule
                    ? "NVIDIA open kernel module"
                    : "proprietary NVIDIA kernel module," + " dma-buf needs the open one")
            + ", driver: "
            + (driverYes ? "supported" : driverNo ? "not supported" : "unknown")
            + ")");
    if (!noGdr.isEmpty()) {
      parts.add(
          "the driver says GPU(s) " + String.join(", ", noGdr) + " do not support GPUDirect RDMA");
    }
    String found = String.join("; ", parts);
    boolean ok = (peermem || dmaBuf) && noGdr.isEmpty();
    if (rdma.devices().isEmpty()) {
      return Result.skip(check, "no RDMA device; " + found);
    }
    if (!rdma.usable()) {
      return Result.skip(
          check, "no RDMA device this process can open (see the rdma line); " + found);
    }
    if (ok) {
      return Result.pass(
          check,
          (peermem ? "GPUDirect RDMA through nvidia-peermem" : "GPUDirect RDMA through dma-buf")
              + "; "
              + found);
    }
    return Result.warn(
        check,
        "no GPUDirect RDMA: " + found,
        "without it device buffers between hosts are staged through pinned host memory (a copy"
            + " on each side, lower bandwidth). Enable one: `modprobe nvidia-peermem` (part of the"
            + " NVIDIA driver; needs the RDMA stack it was built against), or the NVIDIA open"
            + " kernel module on Linux 5.12+ for dma-buf"
            + (noGdr.isEmpty() ? "" : "; GPUs without GPUDirect RDMA support always stage"));
  }

  // ---- 7. PCIe affinity ----

  private List<Result> affinity() {
    List<Result> out = new ArrayList<>();
    String check = "pcie affinity";
    if (noGpu) {
      out.add(Result.skip(check, "not checked (--no-gpu)"));
      return out;
    }
    if (gpus.isEmpty()) {
      out.add(Result.skip(check, "no GPU"));
      return out;
    }
    if (noRdma) {
      out.add(Result.skip(check, "not checked (--no-rdma)"));
      return out;
    }
    List<String> nicNames = new ArrayList<>();
    List<Location> nics = new ArrayList<>();
    for (RdmaDevice d : rdma.devices()) {
      Location l = DoctorPci.locate(files.path("/sys/class/infiniband/" + d.name() + "/device"));
      if (l != null) {
        nicNames.add(d.name());
        nics.add(l);
      }
    }
    if (nics.isEmpty()) {
      out.add(
          Result.skip(
              check,
              rdma.devices().isEmpty()
                  ? "no RDMA device"
                  : "no RDMA device on the PCI bus (software devices only)"));
      return out;
    }
    for (Device.Info g : gpus) {
      String gcheck = check + " gpu " + g.device();
      Location gl = DoctorPci.locate(files.path("/sys/bus/pci/devices/" + g.pciBusId()));
      if (gl == null) {
        out.add(Result.skip(gcheck, "PCI device " + g.pciBusId() + " not in /sys/bus/pci/devices"));
        continue;
      }
      List<String> parts = new ArrayList<>();
      Distance best = Distance.UNKNOWN;
      String bestNic = null;
      for (int i = 0; i < nics.size(); i++) {
        Distance d = DoctorPci.distance(gl, nics.get(i));
        parts.add(nicNames.get(i) + ": " + DoctorPci.describe(gl, nics.get(i)));
        if (bestNic == null || d.ordinal() < best.ordinal()) {
          best = d;
          bestNic = nicNames.get(i);
        }
      }
      String found =
          "GPU "
              + g.pciBusId()
              + (gl.numaNode() >= 0 ? " (NUMA node " + gl.numaNode() + ")" : "")
              + ": "
              + String.join("; ", parts);
      if (best == Distance.SWITCH || best == Distance.ROOT_COMPLEX) {
        out.add(Result.pass(gcheck, found + "; nearest " + bestNic));
      } else {
        out.add(
            Result.warn(
                gcheck,
                found,
                "no NIC near this GPU: its RDMA traffic crosses "
                    + (best == Distance.CROSS_NUMA ? "the link between CPU sockets" : "the CPU")
                    + "; for GPUDirect RDMA at full speed put a NIC under the GPU's PCIe switch"
                    + " (compare `nvidia-smi topo -m`), and bind the rank's process to the GPU's"
                    + " NUMA node"
                    + (gl.numaNode() >= 0
                        ? " (numactl --cpunodebind="
                            + gl.numaNode()
                            + " --membind="
                            + gl.numaNode()
                            + ")"
                        : "")));
      }
    }
    return out;
  }

  // ---- 8. memlock ----

  /** "unlimited" -> -1, "8388608" -> 8388608, else null. */
  static Long limit(String s) {
    if ("unlimited".equals(s)) {
      return -1L;
    }
    return s != null && s.matches("\\d+") ? Long.parseLong(s) : null;
  }

  private static String limitText(long v) {
    return v < 0 ? "unlimited" : DoctorFiles.bytes(v);
  }

  private Result memlock() {
    List<String> lines = DoctorFiles.lines(files.path("/proc/self/limits"));
    if (lines == null) {
      return Result.skip("memlock", "cannot read /proc/self/limits");
    }
    for (String line : lines) {
      if (!line.startsWith("Max locked memory")) {
        continue;
      }
      String[] f = line.substring("Max locked memory".length()).trim().split("\\s+");
      Long soft = f.length > 0 ? limit(f[0]) : null;
      Long hard = f.length > 1 ? limit(f[1]) : null;
      if (soft == null) {
        return Result.skip("memlock", "cannot parse: " + line.trim());
      }
      String found =
          "max locked memory "
              + limitText(soft)
              + " (soft), "
              + (hard == null ? "?" : limitText(hard))
              + " (hard)";
      if (soft < 0) {
        return Result.pass("memlock", found);
      }
      if (soft >= MEMLOCK_MIN_BYTES) {
        return Result.pass(
            "memlock",
            found + "; RDMA registrations of host memory beyond it fail," + " unlimited is safest");
      }
      String low =
          found
              + ", below "
              + DoctorFiles.bytes(MEMLOCK_MIN_BYTES)
              + ": RDMA registrations of more than "
              + limitText(soft)
              + " of host memory fail";
      if (!rdma.usable()) {
        return Result.skip(
            "memlock",
            low
                + "; not judged: only RDMA needs it, and "
                + (noRdma
                    ? "the RDMA checks are off (--no-rdma)"
                    : "this process has no RDMA device"));
      }
      return Result.fail(
          "memlock",
          low,
          "raise it for the ranks' processes: `ulimit -l unlimited` in the launching shell"
              + (hard != null && hard >= 0 && hard < MEMLOCK_MIN_BYTES
                  ? " (the hard limit is " + limitText(hard) + " too: raise it as root, e.g."
                  : " (to raise the hard limit:")
              + " `* - memlock unlimited` in /etc/security/limits.conf and a new login);"
              + " systemd: LimitMEMLOCK=infinity; docker: --ulimit memlock=-1:-1;"
              + " Kubernetes: the container runtime's default ulimits; if you do not use RDMA,"
              + " `doctor --no-rdma`");
    }
    return Result.skip("memlock", "no 'Max locked memory' line in /proc/self/limits");
  }

  // ---- 9. versions ----

  private Result versions() {
    List<String> parts = new ArrayList<>();
    parts.add("Java " + probe.javaVersion());
    parts.add("Colibri " + (library == null ? "(did not load)" : library.version()));
    String cuda = gpus.isEmpty() ? null : "CUDA " + gpus.get(0).cudaVersion();
    if (moduleVersion != null || cuda != null) {
      parts.add(
          "NVIDIA driver "
              + (moduleVersion != null ? moduleVersion : "?")
              + (cuda != null ? " (" + cuda + ")" : ""));
    } else {
      parts.add("NVIDIA driver none");
    }
    String kernel = files.read("/proc/sys/kernel/osrelease");
    parts.add("Linux " + (kernel == null ? "?" : kernel));
    for (RdmaDevice d : rdma.devices()) {
      if (d.firmware() != null) {
        parts.add(d.name() + " firmware " + d.firmware());
      }
    }
    return Result.pass("versions", String.join("; ", parts));
  }
}
