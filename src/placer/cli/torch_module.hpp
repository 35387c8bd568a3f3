// The libtorch module of the command line (cli/torch_module.cpp): its file name and entry point.
#pragma once

namespace placer::cli {

// Next to the placer executable.
inline constexpr const char* kTorchModuleFile = "libplacer_torch.so";
// extern "C" void placer_torch_register_placers(): registers the learned placers and the `local`
// cluster preset; call it before any command is registered.
inline constexpr const char* kTorchModulePlacers = "placer_torch_register_placers";
// extern "C" void placer_torch_register_commands(CLI::App&): registers run, profile and validate.
inline constexpr const char* kTorchModuleCommands = "placer_torch_register_commands";

}  // namespace placer::cli
