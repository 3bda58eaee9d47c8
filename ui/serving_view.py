"""Drawing for the Serving page: the punchline, the completions grouped by text, the measured rarity, cost."""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from core.arith.metrics import ulps_gap, ulps_tenths, ulps_whole
from core.serving.engine import Completion, ForkStudy, ServeResult
from ui import glossary
from ui.palette import FORK, GENERATED_BACKGROUND, ON_FORK
from ui.render import inert

SHOWN_GROUPS = 6  # completions drawn in full (the table lists every group)
# cited addresses, shown as plain text (inert): a page that takes link parameters shows no live link
THINKING_MACHINES = "https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/"
SGLANG_DETERMINISTIC = "https://lmsys.org/blog/2025-09-22-sglang-deterministic/"


def headline(n: int, k: int) -> str:
    """The punchline's count, true for every k: all the same (k = 1), or k different completions."""
    if k <= 1:
        return ("1 request at temperature 0 came back as it did served alone" if n == 1 else
                f"{n:,} identical requests at temperature 0 came back all identical")
    return f"{n:,} identical requests at temperature 0 gave {k:,} different completions"


# The fork mark: a solid orange box with white bold text (the pale orange-background directive was faint),
# and the text after it underlined in the same colour. The prompt (the visitor's) is inert; the generated text is
# escaped HTML (it is in the model's alphabet anyway: lower-case letters, spaces, commas and full stops).
GENERATED = f"background:{GENERATED_BACKGROUND};border-radius:0.2em"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _generated(text: str) -> str:
    """Generated text, marked apart from the prompt by a pale blue background."""
    return f'<span style="{GENERATED}">{_esc(text)}</span>' if text else ""


def highlighted(prompt: str, c: Completion | None, text: str) -> str:
    """The prompt and a completion as escaped HTML; its first departing character (a space shows as ␣) in a solid
    orange box and the rest underlined in orange."""
    if c is None or c.fork is None:
        return f"{inert(prompt)}{_generated(text)}"
    i = c.fork.position
    ch = text[i] if text[i] != " " else "␣"
    mark = (f'<span class="sv-fork" style="background:{FORK};color:{ON_FORK};font-weight:700;padding:0 0.15em;'
            f'border-radius:0.2em" title="first character that departs from the request served alone">'
            f'{_esc(ch)}</span>')
    rest = (f'<span style="text-decoration:underline;text-decoration-color:{FORK};text-decoration-thickness:2px;'
            f'color:{FORK}">{_esc(text[i + 1:])}</span>')
    return f"{inert(prompt)}{_generated(text[:i])}{mark}{rest}"


def _line(label: str, body: str) -> str:
    """One labelled completion (its class is what browser tests find it by)."""
    return f'<div class="sv-completion" style="margin:0.15em 0"><b>{_esc(label)}</b> {body}</div>'


def punchline(punch, study: ForkStudy, invariant_on: bool) -> None:
    """The count of distinct completions in one sentence, the lone run's text against the most common departing
    group's (the fork marked), and the other mode's count."""
    shown, other = (study.invariant, study.ordinary) if invariant_on else (study.ordinary, study.invariant)
    n, k = shown.identical_requests, shown.distinct
    punch.markdown(f"### {headline(n, k)}")
    prompt = shown.settings.prompt
    forked = next((c for c in shown.completions if c.fork), None)
    lines = [_line("Served alone:", highlighted(prompt, None, shown.alone))]
    if forked is not None:
        lines.append(_line(f"{forked.count:,} of {n:,} batched:", highlighted(prompt, forked, forked.text)))
    else:
        lines.append(_line(f"All {n:,} batched:", "the same text as served alone"))
    punch.markdown("".join(lines), unsafe_allow_html=True)
    where = "with batch-invariant kernels" if invariant_on else "with the server's ordinary kernels"
    other_where = "ordinary kernels" if invariant_on else "batch-invariant kernels"
    c1, c2, c3 = punch.columns(3)
    c1.metric("Distinct completions", k, help=f"Served {where}.")
    c2.metric(f"With {other_where}", other.distinct, help="The same schedule, served again.")
    c3.metric("First fork: token", (forked and f"{forked.fork.position + 1} (“{forked.fork.token}” vs "
                                    f"“{forked.fork.alone_token}”)") or "none",
              help="Counted from the first generated token; in quotes what the batched request produced "
              "and what the request served alone produced there.")
    kind = where.removeprefix("with ")
    detail = shown.kernels_label  # the kernels' own label, without the words ``where`` already says
    detail = detail[len(kind):].strip(" ()") if detail.startswith(kind) else detail
    punch.caption(f"Served live on this server {where} ({inert(detail)}), {shown.settings.dtype}: "
                  f"{n:,} identical requests among {shown.settings.other_requests:,} others, at most "
                  f"{shown.settings.max_batch} per batch. Orange: where a batched copy first departs from the lone "
                  "run.", help=glossary.help_for(detail, "split_k", "split_kv"))  # the kernels' label names them


def completions(result: ServeResult) -> None:
    """Every distinct completion with its count, the first departing character marked, and the table of gaps."""
    prompt = result.settings.prompt
    lines = [_line("Served alone (a batch of one):", highlighted(prompt, None, result.alone))]
    for c in result.completions[:SHOWN_GROUPS]:
        label = "same as alone" if c.fork is None else f"departs at token {c.fork.position + 1}"
        lines.append(_line(f"{c.count:,}× ({label}):", highlighted(prompt, c, c.text)))
    st.markdown("".join(lines), unsafe_allow_html=True)
    if len(result.completions) > SHOWN_GROUPS:
        st.caption(f"… and {len(result.completions) - SHOWN_GROUPS:,} more distinct completions (in the table).")
    # a group that never departs has no fork to measure: its cells say so ("—"), never "None"
    rows = [{"requests": c.count,
             "departs at token": f"{c.fork.position + 1}" if c.fork else "—",
             "there": f"“{c.fork.token}” instead of “{c.fork.alone_token}”" if c.fork else "same as alone",
             "top-2 gap alone (ULPs)": ulps_gap(c.fork.gap_ulps if c.fork else None),
             "top-2 gap / logit": _num(c.fork.gap_ratio if c.fork else None, "{:.2e}"),
             "own gap (ULPs)": ulps_gap(c.fork.own_gap_ulps if c.fork else None)}
            for c in result.completions]
    gap = glossary.help_text("top2_gap")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={"top-2 gap alone (ULPs)": st.column_config.TextColumn(help=gap),
                                "top-2 gap / logit": st.column_config.TextColumn(help=gap)})


def _num(x, form: str) -> str:
    return "—" if x is None else form.format(x)


def rarity(result: ServeResult) -> None:
    """How often the bits moved, by how much, and how often that flipped a token: measured on the identical
    requests."""
    n = max(result.rows_compared, 1)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Rows whose bits moved", f"{result.rows_bits_differ / n:.1%}",
              help=f"Logit rows whose bits differ from the lone run: {result.rows_bits_differ:,} of "
                   f"{result.rows_compared:,} rows of the identical requests, compared while each still agreed with "
                   "the lone run.")
    c2.metric("Largest logit move", ulps_tenths(result.max_move_ulps),
              help="The largest change of one logit against the lone run's, over those rows, in ULPs of that row's "
                   f"largest logit ({result.settings.dtype}): the unit of the top-2 gap.")
    c3.metric("Rows whose best token flips", f"{result.rows_argmax_flip / n:.3%}",
              help=f"{result.rows_argmax_flip:,} of {result.rows_compared:,}.")
    c4.metric("Smallest top-2 gap", ulps_whole(result.min_gap_ulps),
              help=f"{glossary.help_text('top2_gap')}\n\nHere: {result.min_gap_ratio:.2e} of the larger logit, in "
                   f"{result.settings.dtype}.")


def measured_moves(result: ServeResult) -> str:
    """What was measured of the logits' moves, and on what: a sentence with the live numbers."""
    n = max(result.rows_compared, 1)
    dtype = result.settings.dtype
    on = (f"this tiny model ({dtype}, {result.rows_compared:,} logit rows of the identical requests compared with "
          "the same rows served alone)")
    if result.rows_bits_differ == 0:
        return f"Measured here on {on}: no row's bits moved with the batch."
    return (f"Measured here on {on}: the bits of {result.rows_bits_differ / n:.1%} of the rows moved with the batch, "
            f"one logit by at most {ulps_tenths(result.max_move_ulps)} of its row's largest logit; "
            f"{result.rows_argmax_flip / n:.2%} of the rows changed their best token (where each request departs, "
            "its top-2 gap is in the table of every completion below). "
            "A deeper model adds such differences up layer by layer, so its logits can move further.")


def own_kernels_note(result: ServeResult, blas: str | None) -> str:
    """Why this CPU's own kernels rarely fork, said of what was measured just now (the share of rows that moved)."""
    share = result.rows_bits_differ / max(result.rows_compared, 1)
    dtype = result.settings.dtype
    if result.rows_bits_differ == 0:
        return (f"With this CPU's own kernels no logit row's bits moved with the batch here ({dtype}, "
                f"{result.rows_compared:,} rows compared): the batched and the lone paths gave the same bits, so no "
                "fork can come of them.")
    lib = f"the BLAS ({blas})" if blas else "the BLAS"
    return (f"With this CPU's own kernels the bits of {share:.1%} of the logit rows moved ({dtype}), so a row alone "
            f"and the same row in a batch were not computed the same way (another order of the additions, or other "
            f"instructions): torch hands both shapes to {lib}, whose "
            "choice of kernel is not documented; likely a matrix-vector kernel for one row and a blocked "
            f"matrix-matrix kernel for a batch. A logit moved by at most {ulps_tenths(result.max_move_ulps)} of its "
            f"row's largest logit, and the smallest top-2 gap seen was {ulps_whole(result.min_gap_ulps)}: "
            + ("no token flipped." if result.rows_argmax_flip == 0 else
               f"{result.rows_argmax_flip:,} rows flipped their best token."))


def cost_sentence(study: ForkStudy) -> str:
    """The batch-invariant cost in the page's one unit, × the default's time, with what it measures."""
    return (f"Batch-invariant serving took **{study.cost:.2f}× the default's time** here: this CPU's kernels on a tiny "
            "model, on this server just now (1.0× = as fast as serving with this CPU's own torch kernels). It says "
            "nothing of a GPU: Thinking Machines measured 1.6× in vLLM (42 s against 26 s; "
            f"{inert(THINKING_MACHINES, line_start=False)}) and SGLang reports a 34% slowdown, 1.34× "
            f"({inert(SGLANG_DETERMINISTIC, line_start=False)}).")


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
    c3.metric("Batch-invariant cost", f"{study.cost:.2f}×", help="× the default's time: the serving thread's CPU time "
              "with batch-invariant kernels over that with this CPU's own kernels, for the same schedule (the ratio "
              "of the two numbers beside it).")
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
