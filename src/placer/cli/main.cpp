// placer: where each op of a training graph should run. Subcommands live one per file in cli/.
#include <CLI/CLI.hpp>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "placer/algorithms/placer.hpp"
#include "placer/cli/common.hpp"
#include "placer/cli/torch_module.hpp"
#include "placer/cluster/cluster.hpp"
#include "placer/util/error.hpp"

namespace {

// Whether this command line needs the libtorch module (cli/torch_module.cpp). Required: `run`,
// `profile`, `validate`, and any mention of the `local` preset (measured with libtorch; an argument
// `local` or `--cluster=local`, wherever it stands). Optional (without the module they still work,
// with a warning): help (a bare `placer` or `placer --help` lists every subcommand; `placer --help
// simulate` is simulate's help), `place` and `compare` when they may run a learned placer (an
// algorithm the core lacks) or for their help, `clusters` (lists `local`). inspect, simulate,
// bounds and fit on other clusters, `--version` and unknown subcommands never load it.
enum class TorchNeed { none, optional, required };
constexpr std::string_view kModuleCommands[] = {"run", "profile", "validate"};  // what the module registers
TorchNeed torch_need(int argc, char** argv) {
  std::string_view command;
  bool version = false;
  for (int i = 1; i < argc && command.empty(); ++i) {
    const std::string_view arg = argv[i];
    if (!arg.empty() && arg[0] != '-') command = arg;
    version |= arg == "--version";
  }
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "local" || std::string_view(argv[i]) == "--cluster=local") return TorchNeed::required;
  for (std::string_view c : kModuleCommands)
    if (command == c) return TorchNeed::required;
  if (command.empty() && !version) return TorchNeed::optional;
  if (command == "place" || command == "compare") {
    // The module adds the learned placers: needed for help (which lists every algorithm's options)
    // and for an algorithm the core lacks; `place --algo heft` loaded it for nothing (0.9 s).
    std::vector<std::string> names;
    bool help = false, learned_files = false;  // the learned placers' options: their errors name them
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      help |= arg == "--help" || arg == "-h";
      for (std::string_view option : {"--curve", "--checkpoint", "--resume"})
        learned_files |= arg == option || arg.starts_with(std::string(option) + "=");
      std::string_view value;
      if ((arg == "--algo" || arg == "--algos") && i + 1 < argc) value = argv[i + 1];
      for (std::string_view prefix : {"--algo=", "--algos="})
        if (arg.starts_with(prefix)) value = arg.substr(prefix.size());
      if (!value.empty())
        for (std::string& name : placer::split_commas(value)) names.push_back(std::move(name));
      // local-search's start may be a learned placer: --opt init=NAME (--opt takes one or more).
      std::vector<std::string_view> opts;
      if (arg.starts_with("--opt=")) opts.push_back(arg.substr(6));
      if (arg == "--opt")
        for (int j = i + 1; j < argc && argv[j][0] != '-'; ++j) opts.emplace_back(argv[j]);
      for (std::string_view opt : opts)
        if (opt.starts_with("init=") && opt.size() > 5 && opt.substr(5) != "best") names.emplace_back(opt.substr(5));
    }
    if (help || learned_files) return TorchNeed::optional;
    // compare without --algos runs every classic placer; place without --algo is a usage error.
    if (names.empty()) return command == "compare" ? TorchNeed::none : TorchNeed::optional;
    for (const std::string& name : names)
      if (name != "all" && !placer::is_built_in_placer(name)) return TorchNeed::optional;
    return TorchNeed::none;
  }
  if (command == "clusters") return TorchNeed::optional;
  return TorchNeed::none;
}

// The directory of the running executable, with a trailing slash ("" when unknown).
std::string executable_dir() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  std::string path(buf.data(), static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/') + 1);
}

// Loads the module and registers what it adds to placer's registries; returns its command
// registration.
using RegisterCommands = void (*)(CLI::App&);
RegisterCommands load_torch_module(char** argv) {
  // OpenBLAS (Debian's libtorch does its matrix products there) starts one thread per core when it
  // loads, and those threads spin against libtorch's whatever openblas_set_num_threads says later
  // (measured: a CPU training step's median 300 ms instead of 187 ms, docs/execution.md). The
  // executable itself loads OpenBLAS (CBC's LAPACK), so the variable only counts if it is set
  // before this process starts: set it and start again, once. configure_threads raises the pool
  // where more threads are asked for; a user who sets the variable chooses otherwise.
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr && setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0)
    execv("/proc/self/exe", argv);  // returns only on failure: go on with the pool as it is
  const std::string path = executable_dir() + placer::cli::kTorchModuleFile;
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!module) throw placer::Error(std::string("cannot load placer's libtorch module: ") + dlerror());
  auto placers = reinterpret_cast<void (*)()>(dlsym(module, placer::cli::kTorchModulePlacers));
  auto commands = reinterpret_cast<RegisterCommands>(dlsym(module, placer::cli::kTorchModuleCommands));
  if (!placers || !commands) throw placer::Error("'" + path + "' is not placer's libtorch module (entry points missing)");
  placers();
  return commands;
}

// The module when this command line needs it; a missing module is an error only where it is required.
RegisterCommands torch_commands_for(int argc, char** argv) {
  const TorchNeed need = torch_need(argc, argv);
  if (need == TorchNeed::none) {
    // Named in the lists of presets that errors print, although its module is not loaded: a command
    // line that names it loads the module (torch_need), so this one is never built.
    placer::register_cluster_preset("local", []() -> placer::Cluster {
      throw placer::Error("the 'local' preset needs placer's libtorch module, which this command did not load");
    });
    return nullptr;
  }
  try {
    return load_torch_module(argv);
  } catch (const placer::Error& e) {
    if (need == TorchNeed::required) throw;
    std::fprintf(stderr, "placer: warning: %s; run, profile, validate, the learned placers and the local preset are unavailable\n",
                 e.what());
    return nullptr;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"placer: device placement of deep-learning training graphs (simulate, place, compare, run)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "placer 0.1.0");
  // Usage errors: one line, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "placer: error: " + std::string(e.what()) + " (see --help)\n"; });
  try {
    const RegisterCommands torch_commands = torch_commands_for(argc, argv);
    placer::cli::register_inspect(app);
    placer::cli::register_clusters(app);
    placer::cli::register_simulate(app);
    placer::cli::register_bounds(app);
    placer::cli::register_place(app);
    placer::cli::register_compare(app);
    if (torch_commands) torch_commands(app);  // run, profile, validate
    placer::cli::register_fit(app);
    // A first word that names no command: CLI11 says only "A subcommand is required".
    if (argc > 1 && argv[1][0] != '-') {
      std::string names;
      bool known = false;
      for (const CLI::App* cmd : app.get_subcommands([](CLI::App*) { return true; })) {
        known = known || cmd->get_name() == argv[1];
        names += (names.empty() ? "" : ", ") + cmd->get_name();
      }
      if (!torch_commands)  // not loaded for a word that names no command: its commands exist all the same
        for (std::string_view c : kModuleCommands) names += ", " + std::string(c);
      if (!known)
        throw placer::cli::UsageError("unknown command '" + std::string(argv[1]).substr(0, 200) + "' (commands: " + names +
                            "; see --help)");
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a usage error (an option CLI11 rejects) exits 2, not CLI11's
    // own codes (105, 106, ...): 0 success, 1 an error, 2 a usage error, 3 a placement that does
    // not fit (README).
    return app.exit(e) == 0 ? 0 : placer::cli::kExitUsage;
  } catch (const placer::cli::UsageError& e) {
    std::fprintf(stderr, "placer: error: %s\n", e.what());
    return placer::cli::kExitUsage;
  } catch (const placer::cli::DoesNotFit& e) {
    std::fprintf(stderr, "placer: error: %s\n", e.what());
    return placer::cli::kExitDoesNotFit;
  } catch (const placer::Error& e) {
    std::fprintf(stderr, "placer: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "placer: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    // Out of memory in libtorch: a --dim too large for the machine, most often.
    const std::string what = placer::cli::library_message(e.what(), "check --dim and the model's sizes");
    std::fprintf(stderr, "placer: error: %s\n", placer::printable(what).c_str());
    return 1;
  }
  return 0;
}
