/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import io.colibri.bench.doctor.Doctor.Result;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The doctor's RDMA checks: /dev/infiniband, the devices and ports of /sys/class/infiniband (state,
 * physical state, rate, link layer, MTU of a RoCE port's netdev, RoCE v2 GIDs) and libibverbs.so.1.
 *
 * <p>No device: SKIP (ranks on several hosts use TCP). Devices that this process cannot open (no
 * uverbs node in /dev/infiniband, as in a container that was not given them): WARN. Devices it
 * can open ({@link #usable}) but that cannot carry RDMA (no port ACTIVE on any of them, libibverbs
 * missing, not loading or without providers): FAIL.
 */
final class DoctorRdma {

  /** Bytes of headers a RoCE packet adds to its payload (GRH, UDP, BTH and extensions, ICRC). */
  static final int ROCE_HEADER_BYTES = 96;

  /** One port of an RDMA device, as sysfs shows it. */
  record Port(
      int number,
      String state,
      String physState,
      String rate,
      String linkLayer,
      String lid,
      int gids,
      List<String> roceV2Gids,
      String netdev,
      Integer netdevMtu) {

    boolean active() {
      return "ACTIVE".equalsIgnoreCase(state);
    }

    boolean ethernet() {
      return "Ethernet".equalsIgnoreCase(linkLayer);
    }

    String describe() {
      StringBuilder sb =
          new StringBuilder("port ")
              .append(number)
              .append(": ")
              .append(orUnknown(state))
              .append(" (")
              .append(orUnknown(physState))
              .append("), ")
              .append(orUnknown(rate))
              .append(", ")
              .append(orUnknown(linkLayer));
      if (ethernet()) {
        sb.append(" (RoCE)");
        if (netdev != null) {
          sb.append(", netdev ").append(netdev);
          if (netdevMtu != null) {
            sb.append(" MTU ").append(netdevMtu);
            int path = roceMtu(netdevMtu);
            sb.append(path > 0 ? " (RDMA path MTU up to " + path + ")" : " (too small for RoCE)");
          }
        }
        sb.append(", RoCE v2 GIDs: ")
            .append(roceV2Gids.isEmpty() ? "none" : String.join(", ", roceV2Gids));
      } else {
        if (lid != null) {
          sb.append(", LID ").append(lid);
        }
        sb.append(", ")
            .append(gids)
            .append(gids == 1 ? " GID" : " GIDs")
            .append(" (active MTU: not in sysfs, `ibv_devinfo` shows it)");
      }
      return sb.toString();
    }
  }

  /** One RDMA device. */
  record RdmaDevice(String name, String firmware, List<Port> ports) {
    boolean anyActive() {
      return ports.stream().anyMatch(Port::active);
    }
  }

  private static final String OFF = "not checked (--no-rdma)";

  private final DoctorFiles files;
  private final DoctorProbe probe;
  private final boolean off;
  private final List<RdmaDevice> devices = new ArrayList<>();
  private boolean openable; // a uverbs node in /dev/infiniband

  DoctorRdma(DoctorFiles files, DoctorProbe probe, boolean off) {
    this.files = files;
    this.probe = probe;
    this.off = off;
  }

  /** The devices found by {@link #check}. */
  List<RdmaDevice> devices() {
    return devices;
  }

  /**
   * Whether {@link #check} found RDMA devices that this process can open (in sysfs, and a uverbs
   * node in /dev/infiniband), so that their problems are FAILs.
   */
  boolean usable() {
    return !devices.isEmpty() && openable;
  }

  /** Largest InfiniBand MTU (256 .. 4096) that fits a netdev MTU with the RoCE headers; 0 if none. */
  static int roceMtu(int netdevMtu) {
    for (int m = 4096; m >= 256; m /= 2) {
      if (m <= netdevMtu - ROCE_HEADER_BYTES) {
        return m;
      }
    }
    return 0;
  }

  /** "4: ACTIVE" -> "ACTIVE". */
  static String stateName(String s) {
    if (s == null) {
      return null;
    }
    int colon = s.indexOf(':');
    return colon >= 0 ? s.substring(colon + 1).trim() : s.trim();
  }

  /**
   * A GID as sysfs writes it ("0000:0000:0000:0000:0000:ffff:0a00:0005"): null if all zero (an
   * empty entry), the IPv4 address for an IPv4-mapped GID, else the text as is.
   */
  static String gidText(String gid) {
    if (gid == null) {
      return null;
    }
    String hex = gid.replace(":", "").toLowerCase(Locale.ROOT);
    if (hex.length() != 32 || !hex.matches("[0-9a-f]+")) {
      return null;
    }
    if (hex.matches("0+")) {
      return null;
    }
    if (hex.startsWith("00000000000000000000ffff")) {
      return Integer.parseInt(hex.substring(24, 26), 16)
          + "."
          + Integer.parseInt(hex.substring(26, 28), 16)
          + "."
          + Integer.parseInt(hex.substring(28, 30), 16)
          + "."
          + Integer.parseInt(hex.substring(30, 32), 16);
    }
    return gid.trim();
  }

  Port readPort(String dev, int number) {
    Path p = files.path("/sys/class/infiniband/" + dev + "/ports/" + number);
    String state = stateName(DoctorFiles.read(p.resolve("state")));
    String phys = stateName(DoctorFiles.read(p.resolve("phys_state")));
    String rate = DoctorFiles.read(p.resolve("rate"));
    String link = DoctorFiles.read(p.resolve("link_layer"));
    String lid = DoctorFiles.read(p.resolve("lid"));
    int gids = 0;
    List<String> v2 = new ArrayList<>();
    String netdev = null;
    for (String idx : DoctorFiles.list(p.resolve("gids"))) {
      String gid = gidText(DoctorFiles.read(p.resolve("gids").resolve(idx)));
      if (gid == null) {
        continue;
      }
      gids++;
      // Unused entries of gid_attrs cannot be read (EINVAL): null.
      String type = DoctorFiles.read(p.resolve("gid_attrs/types").resolve(idx));
      String ndev = DoctorFiles.read(p.resolve("gid_attrs/ndevs").resolve(idx));
      if (netdev == null && ndev != null && !ndev.isEmpty()) {
        netdev = ndev;
      }
      if (type != null && type.toLowerCase(Locale.ROOT).contains("v2")) {
        v2.add(idx + " (" + gid + ")");
      }
    }
    if (netdev == null && "Ethernet".equalsIgnoreCase(link)) {
      List<String> nets =
          DoctorFiles.list(files.path("/sys/class/infiniband/" + dev + "/device/net"));
      if (!nets.isEmpty()) {
        netdev = nets.get(0);
      }
    }
    Integer mtu = null;
    if (netdev != null) {
      String m = files.read("/sys/class/net/" + netdev + "/mtu");
      if (m != null && m.matches("\\d+")) {
        mtu = Integer.parseInt(m);
      }
    }
    return new Port(number, state, phys, rate, link, lid, gids, v2, netdev, mtu);
  }

  /** The lines of check 5: /dev/infiniband and the devices, one per device, then libibverbs. */
  List<Result> check(Map<String, String> env) {
    List<Result> out = new ArrayList<>();
    if (off) {
      out.add(Result.skip("rdma", OFF));
      out.add(Result.skip("libibverbs", OFF));
      return out;
    }
    Path devDir = files.path("/dev/infiniband");
    boolean devPresent = Files.isDirectory(devDir);
    List<String> devNodes = DoctorFiles.list(devDir);
    for (String name : DoctorFiles.list(files.path("/sys/class/infiniband"))) {
      List<Port> ports = new ArrayList<>();
      for (String n : DoctorFiles.list(files.path("/sys/class/infiniband/" + name + "/ports"))) {
        if (n.matches("\\d+")) {
          ports.add(readPort(name, Integer.parseInt(n)));
        }
      }
      devices.add(
          new RdmaDevice(name, files.read("/sys/class/infiniband/" + name + "/fw_ver"), ports));
    }
    String dev =
        devPresent ? "/dev/infiniband: " + DoctorFiles.join(devNodes) : "no /dev/infiniband";
    List<String> names = new ArrayList<>();
    int ports = 0;
    int active = 0;
    for (RdmaDevice d : devices) {
      names.add(d.name());
      ports += d.ports().size();
      active += (int) d.ports().stream().filter(Port::active).count();
    }
    openable = devPresent && devNodes.stream().anyMatch(n -> n.startsWith("uverbs"));
    if (devices.isEmpty()) {
      out.add(
          Result.skip(
              "rdma",
              "no RDMA device ("
                  + dev
                  + ", nothing in /sys/class/infiniband): the host path works (on one host ranks"
                  + " use shared memory, between hosts TCP sockets); RDMA needs an InfiniBand or"
                  + " RoCE device and its driver (e.g. mlx5_ib; `ibv_devices` lists them)"));
    } else if (!openable) {
      out.add(
          Result.warn(
              "rdma",
              devices.size()
                  + " RDMA device(s) in /sys/class/infiniband ("
                  + String.join(", ", names)
                  + ") but "
                  + (devPresent ? "no uverbs device in " + dev : dev)
                  + ": this process cannot open them",
              "in a container pass the devices: --device=/dev/infiniband (Kubernetes: an RDMA"
                  + " device plugin); on the host load the user-space verbs module: `modprobe"
                  + " ib_uverbs`"));
    } else if (active == 0) {
      out.add(
          Result.fail(
              "rdma",
              devices.size()
                  + " RDMA device(s) ("
                  + String.join(", ", names)
                  + "), none of their "
                  + ports
                  + " port(s) ACTIVE; "
                  + dev,
              "bring a port up: see the lines of each device below; if you do not use RDMA,"
                  + " `doctor --no-rdma`"));
    } else {
      out.add(
          Result.pass(
              "rdma",
              devices.size()
                  + " RDMA device(s) ("
                  + String.join(", ", names)
                  + "), "
                  + active
                  + " of "
                  + ports
                  + " port(s) ACTIVE; "
                  + dev));
    }
    for (RdmaDevice d : devices) {
      out.add(deviceResult(d, usable() && active == 0));
    }
    out.add(libibverbs(env));
    return out;
  }

  /** A device's line; {@code broken}: RDMA cannot work here, so a device that is down FAILs. */
  private static Result deviceResult(RdmaDevice d, boolean broken) {
    String check = "rdma " + d.name();
    List<String> parts = new ArrayList<>();
    if (d.firmware() != null) {
      parts.add("firmware " + d.firmware());
    }
    for (Port p : d.ports()) {
      parts.add(p.describe());
    }
    if (d.ports().isEmpty()) {
      parts.add("no ports in sysfs");
    }
    String found = String.join("; ", parts);
    if (!d.anyActive()) {
      Port p = d.ports().isEmpty() ? null : d.ports().get(0);
      String fix = p == null ? "check the device's driver (`ibv_devinfo`)" : downFix(d.name(), p);
      return broken
          ? Result.fail(check, found, fix)
          : Result.warn(
              check,
              found,
              fix
                  + "; the verbs transport takes the first device unless COLIBRI_VERBS_DEVICE"
                  + " names one with an ACTIVE port");
    }
    for (Port p : d.ports()) {
      if (p.active() && p.ethernet() && p.roceV2Gids().isEmpty()) {
        return Result.warn(
            check,
            found,
            "port "
                + p.number()
                + " is RoCE but has no RoCE v2 GID:"
                + " give its netdev"
                + (p.netdev() != null ? " " + p.netdev() : "")
                + " an IP address"
                + " (the RoCE v2 GIDs follow the netdev's addresses; `ip addr`, `rdma link`)");
      }
    }
    return Result.pass(check, found);
  }

  /** What to do about a port that is not ACTIVE. */
  static String downFix(String dev, Port p) {
    String phys = p.physState() == null ? "" : p.physState();
    String where = dev + " port " + p.number();
    if (phys.equalsIgnoreCase("Disabled")) {
      return where
          + " is disabled: enable it (on RoCE `ip link set "
          + (p.netdev() != null ? p.netdev() : "<netdev>")
          + " up`; on InfiniBand at the switch or with `ibportstate`)";
    }
    if (!phys.equalsIgnoreCase("LinkUp")) {
      return where
          + " has no link (physical state "
          + (phys.isEmpty() ? "unknown" : phys)
          + "):"
          + " check the cable, the transceiver and the switch port (`ibstat "
          + dev
          + "`)"
          + (p.ethernet() ? ", and that the netdev is up (`ip link`)" : "");
    }
    if (!p.ethernet()) {
      return where
          + " has a link but is "
          + p.state()
          + ": no subnet manager has configured it;"
          + " run one on the fabric (opensm on one node, or the switch's subnet manager)";
    }
    return where
        + " has a link but is "
        + p.state()
        + ": bring the netdev up and check `rdma link`";
  }

  /** Folders the dynamic loader searches, as far as the doctor can tell, below the root. */
  List<Path> libraryDirs(Map<String, String> env) {
    Set<String> dirs = new LinkedHashSet<>();
    String ldPath = env.get("LD_LIBRARY_PATH");
    if (ldPath != null) {
      for (String d : ldPath.split(":")) {
        if (d.startsWith("/")) {
          dirs.add(d);
        }
      }
    }
    for (String conf : DoctorFiles.list(files.path("/etc/ld.so.conf.d"))) {
      List<String> lines = DoctorFiles.lines(files.path("/etc/ld.so.conf.d/" + conf));
      if (conf.endsWith(".conf") && lines != null) {
        for (String line : lines) {
          String l = line.trim();
          if (l.startsWith("/")) {
            dirs.add(l);
          }
        }
      }
    }
    String arch = System.getProperty("os.arch", "");
    String multiarch =
        arch.equals("amd64") || arch.equals("x86_64")
            ? "x86_64-linux-gnu"
            : arch.equals("aarch64") ? "aarch64-linux-gnu" : arch + "-linux-gnu";
    for (String d :
        new String[] {
          "/lib/" + multiarch,
          "/usr/lib/" + multiarch,
          "/lib64",
          "/usr/lib64",
          "/lib",
          "/usr/lib",
          "/usr/local/lib"
        }) {
      dirs.add(d);
    }
    List<Path> out = new ArrayList<>();
    for (String d : dirs) {
      out.add(files.path(d));
    }
    return out;
  }

  private Result libibverbs(Map<String, String> env) {
    Path found = null;
    for (Path dir : libraryDirs(env)) {
      Path f = dir.resolve("libibverbs.so.1");
      if (Files.exists(f)) {
        found = f;
        break;
      }
    }
    if (found == null) {
      if (devices.isEmpty()) {
        return Result.skip(
            "libibverbs",
            "libibverbs.so.1 not found in the usual library folders;"
                + " needed only with an RDMA device");
      }
      return problem(
          "libibverbs",
          "libibverbs.so.1 not found (LD_LIBRARY_PATH,"
              + " /etc/ld.so.conf.d, /usr/lib, /lib64, ...): RDMA cannot be used",
          "install the verbs library and its providers: rdma-core (Debian/Ubuntu: libibverbs1"
              + " ibverbs-providers; RHEL: libibverbs) or MLNX_OFED/DOCA-OFED");
    }
    String error = probe.load(found);
    if (error != null) {
      return problem(
          "libibverbs",
          "libibverbs.so.1 found at " + found + " but it does not" + " load: " + error,
          "reinstall rdma-core (or MLNX_OFED/DOCA-OFED) so that its dependencies resolve"
              + " (`ldd "
              + found
              + "`)");
    }
    List<String> providers = new ArrayList<>();
    for (String f : DoctorFiles.list(found.getParent().resolve("libibverbs"))) {
      int dash = f.indexOf("-rdmav");
      if (f.startsWith("lib") && dash > 3) {
        providers.add(f.substring(3, dash));
      }
    }
    String text =
        "libibverbs.so.1 loads (" + found + "); providers: " + DoctorFiles.join(providers);
    if (providers.isEmpty() && !devices.isEmpty()) {
      return problem(
          "libibverbs",
          text + " (no " + found.getParent().resolve("libibverbs") + "/lib*-rdmav*.so)",
          "install the provider libraries (ibverbs-providers with rdma-core, or MLNX_OFED/DOCA):"
              + " without one for the NIC, libibverbs lists no device");
    }
    return Result.pass("libibverbs", text);
  }

  /** A FAIL where RDMA devices are usable, else a WARN (this process cannot open them anyway). */
  private Result problem(String check, String found, String fix) {
    return usable() ? Result.fail(check, found, fix) : Result.warn(check, found, fix);
  }

  private static String orUnknown(String s) {
    return s == null || s.isEmpty() ? "?" : s;
  }
}
