# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Mark training steps for steptrace from Python.

    from steptrace_marker import step
    for i, batch in enumerate(loader):
        step(i)          # top of every training step
        ...

Set STEPTRACE_MARKER_LIB to the library path if it is not on the loader path.
"""
import ctypes, os
_lib = ctypes.CDLL(os.environ.get("STEPTRACE_MARKER_LIB", "libsteptrace_marker.so"))
_lib.steptrace_step.argtypes = [ctypes.c_uint64]
step = _lib.steptrace_step
