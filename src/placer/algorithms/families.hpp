// One registration function per family of algorithms, each defined in its own file and called
// from registry.cpp only (explicit calls: no static registrars a linker could drop).
#pragma once

#include <vector>

#include "placer/algorithms/placer.hpp"

namespace placer {

void register_baselines(std::vector<PlacerInfo>& registry);      // single, round-robin, random
void register_memory_maps(std::vector<PlacerInfo>& registry);    // sequential, balanced
void register_expert(std::vector<PlacerInfo>& registry);         // expert
void register_partitioners(std::vector<PlacerInfo>& registry);   // metis, scotch
void register_schedulers(std::vector<PlacerInfo>& registry);     // critical-path, heft, m-topo, m-etf, m-sct
void register_search(std::vector<PlacerInfo>& registry);         // local-search, optimal

// Placers defined outside the core library (the learned ones in rl/) add themselves here before
// the registry is first used.
void register_placer(PlacerInfo info);

}  // namespace placer
