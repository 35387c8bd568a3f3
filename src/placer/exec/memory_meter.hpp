// Internal to exec/: the bytes of live tensors in each memory of the machine, as libtorch's
// allocators see them, for the peaks Executor::measure reports (docs/execution.md#memory).
// - Host: every CPU tensor's storage is allocated through c10's CPU allocator; install_host_meter()
//   puts a counting allocator in front of it (once per process), which records the bytes asked for
//   (not the allocator's rounding or its headers) and the most live at once since the last reset.
// - CUDA devices: the caching allocator's own statistics (bytes in live tensors, as
//   torch.cuda.max_memory_allocated), when this libtorch has CUDA (PLACER_HAVE_C10_CUDA).
#pragma once

#include <cstdint>
#include <vector>

namespace placer::exec::detail {

// Installs the host meter if it is not yet (thread-safe). Tensors allocated before are not counted
// (and their release is not subtracted).
void install_host_meter();
struct MemoryReading {
  std::uint64_t current_bytes = 0;
  std::uint64_t peak_bytes = 0;  // since the last reset
  bool measured = false;         // false: this memory cannot be measured in this build
};
MemoryReading read_host_memory();
void reset_host_peak();  // peak := current
// While on, every change of the host's live bytes is recorded (steady-clock nanoseconds, bytes after
// it); off, the samples recorded since it was turned on. Not reentrant: one recording at a time.
struct HostSample {
  std::int64_t t_ns;
  std::uint64_t bytes;
};
void start_host_timeline();
std::vector<HostSample> stop_host_timeline();
// CUDA device `index`: its caching allocator's statistics (measured = false without CUDA).
MemoryReading read_cuda_memory(int index);
void reset_cuda_peak(int index);

}  // namespace placer::exec::detail
