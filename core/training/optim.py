"""torch's optimizers, used without loading torch._dynamo.

torch.optim loads torch._dynamo, the compiler, on an optimizer's first use: four ``Optimizer``
methods (``add_param_group``, which the constructor calls, ``zero_grad``, ``state_dict``,
``load_state_dict``) are wrapped to opt out of compilation, and the wrapper imports the compiler to
learn how; ``step`` imports it to mark a graph break. The compiler brings sympy, torch.distributed
and onnx with it: 822 modules and about 68 MB of a server's private memory, measured on the 2-core
development VM, for a feature this app never uses (nothing here compiles).

So, at import, this module gives each of those four wrappers the answer it would otherwise import
the compiler for: outside compilation, the opted-out form of a method is the method itself. And
``step`` calls the optimizer's own step function under ``torch.no_grad()``, which is what torch's
wrapper does in eager mode (the graph break does nothing there), leaving out only its profiler label
and its step hooks (none are registered here). The arithmetic is torch's own, the same functions on
the same tensors: the fingerprint, training and trace tests compare its bits. If a later torch names
these differently, nothing is changed, the compiler loads as before, and only the memory is spent.
"""

from __future__ import annotations

import inspect

import torch
import torch._compile


def _resolve_opt_outs() -> list[str]:
    """Give every opt-out wrapper on ``torch.optim.Optimizer`` its plain method; the names done."""
    wrapper = torch._compile._disable_dynamo(lambda: None).__code__  # the code every such wrapper runs
    done = []
    for name, f in vars(torch.optim.Optimizer).items():
        if inspect.isfunction(f) and f.__code__ is wrapper and hasattr(f, "__wrapped__"):
            method = f.__wrapped__
            if getattr(method, "__dynamo_disable", None) is None:
                method.__dynamo_disable = method  # what the wrapper calls, instead of importing the compiler
            done.append(name)
    return done


RESOLVED = _resolve_opt_outs()


def step(opt: torch.optim.Optimizer) -> None:
    """One step of ``opt``: its class's own step function, under no_grad (see the module docstring)."""
    with torch.no_grad():
        inspect.unwrap(type(opt).step)(opt)
