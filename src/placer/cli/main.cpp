// placer: where each op of a training graph should run. Subcommands live one per file in cli/.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "placer/cli/common.hpp"
#include "placer/exec/exec.hpp"
#include "placer/rl/learned.hpp"
#include "placer/util/error.hpp"

namespace {

// Whether this command line may run libtorch's CPU kernels: `run`, `profile`, `validate`, learned
// placers in `place` and `compare`, and measuring the `local` cluster preset. The others (inspect,
// simulate, bounds, fit, and a bare --help or --version) never do.
bool may_run_torch(int argc, char** argv) {
  std::string_view command;
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') {
      command = argv[i];
      break;
    }
  if (command.empty()) return false;
  if (command != "inspect" && command != "simulate" && command != "bounds" && command != "fit") return true;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "local" || std::string_view(argv[i]) == "--cluster=local") return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS starts its thread pool before main() with one thread per core; those threads spin
  // against libtorch's and the simulator's (measured: a CPU training step's median 300 ms instead
  // of 187 ms). The pool size can only be fixed before the library loads, so a command that may
  // run libtorch starts again once with it set; placer raises it where it wants more
  // (exec::configure_threads). The others skip the second start: each start pays libtorch's
  // initialisers, about 0.7 s on a 2-core virtual machine.
  if (!std::getenv("OPENBLAS_NUM_THREADS") && may_run_torch(argc, argv)) {
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: carry on as we are
  }
  placer::register_learned_placers();
  CLI::App app{"placer: device placement of deep-learning training graphs (simulate, place, compare, run)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "placer 0.1.0");
  // Usage errors: one line, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return "placer: error: " + std::string(e.what()) + " (see --help)\n"; });
  placer::cli::register_inspect(app);
  placer::cli::register_clusters(app);
  placer::cli::register_simulate(app);
  placer::cli::register_bounds(app);
  placer::cli::register_place(app);
  placer::cli::register_compare(app);
  placer::exec::register_exec_presets();  // the `local` cluster preset
  placer::cli::register_run(app);
  placer::cli::register_profile(app);
  placer::cli::register_validate(app);
  placer::cli::register_fit(app);
  try {
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
