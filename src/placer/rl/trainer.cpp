#include "placer/rl/trainer.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>
#include <thread>

#include "placer/rl/environment.hpp"
#include "placer/util/error.hpp"
#include "placer/util/output_file.hpp"
#include "placer/util/hash.hpp"
#include "placer/util/json_fields.hpp"

namespace placer::rl {
namespace {

// A diagnostic switch in the environment: on when set to anything but nothing or "0".
bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

thread_local TrainStats g_stats;
thread_local double g_sample_s = 0, g_logp_s = 0, g_update_s = 0;

}  // namespace

// One intra-op thread for torch and for the BLAS under it: these small products are faster on one
// core, and OpenBLAS's own pool otherwise spins (sched_yield) against the simulator threads. The
// BLAS is found at run time, so that any BLAS (or none) behind libtorch works.
// Also keeps freed tensor memory in the heap: by default glibc returns every block over its mmap
// threshold to the kernel, and the next step pays page faults and zeroing for it again (measured:
// a fifth of the time of an update).
void single_threaded_math() {
  static const bool heap_kept = [] {
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)heap_kept;
  torch::set_num_threads(1);
  for (const char* name : {"openblas_set_num_threads", "goto_set_num_threads"})
    if (void* f = dlsym(RTLD_DEFAULT, name)) {
      reinterpret_cast<void (*)(int)>(f)(1);
      break;
    }
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr const char* kFormat = "placer-rl-checkpoint";
constexpr std::int64_t kVersion = 2;  // 2: the problem's and the options' identity

// Everything that decides the rest of a run, besides the policy and optimizer.
struct State {
  std::int64_t updates = 0, samples = 0;
  double baseline = 0.0;
  bool has_baseline = false;
  double best_s = 0.0;  // 0: nothing fits yet
  std::vector<DeviceId> best;
  std::vector<std::array<double, 4>> curve;  // sample, mean step time of the batch, best so far, wall seconds
  double elapsed_before_s = 0.0;             // wall seconds of earlier runs (resume)
};

// Writes the curve's rows from `written` on: the whole file (through a temporary, write_text_file)
// the first time, then appended, so that a long search does not format its whole curve at every
// checkpoint (a review) and a stream (--curve /dev/stdout, a pipe) gets each row once. Returns the
// rows written in all.
std::size_t write_curve(const std::string& path, const std::vector<std::array<double, 4>>& curve, std::size_t written) {
  if (path.empty() || (written == curve.size() && written > 0)) return written;
  std::string text = written == 0 ? "sample,mean_step_time_s,best_step_time_s,wall_s\n" : "";
  for (std::size_t i = written; i < curve.size(); ++i)
    text += fmt::format("{:.0f},{:.9g},{:.9g},{:.3f}\n", curve[i][0], curve[i][1], curve[i][2], curve[i][3]);
  if (written == 0) {
    write_text_file(path, text, "learning curve");
  } else if (const auto fd = output_descriptor(path)) {
    if (!write_to_descriptor(*fd, text)) throw Error("failed writing learning curve file " + in_quotes(path));
  } else {
    std::ofstream out(output_target(path), std::ios::binary | std::ios::app);
    out << text;
    out.flush();
    if (!out) throw Error("failed writing learning curve file " + in_quotes(path) + " (disk full?)");
  }
  return curve.size();
}

struct Fingerprint {
  std::int64_t forward_ops, devices, batch, parameters;
  std::int64_t problem;  // hash of what the simulator sees (see problem_hash)
  std::int64_t links;    // and of the devices' streams and the links routes share (see links_hash)
  std::string config;    // TrainOptions::config
  std::string config_as_given;  // TrainOptions::config_as_given (what older checkpoints hold)
  std::string agent;            // Agent::signature()
  std::string cluster_name;     // for the error's hint about `local`
};

// FNV-1a over what decides every simulated step time and fit: the graph's ops and tensors, every
// op time on every device, the routes between devices and each device's memory limit. Another
// model, cluster, profile, --dim, --memory-fraction, --gradient-sums or --optimizer changes it.
std::int64_t problem_hash(const Problem& p) {
  Fnv1a h;
  auto mix = [&](std::uint64_t v) { h.u64(v); };
  auto mix_double = [&](double d) { h.f64(d); };
  const Graph& g = p.graph;
  mix(g.num_ops()), mix(g.num_tensors()), mix(g.num_forward_ops());
  for (OpId o = 0; o < g.num_ops(); ++o) {
    for (TensorId t : g.op_inputs(o)) mix(t);
    for (TensorId t : g.op_outputs(o)) mix(t);
    mix(g.op_view_outputs(o));  // views take no memory: they change what fits
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t) mix(g.tensor_bytes(t));
  for (double t : p.costs.times()) mix_double(t);
  const std::size_t nd = p.cluster.num_devices();
  for (DeviceId a = 0; a < nd; ++a)
    for (DeviceId b = 0; b < nd; ++b)
      if (a != b) mix_double(p.cluster.route_latency_s(a, b)), mix_double(p.cluster.route_bandwidth(a, b));
  for (std::uint64_t limit : memory_limits(p)) mix(limit);
  if (p.sim.gradient_sums_out_of_place) mix(1);  // higher peaks: what fits changes (the default leaves older hashes as they were)
  return static_cast<std::int64_t>(h.value());
}

// FNV-1a over what else the simulator sees of the cluster: each device's streams and every route's
// channels (which links two routes share decides their contention). Written since 2026-11-28 beside
// `problem`, which did not cover them: an older checkpoint, without it, is checked on `problem` alone.
std::int64_t links_hash(const Problem& p) {
  Fnv1a h;
  auto mix = [&](std::uint64_t v) { h.u64(v); };
  const Cluster& c = p.cluster;
  const std::size_t nd = c.num_devices();
  for (DeviceId d = 0; d < nd; ++d) mix(static_cast<std::uint64_t>(std::max(1, c.device(d).streams)));
  for (DeviceId a = 0; a < nd; ++a)
    for (DeviceId b = 0; b < nd; ++b) {
      mix(c.route(a, b).size());
      for (ChannelId ch : c.route(a, b)) mix(ch);
    }
  return static_cast<std::int64_t>(h.value());
}

Fingerprint fingerprint_of(const Problem& problem, const TrainOptions& o, Agent& agent) {
  std::int64_t params = 0;
  for (const auto& p : agent.module().parameters()) params += p.numel();
  return {static_cast<std::int64_t>(problem.graph.num_forward_ops()), static_cast<std::int64_t>(problem.cluster.num_devices()),
          static_cast<std::int64_t>(o.batch), params, problem_hash(problem), links_hash(problem), o.config, o.config_as_given,
          agent.signature(), problem.cluster.name()};
}

// FNV-1a over the checkpoint's contents as the search uses them: its state, the random
// generator's state (as written), every tensor of the policy (parameters and buffers, by name)
// and Adam's state per parameter. Written with the checkpoint and compared with what a resume
// loaded: libtorch's zip reader does not check the entries' CRCs, so a corrupted checkpoint
// would otherwise resume with wrong values (a flipped curve, a damaged weight).
std::int64_t content_checksum(const State& s, const std::string& rng_state, torch::nn::Module& module,
                              torch::optim::Optimizer& optimizer) {
  Fnv1a h;
  auto bytes = [&](const void* data, std::size_t n) { h.bytes(data, n); };
  auto value = [&](auto v) { bytes(&v, sizeof v); };
  auto tensor = [&](const torch::Tensor& t) {
    if (!t.defined()) return value(std::int64_t{-1});
    const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    value(static_cast<std::int64_t>(c.scalar_type()));
    for (std::int64_t d : c.sizes()) value(d);
    bytes(c.data_ptr(), c.nbytes());
  };
  value(s.updates), value(s.samples), value(s.baseline), value(s.has_baseline), value(s.best_s), value(s.elapsed_before_s);
  for (DeviceId d : s.best) value(static_cast<std::int64_t>(d));
  for (const auto& row : s.curve) bytes(row.data(), sizeof row);
  bytes(rng_state.data(), rng_state.size());
  for (const auto& p : module.named_parameters()) bytes(p.key().data(), p.key().size()), tensor(p.value());
  for (const auto& b : module.named_buffers()) bytes(b.key().data(), b.key().size()), tensor(b.value());
  for (const auto& group : optimizer.param_groups())
    for (const torch::Tensor& p : group.params()) {
      auto it = optimizer.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (it == optimizer.state().end()) {
        value(std::int64_t{0});
        continue;
      }
      if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(it->second.get())) {
        value(adam->step());
        tensor(adam->exp_avg()), tensor(adam->exp_avg_sq()), tensor(adam->max_exp_avg_sq());
      }
    }
  return static_cast<std::int64_t>(h.value());
}

void save_checkpoint(const std::string& path, const TrainOptions& o, const Fingerprint& fp, const State& s, const std::mt19937_64& rng,
                     torch::nn::Module& module, torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive ar;
  ar.write("format", c10::IValue(std::string(kFormat)));
  ar.write("version", c10::IValue(kVersion));
  ar.write("algo", c10::IValue(o.algo));
  ar.write("forward_ops", c10::IValue(fp.forward_ops));
  ar.write("devices", c10::IValue(fp.devices));
  ar.write("batch", c10::IValue(fp.batch));
  ar.write("parameters", c10::IValue(fp.parameters));
  ar.write("problem", c10::IValue(fp.problem));
  ar.write("links", c10::IValue(fp.links));
  ar.write("config", c10::IValue(fp.config));
  ar.write("agent", c10::IValue(fp.agent));
  ar.write("updates", c10::IValue(s.updates));
  ar.write("samples", c10::IValue(s.samples));
  ar.write("baseline", c10::IValue(s.baseline));
  ar.write("has_baseline", c10::IValue(s.has_baseline));
  ar.write("best_step_time_s", c10::IValue(s.best_s));
  ar.write("elapsed_s", c10::IValue(s.elapsed_before_s));
  std::vector<std::int64_t> best(s.best.begin(), s.best.end());
  ar.write("best_placement", torch::tensor(best, torch::kInt64));
  std::ostringstream rs;
  rs << rng;
  ar.write("rng", c10::IValue(rs.str()));
  ar.write("checksum", c10::IValue(content_checksum(s, rs.str(), module, optimizer)));
  // The rows are contiguous doubles: copied whole (element by element, each checkpoint's cost grew
  // with the curve, a long search's quadratically: a review).
  static_assert(sizeof(std::array<double, 4>) == 4 * sizeof(double));
  const auto rows = static_cast<std::int64_t>(s.curve.size());
  ar.write("curve", rows == 0 ? torch::zeros({0, 4}, torch::kFloat64)
                              : torch::from_blob(const_cast<double*>(s.curve.front().data()), {rows, 4}, torch::kFloat64).clone());
  torch::serialize::OutputArchive policy, opt;
  module.save(policy);
  optimizer.save(opt);
  ar.write("policy", policy);
  ar.write("optimizer", opt);
  // Through a link to its target (the link kept), as every output (output_target).
  const std::string target = output_target(path);
  const std::string tmp = target + ".tmp";
  try {
    ar.save_to(tmp);
    std::filesystem::rename(tmp, target);
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw Error("cannot write checkpoint '" + path + "': " + (c10_error ? c10_error->what_without_backtrace() : e.what()));
  }
}

template <typename T>
T read_value(torch::serialize::InputArchive& ar, const std::string& path, const char* key) {
  c10::IValue v;
  if (!ar.try_read(key, v)) throw Error("checkpoint '" + path + "': missing field '" + key + "'");
  try {
    return v.to<T>();
  } catch (const c10::Error&) {
    throw Error("checkpoint '" + path + "': field '" + key + "' has the wrong type");
  }
}

void load_checkpoint(const std::string& path, const TrainOptions& o, const Fingerprint& fp, State& s, std::mt19937_64& rng,
                     torch::nn::Module& module, torch::optim::Optimizer& optimizer) {
  if (!std::filesystem::exists(path)) throw Error("--resume: checkpoint '" + path + "' does not exist");
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(path);
  } catch (const std::exception&) {
    throw Error("checkpoint '" + path + "' is not a placer checkpoint (cannot be read)");
  }
  if (read_value<std::string>(ar, path, "format") != kFormat) throw Error("checkpoint '" + path + "': not a placer-rl-checkpoint");
  if (read_value<std::int64_t>(ar, path, "version") != kVersion) throw Error("checkpoint '" + path + "': unsupported version");
  const std::string algo = read_value<std::string>(ar, path, "algo");
  if (algo != o.algo) throw Error("checkpoint '" + path + "' was written by '" + algo + "', not '" + o.algo + "'");
  auto expect = [&](const char* key, std::int64_t want) {
    const std::int64_t got = read_value<std::int64_t>(ar, path, key);
    if (got != want)
      throw Error(fmt::format("checkpoint '{}': {} is {} but this problem and options give {} (another model, cluster or option?)", path,
                              key, got, want));
  };
  expect("forward_ops", fp.forward_ops);
  expect("devices", fp.devices);
  expect("batch", fp.batch);
  expect("parameters", fp.parameters);
  if (read_value<std::int64_t>(ar, path, "problem") != fp.problem)
    throw Error("checkpoint '" + path + "' was written for another problem (model, cluster, profile, --dim, --memory-fraction, "
                "--gradient-sums, mode or optimizer)" +
                // Measured anew by every process, the `local` preset's op times differ from run to run (a review).
                (fp.cluster_name == "local" ? std::string("; the 'local' cluster is measured anew by each process, so a search on it "
                                                          "resumes only from a saved description (placer clusters local --json > FILE, "
                                                          "then --cluster FILE) or with a --profile")
                                            : std::string()));
  if (c10::IValue links; ar.try_read("links", links) && (!links.isInt() || links.toInt() != fp.links))
    throw Error("checkpoint '" + path + "' was written for another cluster (its devices' streams or the links its routes share differ)");
  const std::string config = read_value<std::string>(ar, path, "config");
  if (config != fp.config && config != fp.config_as_given)
    throw Error("checkpoint '" + path + "' was written with other options (" + (config.empty() ? "none" : config) + ") than these (" +
                (fp.config.empty() ? "none" : fp.config) + ")");
  // Written since 2026-11-28: an older checkpoint, without it, is not checked on it.
  if (c10::IValue agent; ar.try_read("agent", agent) && (!agent.isString() || agent.toStringRef() != fp.agent))
    throw Error("checkpoint '" + path + "' was written for another mapping of the policy's decisions to ops (" +
                (agent.isString() && !agent.toStringRef().empty() ? agent.toStringRef() : std::string("none")) + ") than this run's (" +
                (fp.agent.empty() ? "none" : fp.agent) + "): a version of placer that groups ops otherwise?");
  s.updates = read_value<std::int64_t>(ar, path, "updates");
  s.samples = read_value<std::int64_t>(ar, path, "samples");
  s.baseline = read_value<double>(ar, path, "baseline");
  s.has_baseline = read_value<bool>(ar, path, "has_baseline");
  s.best_s = read_value<double>(ar, path, "best_step_time_s");
  s.elapsed_before_s = read_value<double>(ar, path, "elapsed_s");
  torch::Tensor best, curve;
  if (!ar.try_read("best_placement", best) || !ar.try_read("curve", curve))
    throw Error("checkpoint '" + path + "': missing field 'best_placement' or 'curve'");
  s.best.clear();
  // Each device index checked as written (an int64: a flipped high byte read as a DeviceId gave
  // back the index below it, and the checksum, over the DeviceIds, agreed: a QA pass).
  bool in_range = best.dim() <= 1;
  for (std::int64_t i = 0; i < best.numel() && in_range; ++i) {
    const std::int64_t device = best.reshape({-1})[i].item<std::int64_t>();
    in_range = device >= 0 && device < fp.devices;
    s.best.push_back(static_cast<DeviceId>(device));
  }
  if (!in_range || (!s.best.empty() && s.best.size() != static_cast<std::size_t>(fp.forward_ops)))
    throw Error("checkpoint '" + path + "': its best placement does not match this problem");
  s.curve.clear();
  if (curve.dim() != 2 || curve.size(1) != 4 || curve.scalar_type() != torch::kFloat64)
    throw Error("checkpoint '" + path + "': its curve is not a table of 4 columns of doubles");
  const torch::Tensor rows = curve.contiguous();
  const double* values = rows.data_ptr<double>();
  s.curve.resize(static_cast<std::size_t>(rows.size(0)));
  for (std::size_t i = 0; i < s.curve.size(); ++i) std::copy_n(values + 4 * i, 4, s.curve[i].begin());
  const std::string rng_state = read_value<std::string>(ar, path, "rng");
  std::istringstream rs(rng_state);
  rs >> rng;
  torch::serialize::InputArchive policy, opt;
  if (!ar.try_read("policy", policy) || !ar.try_read("optimizer", opt))
    throw Error("checkpoint '" + path + "': missing field 'policy' or 'optimizer'");
  try {
    module.load(policy);
    optimizer.load(opt);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {  // c10::Error, and the TorchScript errors of a damaged archive's entries (a QA pass)
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw Error("checkpoint '" + path + "' is damaged: its policy or optimizer state does not load: " +
                (c10_error ? c10_error->what_without_backtrace() : e.what()));
  }
  // Written since 2026-11-25; older checkpoints have none to compare.
  c10::IValue checksum;
  if (ar.try_read("checksum", checksum) &&
      (!checksum.isInt() || checksum.toInt() != content_checksum(s, rng_state, module, optimizer)))
    throw Error("checkpoint '" + path + "' is damaged: its contents do not match the checksum written with them");
}

}  // namespace

PlacementResult train(const Problem& problem, const Budget& budget, Observer& observer, std::uint64_t seed, const TrainOptions& o,
                      Agent& agent) {
  const auto start = Clock::now();
  single_threaded_math();
  g_stats = {};
  g_sample_s = g_logp_s = g_update_s = 0;  // per run (a compare runs several)
  if (o.batch == 0) throw Error("option batch must be at least 1");
  if (budget.resume && budget.checkpoint_path.empty()) throw Error("--resume needs --checkpoint FILE");
  // One simulation thread per placement of a batch at most: more would wait for work that never
  // comes (each holds a simulator's scratch; --threads 65536 asked for gigabytes).
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const auto threads = static_cast<unsigned>(std::min<std::size_t>(budget.threads == 0 ? hardware : budget.threads, o.batch));
  Environment env(problem, threads, o.penalty);
  torch::nn::Module& module = agent.module();
  torch::optim::Adam optimizer(module.parameters(), torch::optim::AdamOptions(o.learning_rate));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 0x51ACE5ull);
  State s;
  const Fingerprint fp = fingerprint_of(problem, o, agent);
  if (budget.resume) load_checkpoint(budget.checkpoint_path, o, fp, s, rng, module, optimizer);
  const std::int64_t samples_before = s.samples, updates_before = s.updates;  // of the runs resumed
  if (!budget.checkpoint_path.empty()) check_writable(budget.checkpoint_path, "the checkpoint");
  if (!budget.curve_path.empty()) check_writable(budget.curve_path, "the learning curve");
  if (!s.best.empty()) {  // the saved best must still be what it was
    Evaluator eval(problem);
    const SimResult& r = eval.evaluate(s.best);
    if (!r.fits || std::fabs(r.step_time_s - s.best_s) > 1e-9 * std::max(1.0, s.best_s))
      throw Error("checkpoint '" + budget.checkpoint_path + "': its best placement no longer simulates as saved (another problem?)");
  }
  const std::int64_t first_update = s.updates;

  const auto k = static_cast<std::int64_t>(o.batch);
  std::int64_t total_updates = 0;  // 0: until the time budget ends
  if (budget.samples > 0) {  // whole batches, rounded up without overflowing near 2^63
    const auto per_update = static_cast<std::size_t>(k);
    total_updates = static_cast<std::int64_t>(budget.samples / per_update + (budget.samples % per_update != 0));
  } else if (budget.seconds <= 0) {
    total_updates = (static_cast<std::int64_t>(o.default_samples) + k - 1) / k;
  }

  auto elapsed = [&] { return s.elapsed_before_s + since(start); };
  // A failed write is reported and the search goes on: its result is worth more than the file.
  auto warn_on_failure = [](auto&& write) {
    try {
      write();
    } catch (const Error& e) {
      std::fprintf(stderr, "placer: warning: %s\n", e.what());
    }
  };
  // The checkpoint and, with it, the curve.
  std::size_t curve_written = 0;  // rows of the curve file written by this run
  auto write_curve_rows = [&] { warn_on_failure([&] { curve_written = write_curve(budget.curve_path, s.curve, curve_written); }); };
  auto checkpoint = [&] {
    if (budget.checkpoint_path.empty()) return;
    const double before = s.elapsed_before_s, now = elapsed();  // saved as the wall time so far, without copying the state
    s.elapsed_before_s = now;
    warn_on_failure([&] { save_checkpoint(budget.checkpoint_path, o, fp, s, rng, module, optimizer); });
    s.elapsed_before_s = before;
    write_curve_rows();
  };

  bool stopped = false;
  double last_update_s = 0.0;  // this run's latest update, sampling to Adam step
  while (total_updates == 0 || s.updates < total_updates) {
    if (observer.stop_requested()) {
      stopped = true;
      break;
    }
    // A time budget ends the search between updates, after one at least, before an update that
    // would end past it if it took as long as the one before (one that ended just short of the
    // budget let another run: --seconds 5 took 10 s with a large policy; a QA pass).
    if (budget.seconds > 0 && since(start) + last_update_s >= budget.seconds && s.updates > first_update) break;
    const auto t0 = Clock::now();
    std::vector<std::vector<DeviceId>> placements = agent.sample(o.batch, rng);
    const auto ts = Clock::now();
    env.submit(placements);  // simulated on the pool while the policy recomputes its log-probabilities
    LogProbs lp = agent.log_probs();
    g_sample_s += std::chrono::duration<double>(ts - t0).count();
    g_logp_s += since(ts);
    const auto t1 = Clock::now();
    const std::vector<Score> scores = env.wait();
    const auto t2 = Clock::now();

    double mean_reward = 0.0, mean_time = 0.0;
    for (const Score& sc : scores) mean_reward += sc.reward, mean_time += sc.step_time_s;
    mean_reward /= static_cast<double>(k);
    mean_time /= static_cast<double>(k);
    if (!s.has_baseline) s.baseline = mean_reward, s.has_baseline = true;
    std::vector<float> advantage(scores.size());
    for (std::size_t i = 0; i < scores.size(); ++i) advantage[i] = static_cast<float>(scores[i].reward - s.baseline);
    const torch::Tensor adv = torch::tensor(advantage);
    torch::Tensor loss = -(adv * lp.log_prob).mean();
    if (o.entropy_weight != 0.0) loss = loss - o.entropy_weight * lp.entropy;
    optimizer.zero_grad();
    loss.backward();
    // PLACER_RL_TRACE=1: one line per update on stderr (what docs/learned-placers.md's diagnosis of
    // stalled searches reads): mean entropy per decision, gradient norm before clipping, mean step time.
    static const bool trace = env_flag("PLACER_RL_TRACE");
    // The norm is taken whether or not it clips (an infinite bound scales by exactly 1), so that a
    // gradient that overflowed is found with clip=0 too, and tracing changes nothing (a QA pass:
    // entropy=1e37 with clip=0 trained on with infinite Adam moments, and failed only when traced).
    const double clip = o.clip_norm > 0 ? o.clip_norm : std::numeric_limits<double>::infinity();
    const double grad_norm = torch::nn::utils::clip_grad_norm_(module.parameters(), clip);
    if (trace)
      std::fprintf(stderr, "update %lld: entropy %.4f, gradient norm %.3g, mean step time %.2f ms\n", static_cast<long long>(s.updates + 1),
                   lp.entropy.item<double>(), grad_norm, mean_time * 1e3);
    // Options far out of range (an entropy weight or a tanh constant of 1e300, a temperature of
    // 1e-300) turn the policy into NaN, which then samples the last device forever: an error, not
    // a result.
    if (!std::isfinite(loss.item<double>()) || !std::isfinite(grad_norm))
      throw Error(fmt::format("{}: training diverged at update {} (the policy's loss is not a number): lower lr, entropy, tanh or "
                              "penalty, or raise temperature{}",
                              o.algo, s.updates + 1,
                              // Rewards past what a float holds come from the problem, not the options (a review).
                              mean_time > 1e30 ? fmt::format("; or check the cluster's and the profile's figures: the batch's mean "
                                                             "step time is {:g} s",
                                                             mean_time)
                                               : std::string()));
    optimizer.step();
    g_update_s += since(t2);
    s.baseline = o.baseline_decay * s.baseline + (1.0 - o.baseline_decay) * mean_reward;
    ++s.updates;
    s.samples += k;
    for (std::size_t i = 0; i < scores.size(); ++i)
      if (scores[i].fits && (s.best_s == 0.0 || scores[i].step_time_s < s.best_s)) {
        s.best_s = scores[i].step_time_s;
        s.best = placements[i];
      }
    s.curve.push_back({static_cast<double>(s.samples), mean_time, s.best_s, elapsed()});
    g_stats.policy_s += std::chrono::duration<double>(t1 - t0).count() + since(t2);
    last_update_s = since(t0);
    g_stats.simulation_wait_s += std::chrono::duration<double>(t2 - t1).count();

    Progress p;
    p.samples = static_cast<std::size_t>(s.samples);
    // Whole batches, saturated: near 2^63 samples the product overflows (UBSan found it).
    const auto updates_u = static_cast<std::size_t>(total_updates), k_u = static_cast<std::size_t>(k);
    p.samples_total = updates_u > std::numeric_limits<std::size_t>::max() / k_u ? std::numeric_limits<std::size_t>::max() : updates_u * k_u;
    p.best_step_time_s = s.best_s;
    p.last_mean_step_time_s = mean_time;
    p.elapsed_s = elapsed();
    observer.on_progress(p);
    if (o.checkpoint_every > 0 && s.updates % static_cast<std::int64_t>(o.checkpoint_every) == 0) checkpoint();
  }
  // (Stopped before any update of this run, nothing changed: no checkpoint of an untrained policy
  // written on the way to an error, a review.)
  if (s.updates > first_update) checkpoint();
  write_curve_rows();
  g_stats.samples = static_cast<std::size_t>(s.samples);
  g_stats.updates = static_cast<std::size_t>(s.updates);
  g_stats.wall_s = since(start);
  g_stats.simulation_s = env.simulation_seconds();
  if (s.best.empty() && s.samples == 0) throw Error(o.algo + ": stopped before any placement was sampled");
  auto plural = [](std::int64_t n) { return n == 1 ? "" : "s"; };
  if (s.best.empty())
    throw Error(fmt::format("{}: no sampled placement fits in memory after {} sample{}{}", o.algo, s.samples, plural(s.samples),
                            stopped ? " (stopped)" : ""));
  std::string note = fmt::format("{} update{} of {} sample{}; policy {:.1f} s, simulation {:.1f} s on {} thread{} (waited {:.1f} s)", s.updates,
                                 plural(s.updates), k, plural(k), g_stats.policy_s, g_stats.simulation_s, env.threads(),
                                 plural(env.threads()), g_stats.simulation_wait_s);
  if (env_flag("PLACER_RL_TIMING"))
    std::fprintf(stderr, "timing: sample %.2f s, log-probs %.2f s, update %.2f s\n", g_sample_s, g_logp_s, g_update_s);
  if (samples_before > 0)
    note += fmt::format("; resumed after {} update{} ({} sample{}, {:.1f} s): {} update{} and {} sample{} in this run", updates_before,
                        plural(updates_before), samples_before, plural(samples_before), s.elapsed_before_s, s.updates - updates_before,
                        plural(s.updates - updates_before), s.samples - samples_before, plural(s.samples - samples_before));
  // A --samples the checkpoint had already reached ran nothing: said, not left to the counts above.
  if (budget.resume && total_updates > 0 && updates_before >= total_updates)
    note += fmt::format("; {} is no more than the checkpoint's {} sample{}: nothing more was run (give more to go on)",
                        budget.samples > 0 ? fmt::format("--samples {}", budget.samples)
                                           : fmt::format("the default budget of {} samples", total_updates * k),
                        samples_before, plural(samples_before));
  if (stopped) note += ", stopped early";
  if (const std::string said = agent.note(); !said.empty()) note += "; " + said;
  PlacementResult result = finish(problem, s.best, static_cast<std::size_t>(s.samples), note);
  if (!result.sim.fits) throw Error(o.algo + ": internal error: the best placement kept does not fit");
  return result;
}

TrainStats last_train_stats() { return g_stats; }

TrainOptions paper_train_options(std::string algo, std::size_t batch) {
  TrainOptions o;
  o.algo = std::move(algo);
  o.batch = batch;
  o.learning_rate = 0.1;   // HDP: Adam, fixed learning rate 0.1
  o.clip_norm = 1.0;       // HDP: gradient clipping of norm 1.0 (reference implementation grad_bound)
  o.baseline_decay = 0.9;  // reference implementation bl_dec
  o.entropy_weight = 0.0;  // the papers name none
  return o;
}

std::vector<OptionDoc> common_option_docs(const TrainOptions& d) {
  auto num = [](double v) { return fmt::format("{}", v); };
  return {
      {"batch", std::to_string(d.batch), "K: placements sampled per policy update (1 to 4096)"},
      {"lr", num(d.learning_rate), "Adam learning rate"},
      {"entropy", num(d.entropy_weight), "weight of the entropy bonus in the loss"},
      {"baseline-decay", num(d.baseline_decay), "decay of the moving-average reward baseline"},
      {"clip", num(d.clip_norm), "gradient-norm clipping bound (0: none)"},
      {"penalty", num(d.penalty), "step-time factor for placements that do not fit (times 1 + shortfall fraction)"},
      {"checkpoint-every", std::to_string(d.checkpoint_every), "policy updates between checkpoints (with --checkpoint; 0: only the last, at the end)"},
  };
}

TrainOptions read_common_options(const PlacerOptions& opts, TrainOptions d, const std::vector<OptionDoc>& docs) {
  const std::int64_t batch = opts.get_int("batch", static_cast<std::int64_t>(d.batch));
  if (batch < 1 || batch > 4096) throw Error("option batch must be from 1 to 4096");
  d.batch = static_cast<std::size_t>(batch);
  d.learning_rate = opts.get_double("lr", d.learning_rate);
  // The policy computes in float: beyond float's range a value overflows there.
  // Adam's first step divides it by 1 - 0.9: that too must stay a float.
  if (!(d.learning_rate > 0) || d.learning_rate > 1e37) throw Error("option lr must be positive, at most 1e37");
  d.entropy_weight = opts.get_double("entropy", d.entropy_weight);
  if (d.entropy_weight < 0) throw Error("option entropy must be >= 0");
  d.baseline_decay = opts.get_double("baseline-decay", d.baseline_decay);
  if (d.baseline_decay < 0 || d.baseline_decay >= 1) throw Error("option baseline-decay must be in [0, 1)");
  d.clip_norm = opts.get_double("clip", d.clip_norm);
  if (!(d.clip_norm >= 0) || d.clip_norm > 1e37) throw Error("option clip must be from 0 (none) to 1e37");
  d.penalty = opts.get_double("penalty", d.penalty);
  if (!(d.penalty >= 1) || d.penalty > 1e37) throw Error("option penalty must be from 1 to 1e37");
  const std::int64_t every = opts.get_int("checkpoint-every", static_cast<std::int64_t>(d.checkpoint_every));
  if (every < 0) throw Error("option checkpoint-every must be >= 0");
  d.checkpoint_every = static_cast<std::size_t>(every);
  // A number in its shortest spelling ("0.10", "1e-1" -> "0.1", "016" -> "16"; integers as
  // integers, exact beyond 2^53); other text as it is.
  auto canonical = [](const std::string& text) {
    std::size_t used = 0;
    try {
      const long long i = std::stoll(text, &used);
      if (used == text.size()) return std::to_string(i);
    } catch (const std::exception&) {  // ".1", or past 64 bits: read as a double below
    }
    try {
      const double v = std::stod(text, &used);
      if (used == text.size() && std::isfinite(v)) return fmt::format("{}", v == 0 ? 0.0 : v);  // -0 is 0
    } catch (const std::exception&) {
    }
    return text;
  };
  std::map<std::string, std::string> defaults;
  for (const OptionDoc& doc : docs) defaults[doc.key] = canonical(doc.default_value);
  d.config.clear(), d.config_as_given.clear();
  for (const auto& [key, value] : opts.all()) {
    if (key == "checkpoint-every") continue;
    d.config_as_given += (d.config_as_given.empty() ? "" : ";") + key + "=" + value;
    const std::string acts = canonical(value);
    if (auto it = defaults.find(key); it == defaults.end() || it->second != acts)
      d.config += (d.config.empty() ? "" : ";") + key + "=" + acts;
  }
  return d;
}

std::vector<OptionDoc> seq2seq_option_docs(const Seq2SeqOptions& d) {
  return {
      {"hidden", std::to_string(d.hidden), "LSTM hidden size of the seq2seq placer, even, up to 2048 (encoder: half per direction)"},
      {"attention", std::to_string(d.attention), "size of the additive attention (1 to 2048)"},
      {"tanh", fmt::format("{}", d.tanh_constant), "tanh constant C on the logits (C * tanh(z / T); 0: none)"},
      {"temperature", fmt::format("{}", d.temperature), "softmax temperature T on the logits"},
  };
}

Seq2SeqOptions read_seq2seq_options(const PlacerOptions& opts, Seq2SeqOptions d) {
  d.hidden = opts.get_int("hidden", d.hidden);
  // Upper limits far beyond the papers' sizes (256 hidden units, a batch of tens) but below what
  // exhausts memory with a libtorch allocator error (hidden=100000 asked for 80 GB).
  if (d.hidden < 2 || d.hidden % 2 || d.hidden > 2048) throw Error("option hidden must be an even number from 2 to 2048");
  d.attention = opts.get_int("attention", d.attention);
  if (d.attention < 1 || d.attention > 2048) throw Error("option attention must be from 1 to 2048");
  d.tanh_constant = opts.get_double("tanh", d.tanh_constant);
  if (!(d.tanh_constant >= 0) || d.tanh_constant > 1e37) throw Error("option tanh must be from 0 (none) to 1e37");
  d.temperature = opts.get_double("temperature", d.temperature);
  // (Past a float, the policy's logits all came out 0: a uniform policy that learnt nothing and
  // said nothing, a review.)
  if (!(d.temperature > 0) || d.temperature > 1e37) throw Error("option temperature must be positive, at most 1e37");
  return d;
}

}  // namespace placer::rl

namespace placer::rl {
namespace {

class LearnedPlacer final : public Placer {
 public:
  LearnedPlacer(TrainOptions options, std::function<std::unique_ptr<Agent>(const Problem&)> make_agent)
      : options_(std::move(options)), make_agent_(std::move(make_agent)) {}
  PlacementResult place(const Problem& problem, const Budget& budget, Observer& observer, std::uint64_t seed) override {
    if (problem.graph.num_forward_ops() == 0) throw Error(options_.algo + ": the graph has no forward ops to place");
    single_threaded_math();
    torch::manual_seed(seed);
    std::unique_ptr<Agent> agent = make_agent_(problem);
    return train(problem, budget, observer, seed, options_, *agent);
  }

 private:
  TrainOptions options_;
  std::function<std::unique_ptr<Agent>(const Problem&)> make_agent_;
};

}  // namespace

std::unique_ptr<Placer> make_learned_placer(TrainOptions options, std::function<std::unique_ptr<Agent>(const Problem&)> make_agent) {
  return std::make_unique<LearnedPlacer>(std::move(options), std::move(make_agent));
}

}  // namespace placer::rl
