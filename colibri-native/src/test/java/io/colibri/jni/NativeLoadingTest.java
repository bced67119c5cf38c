/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.colibri.DataType;
import io.colibri.spi.CommunicatorProvider;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.Loader;
import org.junit.jupiter.api.Test;

/**
 * The native libraries load through JavaCPP, come from the resources (not the build tree), and have
 * no link-time dependency on libcuda or libibverbs (ARCHITECTURE: "Loads anywhere").
 */
class NativeLoadingTest {

  private static final List<String> FORBIDDEN =
      List.of("libcuda.so", "libibverbs.so", "libcudart.so", "libnvidia-ml.so");

  @Test
  void providerIsFoundByServiceLoader() {
    List<String> names = new ArrayList<>();
    for (CommunicatorProvider p : ServiceLoader.load(CommunicatorProvider.class)) {
      names.add(p.getClass().getName());
    }
    assertEquals(List.of(NativeProvider.class.getName()), names);
  }

  @Test
  void versionAndConstantsMatchTheHeader() {
    NativeLibrary.ensureLoaded();
    assertEquals(ColibriLib.versionCode(), new NativeProvider().version());
    assertEquals(0 * 10000 + 1 * 100 + 0, ColibriLib.versionCode());
    assertEquals(ColibriLib.splitNoColor(), io.colibri.Communicator.NO_COLOR, "CLB_SPLIT_NOCOLOR");
    assertEquals(9, ColibriLib.protocolVersion());
  }

  @Test
  void typeSizesMatchTheNativeLibrary() {
    NativeLibrary.ensureLoaded();
    for (DataType t : DataType.values()) {
      assertEquals(t.size(), ColibriLib.clbTypeSize(t.code()), t.name());
    }
    assertEquals(io.colibri.UniqueId.BYTES, ColibriLib.uniqueIdBytes());
  }

  @Test
  void librariesAreLoadedFromTheJarResources() {
    NativeLibrary.ensureLoaded();
    Map<String, String> loaded = Loader.getLoadedLibraries();
    String jni = find(loaded, "libjniColibriLib.so");
    String core = find(loaded, "libcolibri.so.0");
    assertNotNull(jni, "jniColibriLib not loaded: " + loaded);
    assertNotNull(core, "libcolibri.so.0 not loaded: " + loaded);
    // Both come from io/colibri/jni/<this platform> (target/classes or JavaCPP's cache of the
    // jar), never from a CMake build directory, and never another platform's.
    for (String path : List.of(jni, core)) {
      assertFalse(path.contains("build/native") || path.contains("build/arm64"), path);
      assertTrue(path.contains("/io/colibri/jni/" + Loader.getPlatform() + "/"), path);
    }
  }

  @Test
  void thePlatformNamesTheJarsAsJavaCppLooksForThem() {
    // The classifiers of the natives jars are JavaCPP's platform names, which decide where it
    // looks for the libraries: the loader's own name must agree, for the verbs plugin's path and
    // for the message that says which jar to add.
    assertEquals(Loader.getPlatform(), NativeLibrary.PLATFORM);
    assertEquals("linux-x86_64", NativeLibrary.platform("Linux", "amd64"));
    assertEquals("linux-arm64", NativeLibrary.platform("Linux", "aarch64"));
    assertEquals("linux-x86_64", NativeLibrary.platform("Linux", "x64"));
    assertEquals("linux-arm64", NativeLibrary.platform("Linux", "armv8l"));
    assertEquals("linux-ppc64le", NativeLibrary.platform("Linux", "ppc64le"));
    assertTrue(NativeLibrary.whatToAdd().contains("classifier " + Loader.getPlatform()));
    assertEquals(
        "/io/colibri/verbs/" + Loader.getPlatform() + "/libcolibri_verbs.so",
        NativeLibrary.VERBS_PLUGIN);
  }

  @Test
  void loadedLibrariesNeedNeitherCudaNorVerbs() throws Exception {
    NativeLibrary.ensureLoaded();
    Map<String, String> loaded = Loader.getLoadedLibraries();
    for (String name : List.of("libjniColibriLib.so", "libcolibri.so.0")) {
      String path = find(loaded, name);
      assertNotNull(path, name + " not loaded: " + loaded);
      assertNoForbiddenNeeded(Paths.get(path));
    }
  }

  @Test
  void buildTreeLibraryNeedsNeitherCudaNorVerbs() throws Exception {
    Path lib =
        Paths.get(System.getProperty("colibri.nativeBuildDir", "../build/native"), "libcolibri.so");
    assumeTrue(Files.exists(lib), lib + " not built (-Dcolibri.skipNative?)");
    assertNoForbiddenNeeded(lib);
  }

  /**
   * The product libraries carry no verbs emulator (it is the tests' stand-in libibverbs.so.1), and
   * libcolibri.so no verbs code at all (that is the plugin): neither the emulator's device and
   * socket names nor, in the core, the libibverbs entry points the loader looks up appear in their
   * bytes, and each exports only its interface (no C++ symbol, not even a weak template instance of
   * the libstdc++ it links statically).
   */
  @Test
  void productLibrariesCarryNoEmulatorAndTheCoreNoVerbs() throws Exception {
    Path build = Paths.get(System.getProperty("colibri.nativeBuildDir", "../build/native"));
    Path core = build.resolve("libcolibri.so");
    Path plugin = build.resolve("libcolibri_verbs.so");
    assumeTrue(
        Files.exists(core) && Files.exists(plugin),
        "libcolibri.so or libcolibri_verbs.so not built (-Dcolibri.skipNative, or no verbs.h)");
    for (Path lib : List.of(core, plugin)) {
      String bytes = new String(Files.readAllBytes(lib), StandardCharsets.ISO_8859_1);
      for (String emulator : List.of("colibri_emu0", "colibri-verbs-emu", "verbs emulator")) {
        assertFalse(bytes.contains(emulator), lib + " contains \"" + emulator + "\"");
      }
    }
    String coreBytes = new String(Files.readAllBytes(core), StandardCharsets.ISO_8859_1);
    for (String verbs : List.of("ibv_reg_mr", "ibv_create_qp", "libibverbs.so.1")) {
      assertFalse(coreBytes.contains(verbs), core + " contains \"" + verbs + "\": verbs code");
    }
    assertEquals(List.of("clbNetPlugin_v1"), exports(plugin));
    for (String e : exports(core)) {
      assertTrue(e.startsWith("clb"), core + " exports " + e);
    }
  }

  /** The symbols a library defines for others (readelf --dyn-syms: defined, global or weak). */
  private static List<String> exports(Path lib) throws IOException, InterruptedException {
    Process p =
        new ProcessBuilder("readelf", "-W", "--dyn-syms", lib.toString())
            .redirectErrorStream(true)
            .start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(30, TimeUnit.SECONDS), "readelf hung");
    List<String> names = new ArrayList<>();
    for (String line : out.split("\n")) {
      String[] f = line.trim().split("\\s+");
      // Num: Value Size Type Bind Vis Ndx Name
      if (f.length >= 8
          && f[0].endsWith(":")
          && !f[6].equals("UND")
          && (f[4].equals("GLOBAL") || f[4].equals("WEAK"))
          && f[5].equals("DEFAULT")) {
        names.add(f[7].replaceAll("@.*", ""));
      }
    }
    return names;
  }

  @Test
  void jniLibraryHasNoBuildPathInItsRunpath() throws Exception {
    NativeLibrary.ensureLoaded();
    String jni = find(Loader.getLoadedLibraries(), "libjniColibriLib.so");
    String dynamic = readelf(Paths.get(jni));
    for (String line : dynamic.split("\n")) {
      if (line.contains("RPATH") || line.contains("RUNPATH")) {
        assertTrue(line.contains("[$ORIGIN/]"), line);
      }
    }
  }

  private static void assertNoForbiddenNeeded(Path lib) throws Exception {
    String dynamic = readelf(lib);
    List<String> needed = new ArrayList<>();
    for (String line : dynamic.split("\n")) {
      if (line.contains("(NEEDED)")) {
        needed.add(line.substring(line.indexOf('[') + 1, line.indexOf(']')));
      }
    }
    assertFalse(needed.isEmpty(), "no NEEDED entries read from " + lib + ":\n" + dynamic);
    for (String n : needed) {
      for (String f : FORBIDDEN) {
        assertFalse(
            n.startsWith(f),
            lib
                + " has a link-time dependency on "
                + n
                + "; it must be loaded at run time (dlopen) instead");
      }
    }
  }

  private static String readelf(Path lib) throws IOException, InterruptedException {
    Process p;
    try {
      p = new ProcessBuilder("readelf", "-d", lib.toString()).redirectErrorStream(true).start();
    } catch (IOException e) {
      assumeTrue(false, "readelf not installed (binutils): " + e.getMessage());
      throw e;
    }
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(30, TimeUnit.SECONDS), "readelf hung");
    assertEquals(0, p.exitValue(), "readelf -d " + lib + ":\n" + out);
    return out;
  }

  private static String find(Map<String, String> loaded, String fileName) {
    for (String path : loaded.values()) {
      if (path != null && Paths.get(path).getFileName().toString().equals(fileName)) {
        return path;
      }
    }
    return null;
  }

  /** colibri-cuda (its kernel-images.txt and images) is not on this module's test class path. */
  @Test
  void withoutColibriCudaNoKernelImagesAreListed() throws IOException {
    assertEquals(List.of(), NativeLibrary.kernelImages());
  }
}
