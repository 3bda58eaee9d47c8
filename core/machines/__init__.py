"""This machine: its devices, its process-global numeric settings, and its clock.

globalstate (torch thread count, TF32 and other process-global settings, changed only under one
lock and always restored), devices (the devices torch can compute on here, machine facts for
provenance labels), timing (medians, interleaved repeats, float32 against float64 throughput).

May import: core.arith, the standard library, torch, NumPy.
"""
