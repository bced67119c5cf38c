/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * Certificates for COLIBRI_TLS, made with the openssl command in a folder: a CA, a certificate it
 * signed (every rank's) with its key, and a rogue CA that signed nothing here. Without openssl the
 * test skips, unless COLIBRI_REQUIRE_TLS_TESTS=1 (as in scripts/test.sh) makes that a failure.
 */
public record TestPki(Path ca, Path cert, Path key, Path rogueCa) {

  /**
   * Makes the files in {@code dir}.
   *
   * @param dir an empty folder that the test owns
   * @return the files
   */
  public static TestPki make(Path dir) {
    String ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    String caExt =
        "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign";
    String d = dir + "/";
    List<String> steps =
        List.of(
            "openssl req -x509 "
                + ec
                + " -keyout "
                + d
                + "ca.key -out "
                + d
                + "ca.pem -days 2"
                + " -subj /CN=colibri-test-ca "
                + caExt,
            "openssl req "
                + ec
                + " -keyout "
                + d
                + "rank.key -out "
                + d
                + "rank.csr"
                + " -subj /CN=colibri-rank",
            "openssl x509 -req -in "
                + d
                + "rank.csr -CA "
                + d
                + "ca.pem -CAkey "
                + d
                + "ca.key"
                + " -CAcreateserial -out "
                + d
                + "rank.pem -days 2",
            "openssl req -x509 "
                + ec
                + " -keyout "
                + d
                + "rogue.key -out "
                + d
                + "rogue.pem"
                + " -days 2 -subj /CN=rogue "
                + caExt);
    for (String step : steps) {
      String why = run(step);
      if (why != null) {
        if ("1".equals(System.getenv("COLIBRI_REQUIRE_TLS_TESTS"))) {
          Assertions.fail("TLS tests are required (COLIBRI_REQUIRE_TLS_TESTS=1) but " + why);
        }
        Assumptions.abort("TLS tests skipped: " + why);
      }
    }
    return new TestPki(
        dir.resolve("ca.pem"),
        dir.resolve("rank.pem"),
        dir.resolve("rank.key"),
        dir.resolve("rogue.pem"));
  }

  /**
   * The environment of a rank with TLS on.
   *
   * @param mode COLIBRI_TLS's value (bootstrap or all)
   * @param trusted the CA the rank checks its peers against
   * @return the variables
   */
  public Map<String, String> env(String mode, Path trusted) {
    return Map.of(
        "COLIBRI_TLS", mode,
        "COLIBRI_TLS_CERT", cert.toString(),
        "COLIBRI_TLS_KEY", key.toString(),
        "COLIBRI_TLS_CA", trusted.toString());
  }

  private static String run(String cmd) {
    try {
      Process p =
          new ProcessBuilder(cmd.split(" "))
              .redirectErrorStream(true)
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .start();
      if (!p.waitFor(60, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return "'" + cmd + "' took over 60 s";
      }
      return p.exitValue() == 0 ? null : "'" + cmd + "' exited with " + p.exitValue();
    } catch (IOException e) {
      return "no openssl command (" + e.getMessage() + ")";
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }
}
