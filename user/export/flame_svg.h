// SPDX-License-Identifier: Apache-2.0
// A flame graph as inline SVG (no script, no fetch: the HTML report stays
// self-contained): one per group of the on-CPU profile, root at the bottom,
// each frame as wide as its samples, its name and share in a tooltip.
#pragma once

#include <string>
#include <vector>

#include "export/profile_view.h"

namespace steptrace {

// The flame graph of the stacks of one (category, role) group; "" when it has none.
std::string flame_svg(const std::vector<NamedStack>& stacks, Category c, SampleRole role, int width = 1100);

// The HTML section: the largest groups' flame graphs ("" without samples).
std::string profile_html(const SessionReport& r, const std::vector<NamedStack>& stacks);

}  // namespace steptrace
