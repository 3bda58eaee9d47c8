"""Drawing for the Serving page: the punchline, the completions grouped by text, the measured rarity, cost."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.arith.formats import FORMATS
from core.serving.engine import Completion, ForkStudy, ServeResult
from ui.render import inert

SHOWN_GROUPS = 6  # completions drawn in full (the table lists every group)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def punchline(punch, study: ForkStudy, invariant_on: bool) -> None:
    """'N identical requests at temperature 0 gave K different completions', and the other mode's K."""
    shown, other = (study.invariant, study.ordinary) if invariant_on else (study.ordinary, study.invariant)
    n, k = shown.identical_requests, shown.distinct
    punch.markdown(f"### {n:,} identical requests at temperature 0 gave {_plural(k, 'different completion')}")
    where = "with batch-invariant kernels" if invariant_on else "with the server's ordinary kernels"
    other_where = "ordinary kernels" if invariant_on else "batch-invariant kernels"
    c1, c2, c3 = punch.columns(3)
    c1.metric("Distinct completions", k, help=f"Served {where}.")
    c2.metric(f"With {other_where}", other.distinct, help="The same schedule, served again.")
    top = next((c for c in shown.completions if c.fork), None)
    c3.metric("First fork: token", (top and f"{top.fork.position + 1} (“{top.fork.token}” vs “{top.fork.alone_token}”)")
              or "none", help="Counted from the first generated token; in quotes what the batched request produced "
              "and what the request served alone produced there.")
    punch.caption(f"Served live on this server {where}: {inert(shown.kernels_label)}; "
                  f"{shown.settings.dtype}, {shown.settings.requests:,} identical requests among "
                  f"{shown.settings.other_requests:,} others, at most {shown.settings.max_batch} per batch, "
                  f"{shown.torch_threads} torch thread.")


def _generated(text: str) -> str:
    """Generated text, marked apart from the prompt. A background directive, not bold: a completion that
    starts or ends with a space (most do) would leave markdown's ** markers unmatched, shown literally."""
    return f":blue-background[{inert(text, line_start=False)}]" if text else ""


def _highlighted(prompt: str, c: Completion) -> str:
    """The completion as inert text with its first departing character marked (a space shows as ␣)."""
    text = c.text
    if c.fork is None:
        return f"{inert(prompt)}{_generated(text)}"
    i = c.fork.position
    ch = text[i] if text[i] != " " else "␣"
    return (f"{inert(prompt)}{_generated(text[:i])}:orange-background[{inert(ch, line_start=False)}]"
            f"{inert(text[i + 1:], line_start=False)}")


def completions(result: ServeResult) -> None:
    """The completions grouped by text with counts; the first token that departs from the lone run marked."""
    prompt = result.settings.prompt
    st.markdown(f"Served alone (a batch of one): {inert(prompt)}{_generated(result.alone)}")
    st.caption("The prompt, then the generated text (blue); orange marks the first character where a group of "
               "requests departs from the request served alone.")
    for c in result.completions[:SHOWN_GROUPS]:
        label = "same as alone" if c.fork is None else f"departs at token {c.fork.position + 1}"
        st.markdown(f"**{c.count:,}×** ({label}): {_highlighted(prompt, c)}")
    if len(result.completions) > SHOWN_GROUPS:
        st.caption(f"… and {len(result.completions) - SHOWN_GROUPS:,} more distinct completions (in the table).")
    # a group that never departs has no fork to measure: its cells say so ("—"), never "None"
    rows = [{"requests": c.count,
             "departs at token": f"{c.fork.position + 1}" if c.fork else "—",
             "there": f"“{c.fork.token}” instead of “{c.fork.alone_token}”" if c.fork else "same as alone",
             "top-2 gap alone (ULPs)": _ulps(c.fork.gap_ulps if c.fork else None),
             "top-2 gap / logit": _num(c.fork.gap_ratio if c.fork else None, "{:.2e}"),
             "this request's own gap (ULPs)": _ulps(c.fork.own_gap_ulps if c.fork else None)}
            for c in result.completions]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _num(x, form: str) -> str:
    return "—" if x is None else form.format(x)


def _ulps(x) -> str:
    return _num(x, "{:,.1f}" if x is not None and abs(x) < 1000 else "{:,.0f}")


def rarity(result: ServeResult) -> None:
    """How often the bits moved, and how often that flipped a token: measured on the identical requests."""
    n = max(result.rows_compared, 1)
    c1, c2, c3 = st.columns(3)
    c1.metric("Rows whose bits moved", f"{result.rows_bits_differ / n:.1%}",
              help=f"Logit rows whose bits differ from the lone run: {result.rows_bits_differ:,} of "
                   f"{result.rows_compared:,} rows of the identical requests, compared while each still agreed with "
                   "the lone run.")
    c2.metric("Rows whose best token flips", f"{result.rows_argmax_flip / n:.3%}",
              help=f"{result.rows_argmax_flip:,} of {result.rows_compared:,}.")
    c3.metric("Smallest top-2 gap seen", f"{result.min_gap_ulps:,.0f} ULPs",
              help=f"{result.min_gap_ratio:.2e} of the larger logit, in {result.settings.dtype}.")


def own_kernels_note(result: ServeResult) -> str:
    """Why this CPU's own kernels rarely fork, said of what was measured just now (the share of rows that moved)."""
    share = result.rows_bits_differ / max(result.rows_compared, 1)
    dtype = result.settings.dtype
    if result.rows_bits_differ == 0:
        return (f"With this CPU's own kernels no logit row's bits moved with the batch here ({dtype}, "
                f"{result.rows_compared:,} rows compared): the batched and the lone paths gave the same bits, so no "
                "fork can come of them.")
    u = float(FORMATS[dtype].unit_roundoff) if dtype in FORMATS else None
    size = f"about {u:.0e} of itself" if u is not None else "about an ULP"
    return (f"With this CPU's own kernels the bits of {share:.1%} of the logit rows moved ({dtype}; one row takes a "
            f"matrix-vector path, a batch a blocked matrix-matrix path), but a logit moves by {size}, and this small "
            "model is rarely that undecided: a fork needs a near-tie that is seldom on the path.")


def cost(study: ForkStudy) -> None:
    """Both throughputs on the cost's own basis: the serving thread's CPU time, against this CPU's own kernels
    (the MODEL of a GPU's kernels emulates, so its speed says nothing of a GPU and is not compared)."""
    b, i = study.baseline, study.invariant
    c1, c2, c3 = st.columns(3)
    c1.metric("Own kernels, CPU time", f"{b.cpu_tokens_per_second:,.0f} tokens/s",
              help=f"This CPU's own torch kernels: tokens per second of the serving thread's CPU time. Wall clock: "
                   f"{b.tokens_per_second:,.0f} tokens/s.")
    c2.metric("Batch-invariant, CPU time", f"{i.cpu_tokens_per_second:,.0f} tokens/s",
              help=f"Batch-invariant kernels: tokens per second of the serving thread's CPU time. Wall clock: "
                   f"{i.tokens_per_second:,.0f} tokens/s.")
    c3.metric("Batch-invariant cost", f"{study.cost:.2f}×", help="The serving thread's CPU time, batch-invariant "
              "over this CPU's own kernels, for the same schedule: the ratio of the two numbers beside it.")
    st.caption(f"Measured live on this server just now: {b.tokens:,} tokens in {b.steps:,} engine steps each way, "
               "one torch thread, timed in the serving thread's CPU time (wall time also counts other visitors' "
               "work; it is in each number's tooltip).")


def batch_sizes(result: ServeResult) -> str:
    sizes = result.batch_sizes
    if not sizes:
        return "no decode steps"
    common = max(sizes, key=sizes.get)
    return (f"decode batches of {min(sizes)} to {max(sizes)} requests, most often {common} "
            f"({sizes[common]:,} of {sum(sizes.values()):,} steps)")
