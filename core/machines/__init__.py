"""This machine: its devices, its process-global numeric settings, its clock and its memory.

globalstate (torch thread count, TF32 and other process-global settings, changed only under one
lock and always restored), devices (the devices torch can compute on here, machine facts for
provenance labels), timing (medians, interleaved repeats, float32 against float64 throughput),
memory (free memory for new processes, a process's resident memory, from /proc and cgroups), progress
(the one Progress record and callback type of long computations), native (OpenMP's, oneDNN's and
glibc's settings, made before torch loads; the warm objects kept out of the collector's passes).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""
