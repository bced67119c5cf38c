/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */

/**
 * The doctor tool ({@code java -jar colibri-bench.jar doctor}, {@link
 * io.colibri.bench.doctor.Doctor}): checks of the machine for Colibri (library, /dev/shm, NVIDIA
 * driver, GPUs and their kernel image, peer access, RDMA devices and ports, GPUDirect RDMA,
 * GPU-NIC PCIe affinity, memlock limit, versions), one line per check with the fix for each
 * problem, or one JSON object ({@code --json}). What it reads from /proc, /sys and /dev is read
 * below a root folder, and what only the driver, the kernel or a second process can tell comes
 * through a probe, so that tests build fake machines. See docs/troubleshooting.md.
 */
package io.colibri.bench.doctor;
