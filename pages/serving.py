"""Page: Serving — identical requests to a tiny language model, batched with others, fork at temperature 0."""

from __future__ import annotations

import streamlit as st

from core.crowd.budget import Cost
from core.crowd.bytecache import FORK_STUDIES
from core.crowd.querystate import Field, FieldKind
from core.machines.devices import machine_facts
from core.serving.engine import (
    DEFAULT_DTYPE,
    DEFAULT_KERNELS,
    DEFAULT_PROMPT,
    DTYPES,
    MAX_BATCH,
    MAX_PROMPT,
    MAX_REQUESTS,
    ForkStudy,
    ServeSettings,
    fork_study,
    serving_cost,
)
from core.serving.model import load_record
from ui import glossary
from ui import serving_view as view
from ui.crowd import folded, heavy_section, over_budget
from ui.mitigations_view import story_link
from ui.navigation import ensure_app_navigation, next_page_link
from ui.progress import ProgressBar
from ui.render import inert
from ui.talk import talk_folded
from ui.urlstate import restore, share_box, sync

KERNEL_CHOICES = {"gpu_model": "MODEL of a GPU's batch-dependent kernel choices",
                  "default": "this CPU's own torch kernels"}
URL_FIELDS = [Field(key="sv_n", param="requests", kind=FieldKind.INT, low=1, high=MAX_REQUESTS),
              Field(key="sv_batch", param="max_batch", kind=FieldKind.INT, low=1, high=MAX_BATCH),
              Field(key="sv_prompt", param="prompt", kind=FieldKind.TEXT, max_length=MAX_PROMPT),
              Field(key="sv_dtype", param="format", kind=FieldKind.CHOICE, options=tuple(DTYPES)),
              Field(key="sv_kernels", param="kernels", kind=FieldKind.CHOICE, options=tuple(KERNEL_CHOICES)),
              Field(key="sv_invariant", param="invariant", kind=FieldKind.CHOICE, options=(False, True))]
DEFAULTS = {"sv_n": 40, "sv_batch": 16, "sv_prompt": DEFAULT_PROMPT, "sv_dtype": DEFAULT_DTYPE,
            "sv_kernels": DEFAULT_KERNELS, "sv_invariant": False}
SGLANG_FAQ = "https://docs.sglang.io/references/faq.html"  # shown as plain text: no live link on a linked page


def controls() -> tuple[ServeSettings, dict[str, str]]:
    st.subheader("The server")
    c1, c2, c3 = st.columns(3)
    n = int(c1.number_input("Identical requests", min_value=1, max_value=MAX_REQUESTS, step=10, key="sv_n",
                            help="How many times the same prompt is sent; half as many other requests arrive too."))
    batch = int(c2.slider("Server load: maximum batch", 1, MAX_BATCH, key="sv_batch",
                          help="At each step the server decodes every running request in one batch, up to this many."))
    prompt = c3.text_input("Prompt", max_chars=MAX_PROMPT, key="sv_prompt",
                           help="Lower-case letters, spaces, commas and full stops (the model's alphabet).")
    c4, c5, c6 = st.columns(3)
    dtype = c4.radio("Format", list(DTYPES), key="sv_dtype", horizontal=True)
    kernels = c5.radio("Ordinary kernels", list(KERNEL_CHOICES), format_func=KERNEL_CHOICES.get, key="sv_kernels")
    c6.toggle("Batch-invariant kernels", key="sv_invariant",
              help="Show the run with kernels whose result for a request never depends on its batch.")
    s = ServeSettings(requests=n, max_batch=batch, prompt=prompt, dtype=dtype, kernels=kernels)
    problems = s.problems()
    if "prompt" in problems:
        c3.error(inert(problems["prompt"]), icon=":material/error:")
    return s, problems


def serve(s: ServeSettings, cost: Cost, punch) -> ForkStudy | None:
    study = FORK_STUDIES.get(s)  # finished studies, shared by every visitor: deterministic for their settings
    if study is not None:
        return study
    if not cost.fits:
        over_budget(cost, [], kept=False)
        return None
    with heavy_section(cost, "this serving run"):
        bar = ProgressBar(punch, "Serving…", say=lambda p: f"Serving live on this server: {p.what}")
        study = FORK_STUDIES.get_or_compute(s, lambda: fork_study(s, bar))
        bar.empty()
    return study


def explain(study: ForkStudy, invariant_on: bool) -> None:
    shown = study.invariant if invariant_on else study.ordinary
    moves = view.measured_moves(shown)
    st.markdown(
        "**Why.** A server decodes every waiting request in one batch, and many kernels pick other reduction orders "
        "for other batch sizes (split-K: a matmul's inner sum cut into pieces that are added at the end; in "
        "attention, the number of pieces the keys are cut into), so one request's logits depend on its company. "
        "Where the two best tokens are nearly tied, the company decides the answer. " + moves,
        help=glossary.help_for(moves, "logit_rows", "top2_gap"))  # the measured sentence's terms, first used here
    st.markdown(
        "**The fix** is to fix the reduction order where it matters: **batch-invariant kernels**, one matmul "
        "configuration for every batch, RMSNorm and attention as loops in a fixed order over each request's own "
        "values. " + view.cost_sentence(study))
    # what is folded is made only once opened: a room opening the link pays for its first screen
    with folded("Every completion, and the gap where each departs", "sv_open_completions") as open_:
        if open_:
            view.completions(shown)
            st.caption(f"Greedy decoding (the largest logit wins; an exact tie goes to the earlier character). "
                       f"{view.batch_sizes(shown)}. A gap is between the two largest logits of the lone run at the "
                       "token where a request departs from it, in ULPs of the larger one.")
    with folded("How rare is a fork? (measured on the identical requests)", "sv_open_rarity") as open_:
        if open_:
            view.rarity(shown)
            if shown.settings.kernels == "default" and not invariant_on:
                st.caption(view.own_kernels_note(shown, machine_facts().get("blas")))
    with folded("What batch-invariant serving costs here", "sv_open_cost") as open_:
        if open_:
            view.cost(study)


def takeaway() -> None:
    with folded("Temperature 0 is not enough: what else changes a request's logits", "sv_open_more") as open_:
        if open_:
            st.markdown(
                "The batch is the main cause, not the only one. What else a server changes from one request to "
                "the next can move the logits too: the padding of a batch and the sequence lengths in it (kernels "
                "pick their split by shape), chunked prefill (a prompt prefilled in other chunks is reduced in "
                "other pieces), and a prefix cache (a cached prefix was computed with other company than a fresh "
                "one). SGLang's FAQ attributes most of the non-determinism to dynamic batching and the rest to "
                f"prefix caching ({inert(SGLANG_FAQ, line_start=False)}); Thinking Machines find a forward pass's "
                "kernels run-to-run deterministic and trace the variation to the batch; their batch-invariant "
                "attention also reduces a request's keys in the same order whether they come from the KV cache or "
                "from this step's prefill, with a fixed split size "
                f"({inert(view.THINKING_MACHINES, line_start=False)}). This page's engine "
                "models the batch and the padding of prompts; it has no chunked prefill and no prefix cache.")
            st.markdown("The settings that make your own runs reproducible, and what each costs:")
            story_link("pages/reproducible.py", "Make my runs reproducible", ":material/checklist:")
    with folded("The model, and how to serve or train it yourself", "sv_open_model") as open_:
        if open_:
            record = load_record()
            st.caption(f"The model: {record.parameters:,} parameters, character level, trained on the CPU in "
                       f"{record.train_seconds:.0f} s on {inert(record.corpus)}; weights SHA-256 "
                       f"{record.sha256[:16]}…. The GPU kernels are a MODEL (split-K and split-KV counts chosen by "
                       "the batch size, computed exactly on this CPU); the CPU kernels are this server's own.",
                       help=glossary.help_texts("split_k", "split_kv"))
            st.markdown("On your own machine, in a checkout of this app:")
            st.code(f"{record.command}\npython -m scripts.serve_fork --requests 200 --max-batch 16", language="bash")


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("sv", URL_FIELDS, DEFAULTS)
    st.title("Temperature 0, different answers")
    punch = st.container(key="punchline")  # the count of distinct completions: first screen
    st.markdown("The same prompt, sent many times to a tiny language model behind a server that batches whatever "
                "is waiting. Decoding is greedy (temperature 0), so every copy should come back as the request "
                "served alone does.")
    with talk_folded("The server: requests, load, prompt, format and kernels"):  # folded in presenter mode: 3 screens
        s, problems = controls()
        share_box(sync(URL_FIELDS), url_notes)
    if problems:
        punch.info("Change the settings below to serve: " + inert("; ".join(problems.values())),
                   icon=":material/edit:")
        next_page_link("serving")
        return
    study = serve(s, serving_cost(s), punch)
    if study is None:
        next_page_link("serving")
        return
    invariant_on = bool(st.session_state.get("sv_invariant"))
    view.punchline(punch, study, invariant_on)
    explain(study, invariant_on)
    takeaway()
    next_page_link("serving")


main()
