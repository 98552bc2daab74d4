// SPDX-License-Identifier: Apache-2.0
// What a timeline span or state segment is, in the words step reconstruction
// and attribution use: queue kicks and acknowledgements, input and output
// copies, send/recv calls, blocked segments.
#pragma once

#include "decode/neuron_cmd.h"
#include "timeline/timeline_store.h"

namespace steptrace::steps {

inline bool is_ioctl_class(const Span& s, neuron_ioctl_class c) {
  return s.kind == SpanKind::ioctl && neuron_cmd_class(s.cmd) == c;
}
// Host-to-device copy (input): a tensor write, or a copy ioctl flagged H2D.
inline bool is_h2d(const Span& s) {
  return s.kind == SpanKind::nrt_tensor_write || (is_ioctl_class(s, NEURON_CLASS_COPY) && (s.flags & ST_ACCEL_H2D));
}
// Device-to-host copy (output).
inline bool is_d2h(const Span& s) {
  return s.kind == SpanKind::nrt_tensor_read || (is_ioctl_class(s, NEURON_CLASS_COPY) && (s.flags & ST_ACCEL_D2H));
}
inline bool is_net(const Span& s) { return s.kind == SpanKind::net_send || s.kind == SpanKind::net_recv; }
// A DMA queue kick: the device starts work.
inline bool is_kick(const Span& s) { return s.kind == SpanKind::ioctl && s.cmd == NEURON_CMD_DMA_QUEUE_COPY_START; }
// The completion acknowledgement: the runtime saw the device finish.
inline bool is_ack(const Span& s) { return s.kind == SpanKind::ioctl && s.cmd == NEURON_CMD_DMA_ACK_COMPLETED; }
inline bool is_blocked(ThreadState s) { return s == ThreadState::sleeping || s == ThreadState::disk_wait; }

}  // namespace steptrace::steps
