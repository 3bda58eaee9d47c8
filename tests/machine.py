"""What a test may assume of the machine it runs on, read live from that machine's own facts.

No test compares with a number measured on one CPU. Where a test checks something that holds
only on some machines (a bit-exact model of one library's kernel, which library does the matrix
products), it asks the live facts of ``core.machines.devices.machine_facts`` (the facts every recording
and fingerprint is filed under) and skips elsewhere with a reason that names this machine.
"""

from __future__ import annotations

from core.machines.devices import machine_facts

FACTS = machine_facts()
ARCHITECTURE = str(FACTS["architecture"])
CAPABILITY = str(FACTS["cpu_capability"]).upper()
BLAS = str(FACTS.get("blas") or "unknown")
THIS_MACHINE = f"this machine is {ARCHITECTURE} with torch capability {CAPABILITY} and BLAS {BLAS}"

# The bit-exact model of torch's CPU sum (core.kernels.torch_cpu_model) was measured on x86-64 with AVX2,
# AVX512 and the generic kernels. aarch64 reports "DEFAULT" too, with other vector widths, so the
# architecture is part of the guard.
X86_SUM_KERNEL = ARCHITECTURE in ("x86_64", "AMD64") and CAPABILITY in {"AVX2", "AVX512", "DEFAULT"}
X86_SUM_REASON = ("the bit-exact model of torch's CPU sum is established on x86-64 with AVX2, AVX512 or generic "
                  f"dispatch only; {THIS_MACHINE}")
# Matrix products go to oneMKL (not torch's own vectorized kernels) in the x86 wheels.
ONEMKL = "onemkl" in BLAS.lower() or BLAS.lower().startswith("mkl")
ONEMKL_REASON = f"matrix products are oneMKL's only where torch was built with oneMKL; {THIS_MACHINE}"
