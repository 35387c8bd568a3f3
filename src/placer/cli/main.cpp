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

#include "placer/cli/common.hpp"
#include "placer/cli/torch_module.hpp"
#include "placer/util/error.hpp"

namespace {

// Whether this command line may need the libtorch module (cli/torch_module.cpp): `run`, `profile`,
// `validate`, `place` and `compare` (learned placers), `clusters` and any mention of the `local`
// preset (measured with libtorch), and a bare `placer` or `placer --help` (which lists every
// subcommand). inspect, simulate, bounds and fit on other clusters never do.
bool needs_torch(int argc, char** argv) {
  std::string_view command;
  bool version = false;
  for (int i = 1; i < argc && command.empty(); ++i) {
    if (argv[i][0] != '-') command = argv[i];
    version |= std::string_view(argv[i]) == "--version";
  }
  if (command.empty()) return !version;
  if (command != "inspect" && command != "simulate" && command != "bounds" && command != "fit") return true;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "local" || std::string_view(argv[i]) == "--cluster=local") return true;
  return false;
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
RegisterCommands load_torch_module() {
  // OpenBLAS (under Debian's libtorch) sizes its thread pool from this variable when it loads, one
  // thread per core otherwise; those threads spin against libtorch's and the simulator's
  // (measured: a CPU training step's median 300 ms instead of 187 ms). placer raises the count
  // where it wants more (exec::configure_threads).
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  const std::string path = executable_dir() + placer::cli::kTorchModuleFile;
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!module) throw placer::Error(std::string("cannot load placer's libtorch module: ") + dlerror());
  auto placers = reinterpret_cast<void (*)()>(dlsym(module, placer::cli::kTorchModulePlacers));
  auto commands = reinterpret_cast<RegisterCommands>(dlsym(module, placer::cli::kTorchModuleCommands));
  if (!placers || !commands) throw placer::Error("'" + path + "' is not placer's libtorch module (entry points missing)");
  placers();
  return commands;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"placer: device placement of deep-learning training graphs (simulate, place, compare, run)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "placer 0.1.0");
  // Usage errors: one line, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "placer: error: " + std::string(e.what()) + " (see --help)\n"; });
  try {
    const RegisterCommands torch_commands = needs_torch(argc, argv) ? load_torch_module() : nullptr;
    placer::cli::register_inspect(app);
    placer::cli::register_clusters(app);
    placer::cli::register_simulate(app);
    placer::cli::register_bounds(app);
    placer::cli::register_place(app);
    placer::cli::register_compare(app);
    if (torch_commands) torch_commands(app);  // run, profile, validate
    placer::cli::register_fit(app);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const placer::Error& e) {
    std::fprintf(stderr, "placer: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "placer: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "placer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
