#include "placer/exec/memory_meter.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>

#ifdef PLACER_HAVE_C10_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace placer::exec::detail {
namespace {

std::atomic<std::uint64_t> g_current{0}, g_peak{0};
// The timeline (start_host_timeline): off unless recording, then every change appends a sample.
std::atomic<bool> g_recording{false};
std::mutex g_timeline_mutex;
std::vector<HostSample> g_timeline;

void record(std::uint64_t now) {
  const auto t = std::chrono::steady_clock::now().time_since_epoch();
  std::lock_guard lock(g_timeline_mutex);
  g_timeline.push_back({std::chrono::duration_cast<std::chrono::nanoseconds>(t).count(), now});
}

// Each block asked of the base allocator carries a header of this size in front of the tensor's
// bytes, holding their count, so that the deleter (which gets only the pointer) can subtract them.
// 64 keeps the data at the base allocator's alignment (c10 aligns CPU storage to 64 bytes).
constexpr std::size_t kHeader = 64;
c10::DeleterFnPtr g_base_delete = nullptr;  // the base allocator's raw deleter: frees a block it made

void add(std::uint64_t bytes) {
  const std::uint64_t now = g_current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (g_recording.load(std::memory_order_relaxed)) [[unlikely]] record(now);
  std::uint64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void metered_delete(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeader;
  std::uint64_t bytes;
  std::memcpy(&bytes, block, sizeof bytes);
  const std::uint64_t now = g_current.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
  if (g_recording.load(std::memory_order_relaxed)) [[unlikely]] record(now);
  g_base_delete(block);
}

// A counting front of the CPU allocator that was current when it was installed. Blocks come from
// the base allocator's raw interface (whose context is the block itself, as c10's default CPU
// allocator gives), so that raw_allocate/raw_deleter keep working through this one.
class MeteredCpuAllocator final : public c10::Allocator {
 public:
  explicit MeteredCpuAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(std::size_t n) const override {
    if (n == 0) return base_->allocate(0);
    void* block = base_->raw_allocate(n + kHeader);
    const std::uint64_t bytes = n;
    std::memcpy(block, &bytes, sizeof bytes);
    add(bytes);
    void* data = static_cast<char*>(block) + kHeader;
    return {data, data, &metered_delete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &metered_delete; }

 private:
  c10::Allocator* base_;
};

}  // namespace

void install_host_meter() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* base = c10::GetCPUAllocator();
    g_base_delete = base->raw_deleter();
    if (g_base_delete == nullptr) return;  // a base without a raw interface: host memory stays unmeasured
    static MeteredCpuAllocator metered(base);
    c10::SetCPUAllocator(&metered, /*priority=*/255);
  });
}

MemoryReading read_host_memory() {
  if (g_base_delete == nullptr) return {};
  return {g_current.load(std::memory_order_relaxed), g_peak.load(std::memory_order_relaxed), true};
}

void start_host_timeline() {
  {
    std::lock_guard lock(g_timeline_mutex);
    g_timeline.clear();
    g_timeline.reserve(1 << 16);
  }
  g_recording.store(true, std::memory_order_relaxed);
}

std::vector<HostSample> stop_host_timeline() {
  g_recording.store(false, std::memory_order_relaxed);
  std::lock_guard lock(g_timeline_mutex);
  return std::move(g_timeline);
}

void reset_host_peak() { g_peak.store(g_current.load(std::memory_order_relaxed), std::memory_order_relaxed); }

#ifdef PLACER_HAVE_C10_CUDA
MemoryReading read_cuda_memory(int index) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  const auto& bytes = stats.allocated_bytes[0];  // StatType::AGGREGATE
  return {static_cast<std::uint64_t>(bytes.current), static_cast<std::uint64_t>(bytes.peak), true};
}
void reset_cuda_peak(int index) { c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index)); }
#else
MemoryReading read_cuda_memory(int) { return {}; }
void reset_cuda_peak(int) {}
#endif

}  // namespace placer::exec::detail
