// Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
#include "bootstrap/versions.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace clb {
namespace {

thread_local const VersionOverride* tOverride = nullptr;
thread_local VersionOverride tOverrideValue;

bool readText(const char* path, std::string* out) {
  FILE* f = fopen(path, "r");
  if (!f) return false;
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  out->assign(buf, n);
  return true;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && isspace((unsigned char)s[b])) b++;
  while (e > b && isspace((unsigned char)s[e - 1])) e--;
  return s.substr(b, e - b);
}

// "580.159.04": digits, then at least one dot-separated group of digits.
bool looksLikeVersion(const std::string& t) {
  bool digit = false, dot = false;
  for (size_t i = 0; i < t.size(); i++) {
    char c = t[i];
    if (isdigit((unsigned char)c)) {
      digit = true;
    } else if (c == '.' && digit && i + 1 < t.size() && isdigit((unsigned char)t[i + 1])) {
      dot = true;
    } else {
      return false;
    }
  }
  return digit && dot;
}

void copyField(char* dst, size_t cap, const std::string& v) { snprintf(dst, cap, "%s", v.c_str()); }

std::string field(const char* f, size_t cap) { return std::string(f, strnlen(f, cap)); }

struct Item {
  const char* name;      // in messages: "Colibri", "NVIDIA driver", "NIC firmware"
  const char* infoName;  // in the info line
  int failsAt;           // the clbVersionCheck_t from which a difference fails init
  bool skipNone;         // ranks without the thing are not compared
  const char* fix;
  std::string (*get)(const RankInfo&);
};

std::string getColibri(const RankInfo& r) { return field(r.versions.colibri, sizeof r.versions.colibri); }
std::string getDriver(const RankInfo& r) { return field(r.versions.driver, sizeof r.versions.driver); }
std::string getFirmware(const RankInfo& r) { return field(r.versions.firmware, sizeof r.versions.firmware); }

const Item kItems[] = {
    {"Colibri", "colibri", clbVersionCheckStrict, false,
     "run the same Colibri version on every rank (a different version may send different data for the "
     "same call); versionCheck=warn (COLIBRI_VERSION_CHECK=warn) lets init proceed with a warning, at your risk",
     getColibri},
    {"NVIDIA driver", "driver", clbVersionCheckExact, true,
     "install the same NVIDIA driver on every node, or set versionCheck to strict or warn "
     "(COLIBRI_VERSION_CHECK) if the difference is intended",
     getDriver},
    {"NIC firmware", "NIC firmware", clbVersionCheckExact, true,
     "update every node's RDMA NIC to the same firmware, or set versionCheck to strict or warn "
     "(COLIBRI_VERSION_CHECK) if the difference is intended",
     getFirmware},
};

std::string groups(const std::vector<RankInfo>& peers, const Item& it) {
  std::vector<std::string> values;
  for (const RankInfo& p : peers) values.push_back(it.get(p));
  return valuesByRank(values);
}

bool uniform(const std::vector<RankInfo>& peers, const Item& it) {
  for (const auto& p : peers)
    if (it.get(p) != it.get(peers[0])) return false;
  return true;
}

}  // namespace

// "0-2,5" for ranks {0, 1, 2, 5}.
std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) j++;
    if (!s.empty()) s += ",";
    s += std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

std::string valuesByRank(const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, std::vector<int>>> g;
  for (int r = 0; r < (int)values.size(); r++) {
    const std::string& v = values[r];
    auto f = std::find_if(g.begin(), g.end(), [&](const auto& p) { return p.first == v; });
    if (f == g.end())
      g.push_back({v, {r}});
    else
      f->second.push_back(r);
  }
  std::string s;
  for (size_t i = 0; i < g.size() && i < 8; i++) {
    if (i) s += ", ";
    s += g[i].first + (g[i].second.size() == 1 ? " on rank " : " on ranks ") + rankList(g[i].second);
  }
  if (g.size() > 8) s += ", and " + std::to_string(g.size() - 8) + " more values";
  return s;
}

std::string parseNvidiaDriverVersion(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  size_t at = line.find("Kernel Module");
  // Tokens after "Kernel Module" first ("for x86_64" may come between), else the whole line.
  for (size_t from : {at == std::string::npos ? std::string::npos : at + 13, (size_t)0}) {
    if (from == std::string::npos) continue;
    size_t i = from;
    while (i < line.size()) {
      while (i < line.size() && isspace((unsigned char)line[i])) i++;
      size_t j = i;
      while (j < line.size() && !isspace((unsigned char)line[j])) j++;
      std::string tok = line.substr(i, j - i);
      if (looksLikeVersion(tok)) return tok;
      i = j;
    }
  }
  return "";
}

std::string readNvidiaDriverVersion(const char* path) {
  std::string text;
  if (!readText(path, &text)) return "none";
  std::string v = parseNvidiaDriverVersion(text);
  return v.empty() ? "unrecognized" : v;
}

std::string readNicFirmware(const char* classDir) {
  DIR* d = opendir(classDir);
  if (!d) return "none";
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  if (names.empty()) return "none";
  std::string text;
  if (!readText((std::string(classDir) + "/" + names[0] + "/fw_ver").c_str(), &text)) return "none";
  text = trim(text);
  return text.empty() ? "none" : text;
}

void setVersionOverrideForThread(const VersionOverride* o) {
  if (o) {
    tOverrideValue = *o;
    tOverride = &tOverrideValue;
  } else {
    tOverride = nullptr;
  }
}

VersionInfo localVersions(int check) {
  VersionInfo v{};
  char lib[16];
  snprintf(lib, sizeof lib, "%d.%d.%d", CLB_VERSION_MAJOR, CLB_VERSION_MINOR, CLB_VERSION_PATCH);
  std::string colibri = lib, driver, firmware;
  const char* env;
  if (tOverride && !tOverride->colibri.empty())
    colibri = tOverride->colibri;
  else if ((env = getenv("COLIBRI_TEST_FAKE_VERSION")) && *env)
    colibri = env;
  if (tOverride && !tOverride->driver.empty())
    driver = tOverride->driver;
  else if ((env = getenv("COLIBRI_TEST_FAKE_DRIVER")) && *env)
    driver = env;
  else
    driver = readNvidiaDriverVersion();
  if (tOverride && !tOverride->firmware.empty())
    firmware = tOverride->firmware;
  else if ((env = getenv("COLIBRI_TEST_FAKE_FIRMWARE")) && *env)
    firmware = env;
  else
    firmware = readNicFirmware();
  copyField(v.colibri, sizeof v.colibri, colibri);
  copyField(v.driver, sizeof v.driver, driver);
  copyField(v.firmware, sizeof v.firmware, firmware);
  v.check = check;
  return v;
}

clbResult_t checkVersions(const std::vector<RankInfo>& peers, int myRank) {
  if (peers.empty()) return clbSuccess;
  int check = clbVersionCheckWarn, setBy = 0;
  for (int r = 0; r < (int)peers.size(); r++)
    if (peers[r].versions.check > check && peers[r].versions.check < clbNumVersionChecks) {
      check = peers[r].versions.check;
      setBy = r;
    }
  int mine = peers[myRank].versions.check;
  std::string setting = std::string("versionCheck=") + clbVersionCheckName(check);
  if (mine != check)
    setting += std::string(" (set on rank ") + std::to_string(setBy) + "; this rank has " + clbVersionCheckName(mine) +
               ": the strictest setting applies)";
  for (const Item& it : kItems) {
    int ref = -1, other = -1;
    for (int r = 0; r < (int)peers.size() && other < 0; r++) {
      std::string v = it.get(peers[r]);
      if (it.skipNone && v == "none") continue;
      if (ref < 0)
        ref = r;
      else if (v != it.get(peers[ref]))
        other = r;
    }
    if (other < 0) continue;
    std::string a = it.get(peers[ref]), b = it.get(peers[other]);
    std::string all = peers.size() > 2 ? " (" + groups(peers, it) + ")" : "";
    if (check >= it.failsAt)
      return setError(clbInvalidUsage, "rank %d has %s %s but rank %d has %s%s: %s [%s]", ref, it.name, a.c_str(),
                      other, b.c_str(), all.c_str(), it.fix, setting.c_str());
    CLB_WARN("rank %d: rank %d has %s %s but rank %d has %s%s; init proceeds (%s)", myRank, ref, it.name, a.c_str(),
             other, b.c_str(), all.c_str(), setting.c_str());
  }
  return clbSuccess;
}

std::string describeVersions(const std::vector<RankInfo>& peers) {
  if (peers.empty()) return "versions: unknown\n";
  bool same = true;
  for (const Item& it : kItems) same = same && uniform(peers, it);
  std::string s = "versions: ";
  for (size_t i = 0; i < sizeof kItems / sizeof kItems[0]; i++) {
    const Item& it = kItems[i];
    if (i) s += same ? ", " : "; ";
    s += it.infoName;
    if (same)
      s += " " + it.get(peers[0]);
    else if (uniform(peers, it))
      s += " " + it.get(peers[0]) + " on all ranks";
    else
      s += " DIFFERS: " + groups(peers, it);
  }
  s += same ? " (all ranks)\n" : "\n";
  return s;
}

}  // namespace clb
