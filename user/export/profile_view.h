// SPDX-License-Identifier: Apache-2.0
// The on-CPU profile as people read it: stacks named frame by frame (root
// first; kernel frames marked _[k]), merged where the names agree (the
// same code in two processes), grouped by the category and role the samples
// were classified into (attribution/sample_classes.h). One view feeds the
// terminal, the JSON, the folded file and the HTML flame graph.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipeline/analysis.h"

namespace steptrace {

struct NamedStack {
  Category category = Category::other;
  SampleRole role = SampleRole::outside;
  std::vector<std::string> frames;  // root first
  uint64_t samples = 0;
};

// Every stack with its samples, most sampled first.
std::vector<NamedStack> named_stacks(const SessionReport& r);

// A frame's display name: the symbol, else the module and offset the
// session resolved, else the address.
std::string frame_name(const SampleStore& store, uint32_t pid, uint64_t ip, bool kernel);

// One stack's frames, root first: a CPython process's Python frames
// ("qualname (file:line)") stand for the interpreter's native frames.
std::vector<std::string> stack_frames(const SampleStore& store, const SampledStack& s);

// Folded stacks: "category;role;frame;...;leaf N" per line (flamegraph.pl, speedscope).
std::string folded_text(const std::vector<NamedStack>& stacks);

// The profile in the summary JSON ("cpu_profile").
nlohmann::json profile_json(const SessionReport& r, const std::vector<NamedStack>& stacks);

// The terminal report's section ("" when there are no samples).
std::string profile_text(const SessionReport& r, const std::vector<NamedStack>& stacks);

// A function's inclusive share of one group: samples whose stack holds it.
// Frames that pass nearly all their time to one callee are left out.
struct FunctionShare {
  std::string function;
  uint64_t samples = 0;
  double share = 0;  // of the group's samples
};
std::vector<FunctionShare> top_functions(const std::vector<NamedStack>& stacks, Category c, SampleRole role,
                                         size_t limit);

}  // namespace steptrace
