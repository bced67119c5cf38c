// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// Files the build puts beside the test binary (test-plugins/, verbs-emu/), found from where the
// binary is at run time, so that a copy of the build folder (a GPU bundle) runs the same tests.
#pragma once

#include <limits.h>
#include <unistd.h>

#include <string>

namespace clbtest {

// `rel` under the folder of the running test binary.
inline std::string besideTests(const std::string& rel) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = ".";
  if (n > 0) {
    exe[n] = '\0';
    std::string p = exe;
    size_t slash = p.rfind('/');
    if (slash != std::string::npos) dir = p.substr(0, slash);
  }
  return dir + "/" + rel;
}

// The verbs emulator as the tests' libibverbs.so.1 (src/tests/verbs_emu/).
inline std::string verbsEmuLib() { return besideTests("verbs-emu/libibverbs.so.1"); }
// Plugins the loader must refuse (src/tests/plugins/).
inline std::string testPluginDir() { return besideTests("test-plugins"); }

}  // namespace clbtest
