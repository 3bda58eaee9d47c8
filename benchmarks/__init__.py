"""Benchmarks of this project against a peer, timed in one run; each prints its ratio last.

core.machines.native comes first, before anything loads torch: the benchmarks then time torch under
the native-library settings the app's server runs with (OpenMP's passive wait, among others), which
is the cost a visitor meets. At OpenMP's default, its threads spin for a while after each parallel
region, and a timing that follows torch's takes a core away from whatever runs next."""

import core.machines.native  # noqa: F401  (first: the settings are read when torch loads)
