/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.colibri.ColibriException;
import io.colibri.ErrorCode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * {@link Device#info} and {@link Device#canAccessPeer} (clbDeviceInfo, clbDeviceCanAccessPeer):
 * without a driver they fail like {@link Device#count()}, with the driver's message; with GPUs the
 * fields are sane.
 */
class DeviceInfoTest {

  /**
   * The image names ("sm90", "ptx") of the kernel images that the native build lists in
   * kernel-images.txt (from COLIBRI_KERNEL_ARCHS in src/CMakeLists.txt).
   */
  private static Set<String> builtImages() throws IOException {
    Path list =
        Path.of(
            System.getProperty("colibri.nativeBuildDir", "../build/native"), "kernel-images.txt");
    Set<String> names = new TreeSet<>();
    for (String line : Files.readAllLines(list)) {
      String l = line.strip();
      if (l.isEmpty() || l.startsWith("#")) {
        continue;
      }
      names.add(
          l.equals("colibri_kernels.ptx")
              ? "ptx"
              : l.replaceFirst("^colibri_kernels_(.*)\\.cubin$", "$1"));
    }
    return names;
  }

  /** The message after "... failed: ", without the "at file:line" lines. */
  private static String reason(ColibriException e) {
    String m = e.getMessage();
    int colon = m.indexOf("failed: ");
    String r = colon >= 0 ? m.substring(colon + "failed: ".length()) : m;
    int nl = r.indexOf('\n');
    return nl >= 0 ? r.substring(0, nl) : r;
  }

  @Test
  void withoutADriverEveryCallGivesTheDriversReason() {
    ColibriException count;
    try {
      Device.count();
      return; // a machine with a driver: the next test covers it
    } catch (ColibriException e) {
      count = e;
    }
    assertEquals(ErrorCode.UNSUPPORTED, count.code());
    String why = reason(count);
    assertTrue(
        why.contains("libcuda.so.1") || why.contains("cuInit") || why.contains("without CUDA"),
        why);

    ColibriException info = assertThrows(ColibriException.class, () -> Device.info(0));
    assertEquals(ErrorCode.UNSUPPORTED, info.code());
    assertTrue(info.getMessage().startsWith("GPU info for device 0 failed: "), info.getMessage());
    assertEquals(why, reason(info));

    ColibriException peer = assertThrows(ColibriException.class, () -> Device.canAccessPeer(0, 1));
    assertEquals(ErrorCode.UNSUPPORTED, peer.code());
    assertTrue(
        peer.getMessage().startsWith("peer access query from GPU 0 to GPU 1 failed: "),
        peer.getMessage());
    assertEquals(why, reason(peer));
  }

  @Test
  void withGpusTheDriversView() throws IOException {
    int n;
    try {
      n = Device.count();
    } catch (ColibriException e) {
      return; // no driver: covered above
    }
    Set<String> images = n > 0 ? builtImages() : Set.of();
    for (int g = 0; g < n; g++) {
      Device.Info i = Device.info(g);
      assertEquals(g, i.device());
      assertFalse(i.name().isEmpty());
      assertTrue(i.major() >= 5, i.toString());
      assertTrue(i.pciBusId().matches("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.0"), i.pciBusId());
      assertTrue(images.contains(i.image()), i.image() + " is not one of " + images);
      assertTrue(i.driverVersion() >= 12000, i.toString());
      assertTrue(i.cudaVersion().matches("\\d+\\.\\d"), i.cudaVersion());
      assertTrue(Device.canAccessPeer(g, g));
    }
    ColibriException e = assertThrows(ColibriException.class, () -> Device.info(n));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().contains("does not exist"), e.getMessage());
  }

  @Test
  void structMappingAndNullOutput() {
    NativeLibrary.ensureLoaded();
    try (ColibriLib.ClbDeviceInfo i = new ColibriLib.ClbDeviceInfo()) {
      assertEquals("", i.name());
      assertEquals("", i.pciBusId());
      assertEquals("", i.image());
      assertEquals(0, i.major());
      assertEquals(0, i.driverVersion());
      assertEquals(0, i.dmaBuf());
    }
    int rc = ColibriLib.clbDeviceInfo(0, null);
    // A libcolibri built without cuda.h refuses every device call.
    if (rc == ErrorCode.UNSUPPORTED.code()) {
      assertTrue(
          ColibriLib.clbGetLastError().contains("built without CUDA"),
          ColibriLib.clbGetLastError());
      return;
    }
    assertEquals(ErrorCode.INVALID_ARGUMENT.code(), rc);
    assertTrue(
        ColibriLib.clbGetLastError().contains("info (output) is NULL"),
        ColibriLib.clbGetLastError());
    assertEquals(ErrorCode.INVALID_ARGUMENT.code(), ColibriLib.clbDeviceCanAccessPeer(0, 0, null));
    assertTrue(
        ColibriLib.clbGetLastError().contains("canAccess (output) is NULL"),
        ColibriLib.clbGetLastError());
  }

  @Test
  void versionHelpersOfInfo() {
    Device.Info i = new Device.Info(0, "X", 9, 0, 13000, "0000:1b:00.0", "sm90", 1, -1);
    assertEquals("9.0", i.computeCapability());
    assertEquals("13.0", i.cudaVersion());
    assertEquals("12.8", new Device.Info(0, "X", 8, 9, 12080, "", "sm89", 0, 0).cudaVersion());
  }
}
