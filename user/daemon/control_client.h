// SPDX-License-Identifier: Apache-2.0
// `steptrace ctl`: the client of the daemon's control socket (control_socket.h).
//   steptrace ctl [--socket PATH] [--timeout S] dump [REASON...] | reload | level NAME|auto
// Exit status: 0 when the daemon answered ok, 1 on an error answer or when
// the daemon cannot be reached, 2 for bad usage.
#pragma once

#include <string>

#include "util/result.h"

namespace steptrace::daemon {

// Sends one request line and returns the answer line (without its newline).
Result<std::string> control_request(const std::string& socket_path, const std::string& line, double timeout_s);

// argv[0] is "ctl". Returns the process exit code.
int ctl_main(int argc, char** argv);

}  // namespace steptrace::daemon
