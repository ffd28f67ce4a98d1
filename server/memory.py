"""glibc malloc settings for long-running server processes, so their memory stays flat.

With many request threads glibc gives each its own arena and keeps what they free; and after a
large array is freed it raises the size it maps from the OS, so later arrays land in those
arenas too. A fixed mapping threshold hands large arrays back to the OS when freed; two arenas
per process bound the rest. Set in this process (mallopt) and, through the environment, in
every process started from it (the heavy pool's); no effect off glibc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

SETTINGS = {"MALLOC_ARENA_MAX": (-8, 2), "MALLOC_MMAP_THRESHOLD_": (-3, 1 << 20),
            "MALLOC_TRIM_THRESHOLD_": (-1, 4 << 20)}      # name: (mallopt parameter, value)


def keep_flat() -> None:
    """Apply SETTINGS here (where not already set in the environment) and for child processes."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    for name, (param, value) in SETTINGS.items():
        value = int(os.environ.setdefault(name, str(value)))
        mallopt(param, value)
