// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
//
// No atomic on host memory from the collectives' kernels, checked on the kernel image itself (the
// PTX the build makes, no GPU needed). Between GPUs without peer access the flags, LL buffer and
// staging are pinned host memory, and GPU atomics there need PCIe atomics, which some PCIe hosts
// lack. The kernels that run there (LL, staged, direct, the copies path's steps and combine, the
// reduce, scale and copy kernels) may only use an atomic on the per-rank block counters
// (ClbDevCallArgs::counters), which the host places in device memory whenever the flags are in
// host memory (device/node_memory.cc). Each atomic's address in the PTX is traced back through moves,
// address conversions and additions to the kernel parameter it comes from, which must be
// `counters` (its offset in ClbDevCallArgs); the point-to-point kernels, which never run there and
// use atomics on their own state, show that the tracing tells other targets apart.
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernel_abi.h"

namespace {

struct Instr {
  std::string op;                 // "atom.global.add.u32"
  std::vector<std::string> args;  // operands as written
};

// The image's entries: name -> instructions in order.
std::map<std::string, std::vector<Instr>> entries(const std::string& ptx) {
  std::map<std::string, std::vector<Instr>> out;
  std::istringstream in(ptx);
  std::string line, current;
  const std::regex entry(R"(^\.(visible\s+)?\.entry\s+(\w+)\s*\()");
  const std::regex func(R"(^\.(visible\s+)?\.func\b)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      current = m[2];
      out[current];
      continue;
    }
    if (std::regex_search(line, func)) {
      current = "(func)";  // helpers' bodies: checked as one, below
      out[current];
      continue;
    }
    if (current.empty()) continue;
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] == '.' || line[i] == '/' || line[i] == '{' || line[i] == '}' ||
        line[i] == '$' || line[i] == '@')
      continue;  // directives, comments, braces, labels, predicated lines (no atomics there)
    std::string body = line.substr(i);
    const size_t semi = body.find(';');
    if (semi != std::string::npos) body.resize(semi);
    Instr ins;
    std::istringstream words(body);
    words >> ins.op;
    std::string rest;
    std::getline(words, rest);
    std::string arg;
    int depth = 0;
    for (char c : rest) {  // split at top-level commas ([%rd1+8] stays whole)
      if (c == '[') depth++;
      if (c == ']') depth--;
      if (c == ',' && depth == 0) {
        ins.args.push_back(arg);
        arg.clear();
        continue;
      }
      if (c != ' ' && c != '\t') arg += c;
    }
    if (!arg.empty()) ins.args.push_back(arg);
    out[current].push_back(ins);
  }
  return out;
}

bool isAtomic(const std::string& op) { return op.rfind("atom.", 0) == 0 || op.rfind("red.", 0) == 0; }

// The parameter offsets a register's value comes from (following mov, cvta and add/sub, up to
// ld.param.u64 of the parameter block at an offset), from instruction `before` backwards. Index
// arithmetic (shifts, masks, multiplies, conversions, other loads) contributes none.
void paramSources(const std::vector<Instr>& code, size_t before, const std::string& reg, std::set<long>* out,
                  int depth = 0) {
  if (depth > 64 || reg.empty() || reg[0] != '%') return;
  for (size_t k = before; k-- > 0;) {
    const Instr& d = code[k];
    if (d.args.empty() || d.args[0] != reg || isAtomic(d.op)) continue;
    if (d.op.rfind("ld.param.u64", 0) == 0 || d.op.rfind("ld.param.b64", 0) == 0) {
      static const std::regex at(R"(^\[([^\]+]+)(\+(\d+))?\]$)");
      std::smatch m;
      if (d.args.size() > 1 && std::regex_match(d.args[1], m, at)) {
        const long off = m[3].matched ? std::stol(m[3]) : 0;
        const std::string base = m[1];
        if (base.find("_param_") != std::string::npos)
          out->insert(off);
        else {  // [%rdX+off] with %rdX the parameter block's address
          std::set<long> baseOffs;
          paramSources(code, k, base, &baseOffs, depth + 1);
          for (long b : baseOffs) out->insert(b + off);
          if (baseOffs.empty()) out->insert(off);  // mov.b64 %rdX, NAME_param_0
        }
      }
      return;
    }
    if (d.op.rfind("mov.", 0) == 0 && d.args.size() > 1 && d.args[1].find("_param_") != std::string::npos) return;
    const bool follows = d.op.rfind("mov.", 0) == 0 || d.op.rfind("cvta.", 0) == 0 || d.op.rfind("add.", 0) == 0 ||
                         d.op.rfind("sub.", 0) == 0;
    if (follows)
      for (size_t a = 1; a < d.args.size(); a++) paramSources(code, k, d.args[a], out, depth + 1);
    return;
  }
}

// Every atomic of `code`: the parameter offsets its address comes from.
std::vector<std::set<long>> atomicTargets(const std::vector<Instr>& code) {
  std::vector<std::set<long>> out;
  for (size_t k = 0; k < code.size(); k++) {
    if (!isAtomic(code[k].op) || code[k].args.empty()) continue;
    // The address operand: [%rdN] or [%rdN+off] (the first for red., the second for atom.).
    std::string addr;
    for (const std::string& a : code[k].args)
      if (!a.empty() && a[0] == '[') {
        addr = a;
        break;
      }
    static const std::regex reg(R"(^\[(%\w+)(\+\d+)?\]$)");
    std::smatch m;
    std::set<long> src;
    if (std::regex_match(addr, m, reg)) paramSources(code, k, m[1], &src);
    out.push_back(src);
  }
  return out;
}

std::string readPtx() {
  std::ifstream f(std::string(CLB_TEST_KERNEL_DIR) + "/colibri_kernels.ptx");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(KernelHostAtomics, TheCollectivesKernelsUseAtomicsOnTheDeviceCountersOnly) {
  const std::string ptx = readPtx();
  if (ptx.empty()) GTEST_SKIP() << "no " << CLB_TEST_KERNEL_DIR << "/colibri_kernels.ptx (built without nvcc)";
  const auto code = entries(ptx);
  const long counters = (long)offsetof(ClbDevCallArgs, counters);
  int checked = 0, atomics = 0;
  for (const auto& [name, body] : code) {
    const bool hostPath = name == "clb_dev_ll" || name == "clb_dev_staged" || name == "clb_dev_direct" ||
                          name == "clb_dev_hostcopy" || name == "clb_dev_hostcopy_combine" ||
                          name.rfind("clb_reduce_", 0) == 0 || name.rfind("clb_scale_", 0) == 0 || name == "clb_copy";
    if (name == "(func)") {
      for (const Instr& i : body) EXPECT_FALSE(isAtomic(i.op)) << "an atomic in a helper function: " << i.op;
      continue;
    }
    if (!hostPath) continue;
    checked++;
    for (const std::set<long>& t : atomicTargets(body)) {
      atomics++;
      EXPECT_EQ(t, std::set<long>{counters}) << name << ": an atomic whose address does not come from "
                                             << "ClbDevCallArgs::counters (offset " << counters << ") alone";
    }
  }
  EXPECT_GE(checked, 5 + 10 + 10 + 1) << "the kernels of the host-memory path were not all found in the image";
  EXPECT_GE(atomics, 2) << "the block counters' atomics were not found: is the tracing still reading this PTX?";
}

// The tracing tells other targets apart: the point-to-point kernels' atomics (on their own state,
// never run with host memory) do not come from `counters`.
TEST(KernelHostAtomics, TracingFindsAtomicsOnOtherTargets) {
  const std::string ptx = readPtx();
  if (ptx.empty()) GTEST_SKIP() << "no colibri_kernels.ptx (built without nvcc)";
  const auto code = entries(ptx);
  const long counters = (long)offsetof(ClbDevCallArgs, counters);
  auto it = code.find("clb_dev_p2p");
  ASSERT_NE(it, code.end());
  const auto targets = atomicTargets(it->second);
  ASSERT_FALSE(targets.empty());
  bool other = false;
  for (const std::set<long>& t : targets) other = other || (!t.empty() && !t.count(counters));
  EXPECT_TRUE(other) << "no atomic of clb_dev_p2p traced to a parameter other than counters";
}

}  // namespace
