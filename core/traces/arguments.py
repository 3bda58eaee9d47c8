"""An op's arguments: the tensors among them (``tensors_of``, ``flat_tensors``), those it writes in place
(``written_arguments``), and the rest as the bounded text a trace keeps and two runs compare.

Numbers are written exactly (a float as its hex), a tensor as ``T`` (its bits are one of the op's inputs,
digested apart) and lists as lists. What is none of these has no text that two runs share by itself: a Python
object's ``repr`` names its address (``<torch.ScriptObject object at 0x...>``), which differs from run to run and
from process to process, and two runs compared by it would part over an address. So such an argument is
written by its content where the tracer can read it, and never by its address:

- a TorchScript object (``torch.ScriptObject``: a quantized layer's packed weights, ``LinearPackedParamsBase``;
  a quantized RNN's ``CellParamsBase``) whose class can be pickled: its class and a digest of its state
  (``__getstate__``: the quantized weights' levels, scales and zero points, the biases' bits; the objects
  nested in it the same way). Two runs with the same weights write the same text, and weights packed
  otherwise (another engine's ``reduce_range``) write another;
- anything else whose text holds an address, or a state the tracer cannot read: its type and
  ``NOT_COMPARABLE``. The text then says that the argument could not be compared, and the judgement of a
  difference born in that op says so (core.traces.judge).

A state is digested once per object and trace (``Opaque``): packed weights do not change while a model runs.
"""

from __future__ import annotations

import math

import torch
import xxhash

from core.traces.bits import digest

MAX_ARG_TEXT = 200  # characters of non-tensor arguments kept per op
NOT_COMPARABLE = "(not comparable)"  # follows the type of an argument whose content cannot be read
_DEPTH = 12  # nesting of a state read (a packed RNN: cells, then each cell's packed weights)


def written_arguments(func) -> tuple[tuple[int, str], ...]:
    """(position, name) of each argument the op writes in place (``Tensor(a!)`` in its schema: ``add_``'s
    self, an out= tensor, ``_foreach_add_``'s list)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return ()
    return tuple((i, a.name) for i, a in enumerate(schema.arguments)
                 if a.alias_info is not None and a.alias_info.is_write)


def tensors_of(obj, out: list) -> list:
    """The tensors in nested tuples, lists and dicts, in order (what tree_flatten gives, faster)."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            tensors_of(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            tensors_of(x, out)
    return out


def flat_tensors(args: tuple) -> list:
    """``tensors_of(args, [])``, without a call per argument where no argument is a list (most ops)."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple, dict)):
            tensors_of(a, out)
    return out


def class_name(obj) -> str:
    """A script object's class (``quantized.LinearPackedParamsBase``), else the Python type's name."""
    try:
        return obj._type().qualified_name().removeprefix("__torch__.torch.classes.")
    except (AttributeError, RuntimeError):
        return type(obj).__name__


def _feed(h, x, depth: int = 0) -> bool:
    """Add ``x``'s content to the hash ``h``; False where some of it cannot be read (an address, a state
    that is not pickled, nesting past ``_DEPTH``)."""
    if depth > _DEPTH:
        return False
    if isinstance(x, torch.Tensor):
        h.update(digest(x).encode())  # its bits; a quantized tensor's levels and grid
        return True
    if isinstance(x, torch.ScriptObject):
        h.update(class_name(x).encode())
        try:
            state = x.__getstate__()
        except (AttributeError, RuntimeError):
            return False
        return _feed(h, state, depth + 1)
    if isinstance(x, (list, tuple)):
        h.update(b"[%d" % len(x))
        return all(_feed(h, v, depth + 1) for v in x)
    if isinstance(x, dict):
        h.update(b"{%d" % len(x))
        return all(_feed(h, k, depth + 1) and _feed(h, v, depth + 1) for k, v in sorted(x.items(), key=repr))
    if isinstance(x, float):
        h.update(x.hex().encode())
        return True
    text = repr(x)
    if " at 0x" in text:
        return False
    h.update(text.encode())
    return True


class Opaque:
    """The text of the opaque arguments one trace meets, each read once (kept with the object, so an id is not
    reused while the trace holds it)."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[object, str]] = {}

    def text(self, obj) -> str:
        e = self._seen.get(id(obj))
        if e is not None and e[0] is obj:
            return e[1]
        h = xxhash.xxh3_64()
        name = class_name(obj)
        t = f"{name}#{h.hexdigest()}" if isinstance(obj, torch.ScriptObject) and _feed(h, obj) \
            else name + NOT_COMPARABLE
        self._seen[id(obj)] = (obj, t)
        return t


def show(a, opaque: Opaque) -> str:
    """One argument's text (see the module docstring)."""
    if isinstance(a, torch.Tensor):
        return "T"
    if isinstance(a, (list, tuple)):
        return "[" + ",".join(show(x, opaque) for x in a) + "]"
    if isinstance(a, float):
        return a.hex() if math.isfinite(a) else repr(a)
    if a is None or isinstance(a, (bool, int, str)):
        return repr(a)
    if isinstance(a, torch.ScriptObject):
        return opaque.text(a)
    text = repr(a)
    return opaque.text(a) if " at 0x" in text else text


def arg_text(args, kwargs, opaque: Opaque) -> str:
    """The op's non-tensor arguments, positional then by keyword, in at most ``MAX_ARG_TEXT`` characters: a longer
    text keeps its head and ends with ``~`` and a digest of the whole, so two runs' texts are equal only where
    all of their arguments are (a quantized RNN's list of packed cells is longer than the cap)."""
    parts = [show(a, opaque) for a in args]
    if kwargs:
        parts += [f"{k}={show(v, opaque)}" for k, v in sorted(kwargs.items())]
    text = ", ".join(parts)
    if len(text) <= MAX_ARG_TEXT:
        return text
    return text[:MAX_ARG_TEXT - 17] + "~" + xxhash.xxh3_64_hexdigest(text.encode())
