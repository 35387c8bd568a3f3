// Runs the built `placer` binary as a user would, capturing its exit code, stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/paths.hpp"

namespace placer::test {

struct Outcome {
  int exit_code = -1;  // 128 + signal when the process was killed by one; 124 when it timed out
  std::string out;
  std::string err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string quoted(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `placer ARGS...` with stdout and stderr captured in files; a hang is cut off after 120 s.
// `env`: arguments of env(1) that change placer's environment only ("NAME=VALUE", "-u", "NAME").
// `binary`: another placer executable than the one built (placer_at).
inline Outcome placer_at(const std::string& binary, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  const std::string out = temp_path("stdout"), err = temp_path("stderr");
  std::string cmd = "timeout 120 ";
  if (!env.empty()) {
    cmd += "env";
    for (const auto& e : env) cmd.append(" ").append(quoted(e));
    cmd += " ";
  }
  cmd += quoted(binary);
  for (const auto& a : args) cmd.append(" ").append(quoted(a));
  cmd.append(" >").append(quoted(out)).append(" 2>").append(quoted(err)).append(" </dev/null");
  int status = std::system(cmd.c_str());
  Outcome run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  run.out = read_file(out);
  run.err = read_file(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return run;
}

inline Outcome placer(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  return placer_at(placer_binary(), args, env);
}

}  // namespace placer::test
