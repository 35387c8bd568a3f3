// placer: where each op of a training graph should run. Subcommands live one per file in cli/.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "placer/cli/common.hpp"
#include "placer/exec/exec.hpp"
#include "placer/rl/learned.hpp"
#include "placer/util/error.hpp"

int main(int argc, char** argv) {
  // OpenBLAS starts its thread pool before main() with one thread per core; those threads spin
  // against libtorch's and the simulator's (measured: a CPU training step's median 300 ms instead
  // of 187 ms). The pool size can only be fixed before the library loads, so start again once with
  // it set; placer raises it where it wants more (exec::configure_threads).
  if (!std::getenv("OPENBLAS_NUM_THREADS")) {
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
