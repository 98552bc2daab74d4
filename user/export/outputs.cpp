// SPDX-License-Identifier: Apache-2.0
#include "export/outputs.h"
#include "export/profile_view.h"
#include "util/json_text.h"

#include <fmt/core.h>


namespace steptrace {

OutputFileOptions output_file_options(const Options& o) {
  OutputFileOptions f;
  f.force = o.force;
  f.mode = static_cast<mode_t>(o.output_mode);
  return f;
}


Status check_file_outputs(const Options& o) {
  for (const auto* p : {&o.json_path, &o.perfetto_path, &o.html_path, &o.folded_path})
    if (!p->empty() && *p != "-")
      if (auto st = check_output_path(*p, output_file_options(o)); !st) return st;
  return Ok{};
}

Status write_file_outputs(const Options& o, const SessionReport& r) {
  if (!o.perfetto_path.empty())
    if (auto st = write_output_file(o.perfetto_path, json_text(perfetto_trace(r)) + "\n", output_file_options(o)); !st)
      return st;
  if (!o.html_path.empty())
    if (auto st = write_output_file(o.html_path, html_report(r), output_file_options(o)); !st) return st;
  if (!o.folded_path.empty())
    if (auto st = write_output_file(o.folded_path, folded_text(named_stacks(r)), output_file_options(o)); !st)
      return st;
  return Ok{};
}

}  // namespace steptrace
