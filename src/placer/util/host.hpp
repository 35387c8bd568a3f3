// What this machine is, read from the system without any accelerator library: the CPU's model name
// (the `local` preset names its CPU device so; `placer validate` compares a cluster's CPU with it).
#pragma once

#include <string>

namespace placer {

// The CPU's model name from /proc/cpuinfo ("AMD EPYC 7B13"), or "unknown CPU" where it does not say.
std::string host_cpu_model();

}  // namespace placer
