/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.jar.JarFile;
import javax.lang.model.SourceVersion;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

/**
 * Checks what {@code mvn verify} left in each module's target/ against what a repository and an
 * IDE expect (issue 14): a -sources and a -javadoc jar next to every main jar, an
 * Automatic-Module-Name in every main jar's manifest, the BOM listing every published artifact
 * and no third-party library, and the metadata Maven Central asks of every pom; the natives jars
 * of every platform (linux-x86_64, and linux-arm64 from {@code -Plinux-arm64}), each shared
 * library in them an ELF file of its platform's machine. Run from the repository root after
 * {@code mvn verify -Plinux-arm64}, as scripts/test.sh does: {@code java
 * scripts/CheckArtifacts.java}; {@code --platforms linux-x86_64} checks that platform's jars only
 * (a build without the profile; the BOM must list every platform's all the same). Prints one line
 * per failure and a count; exits 1 if anything failed.
 */
public class CheckArtifacts {
  static int passed;
  static final List<String> failures = new ArrayList<>();

  static void check(boolean ok, String what) {
    if (ok) {
      passed++;
    } else {
      failures.add(what);
      System.out.println("FAIL " + what);
    }
  }

  /** Every platform whose natives the project publishes, and its ELF machine (e_machine). */
  static final Map<String, Integer> PLATFORMS = Map.of("linux-x86_64", 62, "linux-arm64", 183);

  public static void main(String[] args) throws Exception {
    Element root = read(new File("pom.xml"));
    String version = text(root, "version");
    String platform = text(child(root, "properties"), "colibri.platform");
    check(
        PLATFORMS.containsKey(platform),
        "pom.xml: colibri.platform " + platform + " is one of " + PLATFORMS.keySet());
    List<String> built = new ArrayList<>(new TreeSet<>(PLATFORMS.keySet()));
    if (args.length == 2 && args[0].equals("--platforms")) {
      built = List.of(args[1].split(","));
    } else if (args.length != 0) {
      System.out.println(
          "usage: java scripts/CheckArtifacts.java [--platforms linux-x86_64[,linux-arm64]]");
      System.exit(2);
    }
    checkMetadata("pom.xml", root);
    // The modules inherit url and scm as they are (Maven would append their artifactIds).
    check(
        "false".equals(root.getAttribute("child.project.url.inherit.append.path")),
        "pom.xml: <project child.project.url.inherit.append.path=\"false\">");
    Element scm = child(root, "scm");
    for (String part : new String[] {"connection", "developerConnection", "url"}) {
      String attribute = "child.scm." + part + ".inherit.append.path";
      check(
          scm != null && "false".equals(scm.getAttribute(attribute)),
          "pom.xml: <scm " + attribute + "=\"false\">");
    }
    Element pluginManagement = child(child(root, "build"), "pluginManagement");
    Element javadocConfig =
        child(plugin(pluginManagement, "maven-javadoc-plugin"), "configuration");
    check(
        "true".equals(text(javadocConfig, "failOnWarnings")),
        "pom.xml: maven-javadoc-plugin has <failOnWarnings>true</failOnWarnings>");
    check(
        "true".equals(text(javadocConfig, "failOnError")),
        "pom.xml: maven-javadoc-plugin has <failOnError>true</failOnError>");

    Map<String, String> descriptions = new HashMap<>();
    Map<String, String> moduleNames = new HashMap<>();
    TreeSet<String> published = new TreeSet<>();
    Element bom = null;
    for (Element m : children(child(root, "modules"), "module")) {
      String dir = m.getTextContent().trim();
      Element pom = read(new File(dir, "pom.xml"));
      String artifact = text(pom, "artifactId");
      checkMetadata(dir + "/pom.xml", pom);
      String other = descriptions.put(text(pom, "description"), dir);
      check(
          other == null, dir + "/pom.xml: a description of its own (the same as " + other + "'s)");
      if ("pom".equals(text(pom, "packaging"))) {
        if (artifact.equals("colibri-bom")) {
          bom = pom;
        }
        continue;
      }
      published.add(artifact);
      File target = new File(dir, "target");
      String base = artifact + "-" + version;
      boolean classes = checkMainJar(new File(target, base + ".jar"), moduleNames);
      check(
          !holds(new File(target, base + ".jar"), CheckArtifacts::isLibrary),
          base + ".jar holds no native library (they go to the platforms' jars)");
      File sources = new File(target, base + "-sources.jar");
      check(holds(sources, n -> n.endsWith(".java")), sources + " exists and holds .java files");
      File docs = new File(target, base + "-javadoc.jar");
      check(holds(docs, n -> n.equals("index.html")), docs + " exists and holds index.html");
      if (classes) {
        check(
            holds(docs, n -> n.startsWith("io/colibri/") && n.endsWith(".html")),
            docs + " has the pages of its classes in the package layout (io/colibri/...)");
      }
      if (artifact.equals("colibri-native") || artifact.equals("colibri-verbs")) {
        for (String p : PLATFORMS.keySet()) {
          published.add(artifact + ":" + p);
          if (artifact.equals("colibri-native")) {
            published.add(artifact + ":" + p + "-nccl");
          }
        }
        for (String p : built) {
          checkNatives(target, base, artifact, p, moduleNames);
        }
      }
    }

    check(bom != null, "pom.xml: a module colibri-bom with packaging pom");
    if (bom != null) {
      check(
          child(bom, "parent") == null,
          "colibri-bom/pom.xml: no <parent> (it would hand the"
              + " parent's dependencyManagement, JUnit and JavaCPP, to every importer)");
      check(version.equals(text(bom, "version")), "colibri-bom/pom.xml: version " + version);
      check(
          platform.equals(text(child(bom, "properties"), "colibri.platform")),
          "colibri-bom/pom.xml: colibri.platform " + platform + ", as in the parent");
      for (String same : new String[] {"url", "licenses", "developers", "scm"}) {
        check(
            Objects.equals(flat(child(root, same)), flat(child(bom, same))),
            "colibri-bom/pom.xml: <" + same + "> the same as the parent's");
      }
      TreeSet<String> listed = new TreeSet<>();
      Element managed = child(child(bom, "dependencyManagement"), "dependencies");
      for (Element d : children(managed, "dependency")) {
        String classifier = text(d, "classifier");
        String id =
            text(d, "artifactId")
                + (classifier == null
                    ? ""
                    : ":" + classifier.replace("${colibri.platform}", platform));
        check(
            "io.colibri".equals(text(d, "groupId")),
            "colibri-bom/pom.xml: only io.colibri"
                + " artifacts (not "
                + text(d, "groupId")
                + ":"
                + id
                + ")");
        check(
            "${project.version}".equals(text(d, "version")),
            "colibri-bom/pom.xml: " + id + " at ${project.version}");
        listed.add(id);
      }
      check(
          listed.equals(published),
          "colibri-bom/pom.xml lists every published artifact: lists "
              + listed
              + ", the build publishes "
              + published);
    }
    System.out.println("artifacts: " + passed + " passed, " + failures.size() + " failed");
    System.exit(failures.isEmpty() ? 0 : 1);
  }

  /** One platform's natives jars of colibri-native or colibri-verbs. */
  static void checkNatives(
      File target, String base, String artifact, String platform, Map<String, String> moduleNames)
      throws IOException {
    Integer machine = PLATFORMS.get(platform);
    if (machine == null) {
      check(false, "--platforms: " + platform + " is not one of " + PLATFORMS.keySet());
      return;
    }
    File natives = new File(target, base + "-" + platform + ".jar");
    checkMainJar(natives, moduleNames);
    // The verbs emulator is a test library (a stand-in libibverbs.so.1): no jar ships it.
    check(
        !holds(natives, n -> n.contains("libibverbs") || n.contains("verbs_emu")),
        natives + " carries no verbs emulator (libibverbs*, verbs_emu*)");
    List<String> libs = new ArrayList<>();
    if (artifact.equals("colibri-native")) {
      String dir = "io/colibri/jni/" + platform + "/";
      libs.add(natives + "!" + dir + "libcolibri.so.0");
      libs.add(natives + "!" + dir + "libjniColibriLib.so");
      // The NCCL drop-in: unpacked as it is, lib/libnccl.so.2 finds libcolibri.so.0 and that
      // finds its kernel images beside itself.
      File nccl = new File(target, base + "-" + platform + "-nccl.jar");
      check(holds(nccl, n -> n.equals("include/nccl.h")), nccl + " holds include/nccl.h");
      check(
          holds(nccl, n -> n.startsWith("lib/colibri_kernels")),
          nccl + " holds the kernel images in lib/");
      libs.add(nccl + "!lib/libnccl.so.2");
      libs.add(nccl + "!lib/libcolibri.so.0");
    } else {
      libs.add(natives + "!io/colibri/verbs/" + platform + "/libcolibri_verbs.so");
    }
    // Nothing of another platform: every library in the jars lies in this platform's folder.
    String own = artifact.equals("colibri-native") ? "io/colibri/jni/" : "io/colibri/verbs/";
    check(
        !holds(natives, n -> isLibrary(n) && !n.startsWith(own + platform + "/")),
        natives + " holds libraries only under " + own + platform + "/");
    if (artifact.equals("colibri-native")) {
      File nccl = new File(target, base + "-" + platform + "-nccl.jar");
      check(
          !holds(nccl, n -> isLibrary(n) && !n.startsWith("lib/")),
          nccl + " holds libraries only under lib/");
    }
    for (String lib : libs) {
      int bang = lib.indexOf('!');
      File jar = new File(lib.substring(0, bang));
      String entry = lib.substring(bang + 1);
      int found = elfMachine(jar, entry);
      check(
          found == machine,
          jar
              + " holds "
              + entry
              + ", an ELF shared library for "
              + platform
              + " (e_machine "
              + machine
              + (found == -1
                  ? "; the entry is missing"
                  : found == -2 ? "; not an ELF file" : "; it has " + found)
              + ")");
    }
  }

  /** Whether a jar entry is a shared library (name.so or name.so.N). */
  static boolean isLibrary(String entry) {
    return entry.endsWith(".so") || entry.matches(".*\\.so\\.[0-9.]+");
  }

  /** The ELF e_machine of a jar entry: -1 when the jar or entry is missing, -2 when not ELF. */
  static int elfMachine(File jar, String entry) throws IOException {
    if (!jar.isFile()) {
      return -1;
    }
    try (JarFile j = new JarFile(jar)) {
      java.util.jar.JarEntry e = j.getJarEntry(entry);
      if (e == null) {
        return -1;
      }
      byte[] h = j.getInputStream(e).readNBytes(20);
      if (h.length < 20 || h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F' || h[5] != 1) {
        return -2; // not ELF, or not little-endian
      }
      return (h[18] & 0xff) | (h[19] & 0xff) << 8;
    }
  }

  /** What Maven Central asks of a pom: its own name and description (the rest it inherits). */
  static void checkMetadata(String path, Element pom) {
    check(text(pom, "name") != null, path + ": <name>");
    check(text(pom, "description") != null, path + ": <description>");
    if (child(pom, "parent") != null) {
      return;
    }
    check(text(pom, "url") != null, path + ": <url>");
    check(
        text(child(child(pom, "licenses"), "license"), "name") != null,
        path + ": <licenses><license><name>");
    check(
        text(child(child(pom, "developers"), "developer"), "name") != null,
        path + ": <developers><developer><name>");
    for (String part : new String[] {"connection", "developerConnection", "url"}) {
      check(text(child(pom, "scm"), part) != null, path + ": <scm><" + part + ">");
    }
  }

  /** Checks the jar's Automatic-Module-Name; returns whether it holds classes. */
  static boolean checkMainJar(File jar, Map<String, String> moduleNames) throws IOException {
    if (!jar.isFile()) {
      check(false, jar + " exists");
      return false;
    }
    try (JarFile j = new JarFile(jar)) {
      String name =
          j.getManifest() == null
              ? null
              : j.getManifest().getMainAttributes().getValue("Automatic-Module-Name");
      check(
          name != null && SourceVersion.isName(name),
          jar + ": Automatic-Module-Name is a valid module name (it is " + name + ")");
      String other = name == null ? null : moduleNames.put(name, jar.getPath());
      check(other == null, jar + ": Automatic-Module-Name " + name + " also names " + other);
      return j.stream()
          .anyMatch(
              e -> e.getName().endsWith(".class") && !e.getName().endsWith("package-info.class"));
    }
  }

  /** Whether the jar exists and holds an entry whose name passes {@code test}. */
  static boolean holds(File jar, Predicate<String> test) throws IOException {
    if (!jar.isFile()) {
      return false;
    }
    try (JarFile j = new JarFile(jar)) {
      return j.stream().anyMatch(e -> test.test(e.getName()));
    }
  }

  /** The plugin with this artifactId among the {@code <plugins>} of {@code parent}. */
  static Element plugin(Element parent, String artifactId) {
    for (Element p : children(child(parent, "plugins"), "plugin")) {
      if (artifactId.equals(text(p, "artifactId"))) {
        return p;
      }
    }
    return null;
  }

  static Element read(File pom) throws Exception {
    return DocumentBuilderFactory.newInstance()
        .newDocumentBuilder()
        .parse(pom)
        .getDocumentElement();
  }

  static List<Element> children(Element parent, String name) {
    List<Element> out = new ArrayList<>();
    Node n = parent == null ? null : parent.getFirstChild();
    for (; n != null; n = n.getNextSibling()) {
      if (n instanceof Element && ((Element) n).getTagName().equals(name)) {
        out.add((Element) n);
      }
    }
    return out;
  }

  static Element child(Element parent, String name) {
    List<Element> all = children(parent, name);
    return all.isEmpty() ? null : all.get(0);
  }

  /** The trimmed text of the child element {@code name}; null when it is missing or empty. */
  static String text(Element parent, String name) {
    Element e = child(parent, name);
    String t = e == null ? "" : e.getTextContent().trim();
    return t.isEmpty() ? null : t;
  }

  /** An element's text with white space folded, to compare two poms' copies of it. */
  static String flat(Element e) {
    return e == null ? null : e.getTextContent().trim().replaceAll("\\s+", " ");
  }
}
