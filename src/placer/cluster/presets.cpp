// The built-in machines. Every constant below is explained, with its source, in docs/clusters.md
// ("Presets"); change both together.
#include <array>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include "placer/cluster/cluster.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

// Literals are written in SI units (1.2e10 bytes/s, 1e-5 s) so that they print back as written.
constexpr std::uint64_t kGiB = 1ull << 30;  // vendors' "GB" of memory are binary

// ---- Shared figures -------------------------------------------------------------------------------
// A small host<->GPU copy costs about 20 us end to end (the figure for the h100-box; the
// machines of the papers were not measured); it is split equally over the two PCIe hops (root
// complex -> switch, switch -> GPU) of a host-GPU route.
constexpr double kPcieHopLatencyS = 10e-6;
// A small GPU<->GPU copy over NVLink: about 10 us (estimate: no pageable staging, same call overhead).
constexpr double kNvlinkLatencyS = 10e-6;       // one direct link
constexpr double kNvswitchHopLatencyS = 5e-6;   // two hops through an NVSwitch
constexpr double kPcie3BytesPerS = 12e9;        // x16 gen 3, effective
constexpr double kTfGpuOpOverheadS = 15e-6;     // TensorFlow 1.x era, per GPU op
constexpr double kCpuOpOverheadS = 8e-6;        // the figure for PyTorch eager; TensorFlow: 5-10 us

// Measured on a machine with one H100 SXM5 80GB and 16 cores of a Xeon, PyTorch 2.11 (CUDA 13) eager
// mode, 2026-11-23: the `local` preset's own measurements and `placer fit` over profiles of six
// shared models, training and inference (docs/data/h100-2026-11-23/, docs/execution.md). The
// efficiencies are relative to these peaks; conv reaches 3.8 x the fp32 matrix-product peak because
// cuDNN convolves in TF32 by default.
constexpr double kH100Flops = 51.6e12;             // fp32 4096^2 matrix product, TF32 off
constexpr double kH100Bandwidth = 2.97e12;         // 256 MiB device copy, read + write
constexpr double kH100OpOverheadS = 6.1e-6;        // fitted per-op cost inside a step (asynchronous launches)
constexpr double kH100BackwardOpOverheadS = 27.9e-6;  // fitted, per gradient (an autograd node, several kernels)
constexpr double kH100BoxCpuFlops = 1.06e12;       // fp32 768^2 matrix product, 15 threads
constexpr double kH100BoxCpuBandwidth = 142e9;     // 32 MiB copy, read + write
constexpr double kH100BoxCpuOverheadS = 6.9e-6;    // fitted
constexpr double kH100BoxCpuBackwardOverheadS = 11.8e-6;  // fitted

struct ClassEfficiency {
  OpClass op_class;
  double compute, memory;  // 0: the cost model's default
};

std::array<Device::Efficiency, kNumOpClasses> efficiencies(std::initializer_list<ClassEfficiency> fitted) {
  std::array<Device::Efficiency, kNumOpClasses> e{};
  for (const ClassEfficiency& f : fitted) e[static_cast<std::size_t>(f.op_class)] = {f.compute, f.memory};
  return e;
}

// `placer fit` on the H100 machine (docs/data/h100-2026-11-23/fitted-cluster.json), rounded:
// forward and update ops, then gradients.
std::array<Device::Efficiency, kNumOpClasses> h100_efficiency() {
  return efficiencies({{OpClass::conv, 3.810, 0.445}, {OpClass::matmul, 0.929, 0.353}, {OpClass::elementwise, 0, 1.176},
                       {OpClass::normalization, 0, 0.564}, {OpClass::pooling, 0, 0.496}, {OpClass::reduction, 0, 0.756},
                       {OpClass::data_movement, 0, 1.142}, {OpClass::optimizer, 0, 4.000}});
}

std::array<Device::Efficiency, kNumOpClasses> h100_backward_efficiency() {
  return efficiencies({{OpClass::conv, 3.470, 0.446}, {OpClass::matmul, 1.471, 0.888}, {OpClass::elementwise, 0, 1.290},
                       {OpClass::normalization, 0, 0.406}, {OpClass::pooling, 0, 0.348}, {OpClass::reduction, 0, 0.851},
                       {OpClass::data_movement, 0, 1.771}});
}

std::array<Device::Efficiency, kNumOpClasses> h100_box_cpu_efficiency() {
  return efficiencies({{OpClass::conv, 0.808, 0.126}, {OpClass::matmul, 0.869, 0.105}, {OpClass::elementwise, 0, 0.535},
                       {OpClass::normalization, 0, 0.241}, {OpClass::pooling, 0, 0.050}, {OpClass::reduction, 0, 0.330},
                       {OpClass::data_movement, 0, 0.574}, {OpClass::optimizer, 0, 2.961}});
}

std::array<Device::Efficiency, kNumOpClasses> h100_box_cpu_backward_efficiency() {
  return efficiencies({{OpClass::conv, 0.782, 0.100}, {OpClass::matmul, 0.820, 0.081}, {OpClass::elementwise, 0, 0.797},
                       {OpClass::normalization, 0, 0.448}, {OpClass::pooling, 0, 0.258}, {OpClass::reduction, 0, 1.441},
                       {OpClass::data_movement, 0, 4.000}});
}

// An H100 as measured (dgx-h100's GPUs and h100-box's).
void set_h100_fit(Device& d) {
  d.efficiency = h100_efficiency();
  d.backward_efficiency = h100_backward_efficiency();
  d.backward_op_overhead_s = kH100BackwardOpOverheadS;
}

struct Builder {
  std::string name;
  std::vector<Device> devices;
  std::vector<std::string> switches;
  std::vector<Link> links;

  void add_device(std::string device, DeviceKind kind, std::string model, double flops, double bandwidth,
                  std::uint64_t memory, double overhead) {
    devices.push_back(Device{std::move(device), kind, std::move(model), flops, bandwidth, memory, overhead, 1});
  }
  void add_link(const std::string& a, const std::string& b, double bw_ab, double bw_ba, double latency_s) {
    links.push_back(Link{a + "<->" + b, a, b, bw_ab, bw_ba, latency_s});
  }
  void add_link(const std::string& a, const std::string& b, double bw, double latency_s) {
    add_link(a, b, bw, bw, latency_s);
  }
  Cluster build() { return Cluster::build(std::move(name), std::move(devices), std::move(switches), std::move(links)); }
};

std::string gpu(int i) { return "gpu:" + std::to_string(i); }
std::string cpu(int i) { return "cpu:" + std::to_string(i); }
std::string indexed(const char* prefix, int i) { return prefix + std::to_string(i); }

// Mirhoseini et al. 2017/2018: one 18-core Haswell (Xeon E5-2699 v3) and `num_gpus` GK210 GPUs,
// two per K80 board behind the board's PCIe switch; the boards hang off the CPU's root complex.
Cluster k80(int num_gpus) {
  Builder b;
  b.name = "k80x" + std::to_string(num_gpus);
  b.add_device(cpu(0), DeviceKind::cpu, "Intel Xeon E5-2699 v3 (Haswell, 18 cores, 2.3 GHz)",
               1.3248e12 /* 18 x 2.3 GHz x 32 */, 68.3e9, 256 * kGiB, kCpuOpOverheadS);
  for (int g = 0; g < num_gpus; ++g)
    b.add_device(gpu(g), DeviceKind::gpu, "NVIDIA Tesla K80 (one GK210 of two)", 4.37e12, 240e9, 12 * kGiB,
                 kTfGpuOpOverheadS);
  b.switches.push_back("root0");
  b.add_link(cpu(0), "root0", 68.3e9, 0);
  for (int board = 0; board < num_gpus / 2; ++board) {
    const std::string sw = indexed("pcie", board);
    b.switches.push_back(sw);
    b.add_link("root0", sw, kPcie3BytesPerS, kPcieHopLatencyS);
    b.add_link(sw, gpu(2 * board), kPcie3BytesPerS, kPcieHopLatencyS);
    b.add_link(sw, gpu(2 * board + 1), kPcie3BytesPerS, kPcieHopLatencyS);
  }
  return b.build();
}

// DGX-1 (P100): GPUs in quads {0..3}, {4..7}, each quad fully joined by NVLink, plus i <-> i+4;
// two GPUs per PCIe switch, two switches per CPU socket, sockets joined by QPI. p100x4 is one
// quad with one socket.
Cluster p100(int num_gpus) {
  Builder b;
  b.name = "p100x" + std::to_string(num_gpus);
  const int sockets = num_gpus / 4;
  for (int s = 0; s < sockets; ++s)
    b.add_device(cpu(s), DeviceKind::cpu, "Intel Xeon E5-2698 v4 (Broadwell, 20 cores, 2.2 GHz)",
                 1.408e12 /* 20 x 2.2 GHz x 32 */, 68.3e9, 256 * kGiB, kCpuOpOverheadS);
  for (int g = 0; g < num_gpus; ++g)
    b.add_device(gpu(g), DeviceKind::gpu, "NVIDIA Tesla P100 SXM2 16GB", 10.6e12, 732e9, 16 * kGiB,
                 kTfGpuOpOverheadS);
  for (int s = 0; s < sockets; ++s) {
    const std::string root = indexed("root", s);
    b.switches.push_back(root);
    b.add_link(cpu(s), root, 68.3e9, 0);
  }
  if (sockets == 2) b.add_link("root0", "root1", 38.4e9, 0);  // QPI: 2 links x 9.6 GT/s x 2 bytes
  for (int sw = 0; sw < num_gpus / 2; ++sw) {
    const std::string name = indexed("pcie", sw);
    b.switches.push_back(name);
    b.add_link(indexed("root", sw / 2), name, kPcie3BytesPerS, kPcieHopLatencyS);
    b.add_link(name, gpu(2 * sw), kPcie3BytesPerS, kPcieHopLatencyS);
    b.add_link(name, gpu(2 * sw + 1), kPcie3BytesPerS, kPcieHopLatencyS);
  }
  constexpr double kNvlink1BytesPerS = 20e9;
  for (int q = 0; q < sockets; ++q)
    for (int i = 0; i < 4; ++i)
      for (int j = i + 1; j < 4; ++j) b.add_link(gpu(4 * q + i), gpu(4 * q + j), kNvlink1BytesPerS, kNvlinkLatencyS);
  if (sockets == 2)
    for (int i = 0; i < 4; ++i) b.add_link(gpu(i), gpu(i + 4), kNvlink1BytesPerS, kNvlinkLatencyS);
  return b.build();
}

// DGX H100: 8 H100 SXM5 on one NVSwitch fabric; two Xeon 8480C sockets, each with two PCIe gen 5
// switches of two GPUs.
Cluster dgx_h100() {
  Builder b;
  b.name = "dgx-h100";
  constexpr double kPcie5BytesPerS = 52e9;  // the figure for pinned copies on the h100-box
  for (int s = 0; s < 2; ++s)
    b.add_device(cpu(s), DeviceKind::cpu, "Intel Xeon Platinum 8480C (56 cores, 2.0 GHz)",
                 7.168e12 /* 56 x 2.0 GHz x 64 */, 307.2e9, 1024 * kGiB, kCpuOpOverheadS);
  for (int g = 0; g < 8; ++g) {
    b.add_device(gpu(g), DeviceKind::gpu, "NVIDIA H100 SXM5 80GB", kH100Flops, kH100Bandwidth, 80 * kGiB, kH100OpOverheadS);
    set_h100_fit(b.devices.back());
  }
  b.switches = {"root0", "root1", "pcie0", "pcie1", "pcie2", "pcie3", "nvswitch"};
  for (int s = 0; s < 2; ++s) b.add_link(cpu(s), indexed("root", s), 307.2e9, 0);
  b.add_link("root0", "root1", 128e9, 0);  // UPI: 4 links x 16 GT/s x 2 bytes
  for (int sw = 0; sw < 4; ++sw) {
    const std::string name = indexed("pcie", sw);
    b.add_link(indexed("root", sw / 2), name, kPcie5BytesPerS, kPcieHopLatencyS);
    b.add_link(name, gpu(2 * sw), kPcie5BytesPerS, kPcieHopLatencyS);
    b.add_link(name, gpu(2 * sw + 1), kPcie5BytesPerS, kPcieHopLatencyS);
  }
  for (int g = 0; g < 8; ++g) b.add_link(gpu(g), "nvswitch", 450e9, kNvswitchHopLatencyS);
  return b.build();
}

// One H100 and a 16-core CPU, from measurements on such a machine (PyTorch eager, pageable copies).
Cluster h100_box() {
  Builder b;
  b.name = "h100-box";
  b.add_device(cpu(0), DeviceKind::cpu, "16-core x86-64 CPU (Xeon, 15 libtorch threads)", kH100BoxCpuFlops, kH100BoxCpuBandwidth,
               128 * kGiB, kH100BoxCpuOverheadS);
  b.devices.back().efficiency = h100_box_cpu_efficiency();
  b.devices.back().backward_efficiency = h100_box_cpu_backward_efficiency();
  b.devices.back().backward_op_overhead_s = kH100BoxCpuBackwardOverheadS;
  b.add_device(gpu(0), DeviceKind::gpu, "NVIDIA H100 SXM5 80GB", kH100Flops, kH100Bandwidth, 80 * kGiB, kH100OpOverheadS);
  set_h100_fit(b.devices.back());
  b.add_link(cpu(0), gpu(0), 11.0e9, 12.5e9, 5.5e-6);
  return b.build();
}

struct Preset {
  const char* name;
  std::function<Cluster()> make;
};

const std::array<Preset, 7>& presets() {
  static const std::array<Preset, 7> all = {{
      {"k80x2", [] { return k80(2); }},
      {"k80x4", [] { return k80(4); }},
      {"k80x8", [] { return k80(8); }},
      {"p100x4", [] { return p100(4); }},
      {"p100x8", [] { return p100(8); }},
      {"dgx-h100", dgx_h100},
      {"h100-box", h100_box},
  }};
  return all;
}

std::vector<std::pair<std::string, std::function<Cluster()>>>& registered_presets() {
  static std::vector<std::pair<std::string, std::function<Cluster()>>> all;
  return all;
}

const std::function<Cluster()>* find_registered(std::string_view name) {
  for (const auto& [n, make] : registered_presets())
    if (n == name) return &make;
  return nullptr;
}

std::string preset_list() {
  std::string out;
  for (const Preset& p : presets()) out += (out.empty() ? "" : ", ") + std::string(p.name);
  for (const auto& entry : registered_presets()) out += ", " + entry.first;
  return out;
}

}  // namespace

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.emplace_back(p.name);
  for (const auto& entry : registered_presets()) names.push_back(entry.first);
  return names;
}

void register_cluster_preset(std::string name, std::function<Cluster()> make) {
  for (auto& entry : registered_presets())
    if (entry.first == name) {
      entry.second = std::move(make);
      return;
    }
  registered_presets().emplace_back(std::move(name), std::move(make));
}

Cluster cluster_preset(std::string_view name) {
  for (const Preset& p : presets())
    if (p.name == name) return p.make();
  if (const auto* make = find_registered(name)) return (*make)();
  throw Error("unknown cluster preset '" + std::string(name) + "' (presets: " + preset_list() + ")");
}

Cluster resolve_cluster(const std::string& preset_or_path) {
  for (const Preset& p : presets())
    if (p.name == preset_or_path) return p.make();
  if (const auto* make = find_registered(preset_or_path)) return (*make)();
  std::error_code ec;
  if (!std::filesystem::exists(preset_or_path, ec))
    throw Error("'" + preset_or_path + "' is neither a cluster preset (" + preset_list() +
                ") nor an existing cluster file");
  return load_cluster_file(preset_or_path);
}

}  // namespace placer
