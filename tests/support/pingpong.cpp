// SPDX-License-Identifier: Apache-2.0
// st-pingpong ROUNDS: two threads pass one byte back and forth through two
// pipes, so every message is a wake-up and two context switches - a
// scheduler-event storm that does not depend on how a shell pipeline's
// reader batches its reads.
#include <unistd.h>

#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  long rounds = argc > 1 ? std::atol(argv[1]) : 100000;
  int a[2], b[2];
  if (rounds <= 0 || pipe(a) || pipe(b)) return 1;
  std::thread peer([&] {
    char c;
    for (long i = 0; i < rounds; ++i)
      if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1) _exit(2);
  });
  char c = 0;
  for (long i = 0; i < rounds; ++i)
    if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 3;
  peer.join();
  return 0;
}
