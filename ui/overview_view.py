"""Drawing for the Overview (app.py's home page): the live hook on its first screen."""

from __future__ import annotations

import streamlit as st

from core.arith.exact import shortest_repr
from core.crowd.bytecache import GPU_NAMES, OVERVIEW_HOOKS
from core.machines.devices import available_devices
from core.machines.globalstate import PROCESS_THREADS
from core.recordings.store import cached_recordings, recordings_dir
from core.studies.overview import OverviewHook, overview_hook
from ui.cpu_vs_gpu_view import gpu_status


def live_hook() -> None:
    """The first screen's numbers: computed live on this server when the page opens (core.studies.overview)."""
    hook: OverviewHook = OVERVIEW_HOOKS.call(overview_hook, PROCESS_THREADS)  # milliseconds; frozen, shared
    t, sums = hook.triple, hook.sums
    with st.container(key="punchline"):
        left, right = st.columns(2)
        with left.container(border=True):
            st.markdown(f"**Add 0.1, 0.2 and 0.3 two ways** ({t.fmt.name}, live on this server's CPU)  \n"
                        f"`(0.1 + 0.2) + 0.3` = **{shortest_repr(t.left.result, t.fmt)}**  \n"
                        f"`0.1 + (0.2 + 0.3)` = **{shortest_repr(t.right.result, t.fmt)}**  \n"
                        + (f"{t.ulps_apart} representable value{'s' if t.ulps_apart != 1 else ''} apart: the grouping "
                           "decides the rounding." if t.differ else "The same bits here."))
        with right.container(border=True):
            rows = "  \n".join(f"torch.sum, {r.where} = **{r.value}**" for r in sums.rows)
            apart = sums.apart
            if apart is None:
                verdict = "This server gives torch one thread, so there is no split to compare here."
            elif apart:
                many = "s" if apart != 1 else ""  # the story's first ULP, said in words beside it
                verdict = (f"{apart:,} representable value{many} ({apart:,} ULP{many}) apart: the thread count "
                           "decides the grouping.")
            else:
                verdict = f"The same bits: {sums.why_same()}."
            st.markdown(f"**Sum {sums.settings.n:,} {sums.settings.dtype} values** (normal, seed 0; live on this "
                        f"server's CPU)  \n{rows}  \n{verdict}")


def gpu_note() -> None:
    """Where this app's GPU results come from (a live GPU, recordings, or the labelled model)."""
    st.markdown(gpu_status(*_recorded()))


def _gpus() -> list[str]:
    return [d.name for d in available_devices() if d.kind != "cpu"]


def _recorded():
    recs, _ = cached_recordings(recordings_dir())
    return recs, GPU_NAMES.call(_gpus)
