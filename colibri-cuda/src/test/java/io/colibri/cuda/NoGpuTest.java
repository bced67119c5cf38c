/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.ErrorCode;
import io.colibri.jni.Device;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** What every machine can check: the images are packaged, and no GPU means a clear error. */
class NoGpuTest {
  /** The images that the native build's kernel-images.txt names (from its CMake list). */
  static List<String> kernelImages() throws IOException {
    try (InputStream in =
        NoGpuTest.class.getResourceAsStream("/io/colibri/cuda/kernels/kernel-images.txt")) {
      assertNotNull(in, "kernel-images.txt is packaged beside the images");
      return new String(in.readAllBytes(), StandardCharsets.UTF_8)
          .lines()
          .map(String::strip)
          .filter(l -> !l.isEmpty() && !l.startsWith("#"))
          .collect(Collectors.toList());
    }
  }

  @Test
  void kernelImagesArePackagedForEveryComputeCapability() throws IOException {
    List<String> images = kernelImages();
    assertTrue(images.contains("colibri_kernels.ptx"), images.toString());
    assertTrue(
        images.stream().anyMatch(i -> i.matches("colibri_kernels_sm\\d+\\.cubin")),
        images.toString());
    for (String image : images) {
      assertNotNull(getClass().getResource("/io/colibri/cuda/kernels/" + image), image);
    }
  }

  @Test
  void directBufferAddressesFollowThePosition() {
    ByteBuffer b = ByteBuffer.allocateDirect(64);
    long a0 = Device.address(b);
    b.position(16);
    assertEquals(a0 + 16, Device.address(b));
    ColibriException e =
        assertThrows(ColibriException.class, () -> Device.address(ByteBuffer.allocate(8)));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
  }

  @Test
  void withoutAGpuDeviceCallsSayWhy() {
    int gpus;
    try {
      gpus = Device.count();
    } catch (ColibriException e) {
      assertEquals(ErrorCode.UNSUPPORTED, e.code());
      assertTrue(e.getMessage().contains("CUDA"), e.getMessage());
      ColibriException alloc =
          assertThrows(ColibriException.class, () -> DeviceBuffer.allocate(64, 0));
      assertEquals(ErrorCode.UNSUPPORTED, alloc.code());
      return;
    }
    assertTrue(gpus >= 0); // a GPU machine: the gpu-tagged tests cover it
  }
}
