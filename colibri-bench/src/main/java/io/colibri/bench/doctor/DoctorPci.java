/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.doctor;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * Where a PCI device sits, from sysfs: its device folder resolves (through the symlinks of
 * /sys/bus/pci/devices and /sys/class/infiniband/DEV/device) to
 * /sys/devices/pciDDDD:BB/ROOTPORT/BRIDGE/.../DEVICE; the host bridge (root complex), the chain of
 * bridges below it and the NUMA node say how far apart a GPU and a NIC are.
 */
final class DoctorPci {

  static final Pattern HOST_BRIDGE = Pattern.compile("pci[0-9a-f]{4,8}:[0-9a-f]{2}");
  static final Pattern ADDRESS = Pattern.compile("[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");

  /** How far a NIC is from a GPU, nearest first. */
  enum Distance {
    /** Both below one PCIe bridge under the root port: traffic stays in the switch. */
    SWITCH("same PCIe switch"),
    /** Same host bridge, different root ports: traffic passes the CPU's root complex. */
    ROOT_COMPLEX("same root complex"),
    /** Different host bridges on one NUMA node: traffic crosses the CPU's internal fabric. */
    NUMA_NODE("same NUMA node, different root complexes"),
    /** Different NUMA nodes: traffic crosses the link between the CPU sockets. */
    CROSS_NUMA("across NUMA nodes"),
    /** Different host bridges, NUMA nodes unknown. */
    UNKNOWN("different root complexes, NUMA node unknown");

    final String text;

    Distance(String text) {
      this.text = text;
    }
  }

  /**
   * A device's place in the PCI tree.
   *
   * @param address "0000:1b:00.0"
   * @param hostBridge "pci0000:17"
   * @param bridges the bridges from the root port down to the device's parent
   * @param numaNode from numa_node; -1 if unknown
   */
  record Location(String address, String hostBridge, List<String> bridges, int numaNode) {}

  private DoctorPci() {}

  /**
   * The location of the device whose sysfs folder {@code link} resolves to (symlinks followed), or
   * null if it does not exist or is not below a PCI host bridge (a software device).
   */
  static Location locate(Path link) {
    Path real;
    try {
      real = link.toRealPath();
    } catch (IOException | RuntimeException e) {
      return null;
    }
    String hostBridge = null;
    List<String> chain = new ArrayList<>();
    for (Path part : real) {
      String name = part.toString();
      if (hostBridge == null) {
        if (HOST_BRIDGE.matcher(name).matches()) {
          hostBridge = name;
        }
      } else if (ADDRESS.matcher(name).matches()) {
        chain.add(name);
      } else {
        break;
      }
    }
    if (hostBridge == null || chain.isEmpty()) {
      return null;
    }
    String address = chain.remove(chain.size() - 1);
    String numa = DoctorFiles.read(real.resolve("numa_node"));
    int node = -1;
    if (numa != null && numa.matches("-?\\d+")) {
      node = Integer.parseInt(numa);
    }
    return new Location(address, hostBridge, chain, node);
  }

  /** How far {@code nic} is from {@code gpu}. */
  static Distance distance(Location gpu, Location nic) {
    if (gpu.hostBridge().equals(nic.hostBridge())) {
      return commonBridges(gpu, nic) >= 1 ? Distance.SWITCH : Distance.ROOT_COMPLEX;
    }
    if (gpu.numaNode() < 0 || nic.numaNode() < 0) {
      return Distance.UNKNOWN;
    }
    return gpu.numaNode() == nic.numaNode() ? Distance.NUMA_NODE : Distance.CROSS_NUMA;
  }

  /** Number of bridges both devices sit below. */
  static int commonBridges(Location a, Location b) {
    int n = 0;
    while (n < a.bridges().size()
        && n < b.bridges().size()
        && a.bridges().get(n).equals(b.bridges().get(n))) {
      n++;
    }
    return n;
  }

  /** "same PCIe switch (below 0000:18:00.0)", "across NUMA nodes (GPU on node 0, NIC on node 1)". */
  static String describe(Location gpu, Location nic) {
    Distance d = distance(gpu, nic);
    switch (d) {
      case SWITCH:
        return d.text + " (below " + gpu.bridges().get(commonBridges(gpu, nic) - 1) + ")";
      case ROOT_COMPLEX:
        return d.text + " (" + gpu.hostBridge() + ")";
      case NUMA_NODE:
        return d.text
            + " (node "
            + gpu.numaNode()
            + "; "
            + gpu.hostBridge()
            + " and "
            + nic.hostBridge()
            + ")";
      case CROSS_NUMA:
        return d.text + " (GPU on node " + gpu.numaNode() + ", NIC on node " + nic.numaNode() + ")";
      default:
        return d.text + " (" + gpu.hostBridge() + " and " + nic.hostBridge() + ")";
    }
  }
}
