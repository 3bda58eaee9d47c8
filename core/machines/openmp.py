"""OpenMP's wait policy for this process, chosen before torch loads (the OpenMP runtime reads it once).

torch runs its intra-op threads on OpenMP, whose threads by default spin for a while after each
parallel region, waiting for the next. The app runs thousands of tiny ops (a 2-64-64-3 network, a
language model of 96 dimensions) for many visitors on a server of two or so cores: a spinning
thread takes the core that another thread of the same team, or another visitor, needs. Measured on
the 2-core development VM, a 500-step training pair took 3.6 s with the default policy and 1.0 s
with passive waits, idle; with the second core busy, 54 s against 1.2 s; a sum of 10^7 float32
values took 5.4 ms and 1.9 ms. The policy changes how idle threads wait, never how work is split
among them, so every result keeps its bits. Importing this module sets ``OMP_WAIT_POLICY=PASSIVE``
unless the environment already chose a policy; it has an effect only when it comes before torch's
first import in the process (app.py, scripts.serve and the test suite import it first).
"""

from __future__ import annotations

import os

POLICY = "PASSIVE"
os.environ.setdefault("OMP_WAIT_POLICY", POLICY)
