"""Settings of the native libraries under torch, chosen before torch loads (they are read once).

**OpenMP's wait policy.** torch runs its intra-op threads on OpenMP, whose threads by default spin
for a while after each parallel region, waiting for the next. The app runs thousands of tiny ops (a
2-64-64-3 network, a language model of 96 dimensions) for many visitors on a server of two or so
cores: a spinning thread takes the core that another thread of the same team, or another visitor,
needs. Measured on the 2-core development VM, a 500-step training pair took 3.6 s with the default
policy and 1.0 s with passive waits, idle; with the second core busy, 54 s against 1.2 s; a sum of
10^7 float32 values took 5.4 ms and 1.9 ms. The policy changes how idle threads wait, never how work
is split among them, so every result keeps its bits. ``OMP_WAIT_POLICY=PASSIVE``.

**oneDNN's caches.** torch's bfloat16 matrix products on a CPU go through oneDNN, which compiles a
kernel for each product shape and keeps it, with its buffers, in two caches of 1,024 entries each
(oneDNN's primitive cache, ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, and ideep's, ``LRU_CACHE_CAPACITY``).
A server with dynamic batching meets a new shape at almost every step (batch size times prompt
length): one serving run at the Serving page's defaults made about 300 shapes and left the process
175 MB larger, measured on the 2-core development VM (AVX-512 with bfloat16); with 64 entries each,
45 MB, at the same speed within the run-to-run spread. A cache holds compiled code and workspace,
never results: a product computes the same bits whether its kernel was kept or compiled again.

Importing this module sets each of these unless the environment already chose it; it has an effect
only when it comes before torch's first import in the process (app.py, scripts.serve and the test
suite import it first).
"""

from __future__ import annotations

import os

SETTINGS = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64",
    "LRU_CACHE_CAPACITY": "64",
}
for _name, _value in SETTINGS.items():
    os.environ.setdefault(_name, _value)
