// The part of the command line that needs libtorch, built as a module of its own
// (libplacer_torch.so, beside the placer executable): the learned placers, the `local` cluster
// preset (measured with libtorch), and `run`, `profile` and `validate`. placer loads it only for
// commands that may use them (cli/main.cpp), so that the others start without paying libtorch's
// initialisers (about 0.7 s on a 2-core virtual machine). The module takes placer's core, CLI
// helpers and registries from the executable, which exports them: one registry, one copy of each.
#include "placer/cli/common.hpp"
#include "placer/cli/torch_module.hpp"
#include "placer/exec/exec.hpp"
#include "placer/rl/learned.hpp"

// Before the commands are registered: `place` and `compare` list the placers they know.
extern "C" [[gnu::visibility("default")]] void placer_torch_register_placers() {
  placer::register_learned_placers();
  placer::exec::register_exec_presets();  // the `local` cluster preset
  placer::exec::route_libtorch_warnings();
}

extern "C" [[gnu::visibility("default")]] void placer_torch_register_commands(CLI::App& app) {
  placer::cli::register_run(app);
  placer::cli::register_profile(app);
  placer::cli::register_validate(app);
}
