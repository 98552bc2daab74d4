// SPDX-License-Identifier: Apache-2.0
// `steptrace top`: a live view refreshed every second, like top/neuron-top:
// step rate, rolling per-rank breakdown bars, the current verdict and drops.
// Each frame is drawn from a SessionReport (Session::snapshot(): the same
// report the final one is made of); the command is session/top_command.h.
#pragma once

#include <map>
#include <string>

#include "pipeline/analysis.h"

namespace steptrace {

struct TopFrameState {
  double last_wall_s = 0;
  size_t last_steps = 0;  // steps of all ranks at the previous frame
};

struct TopView {
  int width = 100, height = 40;
  bool color = false;
  int window_steps = 10;  // rolling breakdown over each rank's last N steps
  bool final_frame = false;
  // Set once a stop was asked (q, Ctrl-C, the end of -d): what is being
  // waited for, e.g. "stopping the job: SIGTERM sent, SIGKILL in 8 s".
  std::string stopping;
};

// One frame of text (lines separated by "\n", each at most view.width columns
// of visible text). Updates `state` for the step-rate computation.
std::string render_top_frame(const SessionReport& r, const TopView& view, TopFrameState& state);

}  // namespace steptrace
