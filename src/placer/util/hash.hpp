// FNV-1a, 64 bits: a small, stable hash of bytes, for fingerprints and checksums written into
// files (learned placers' checkpoints), not for hash tables.
//
//   Fnv1a h;
//   h.u64(graph.num_ops()), h.f64(step_time_s), h.bytes(name.data(), name.size());
//   std::uint64_t fingerprint = h.value();
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace placer {

class Fnv1a {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * kPrime;
  }
  // The eight bytes of `v`, lowest first (the same on every machine).
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) h_ = (h_ ^ ((v >> (8 * i)) & 0xFF)) * kPrime;
  }
  void f64(double d) { u64(std::bit_cast<std::uint64_t>(d)); }
  std::uint64_t value() const { return h_; }

 private:
  static constexpr std::uint64_t kPrime = 1099511628211ull;
  std::uint64_t h_ = 1469598103934665603ull;
};

}  // namespace placer
