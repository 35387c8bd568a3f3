// The learned placers (reinforcement learning over the simulator, libtorch inside the rl layer):
// "colocrl" (Mirhoseini et al., ICML 2017) and "hdp" (Mirhoseini et al., ICLR 2018), family
// "learned". This header is free of torch. Call register_learned_placers() once before the
// placer registry is first used (the CLI does it when it loads its libtorch module, before any
// command is registered: cli/torch_module.cpp); later calls do nothing.
// Framework, models, hyper-parameters and checkpoints: docs/learned-placers.md.
#pragma once

namespace placer {

void register_learned_placers();

}  // namespace placer
