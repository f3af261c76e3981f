"""Token retrieval under random non-orthogonal embeddings (Vural, Bietti, Soltanolkotabi, Wu, ICLR 2026).

See README.md in this folder for the model, what the paper states and what is derived here.
"""
from pathlib import Path

from recallkit.registry import PageKind, System, Task

SYSTEM = System(
    name="token_retrieval",
    title="Token retrieval: attention-only and attention-MLP, three-step GD and Adam",
    root=Path(__file__).resolve().parent,
    tasks=(Task("token_retrieval", config=f"{__name__}.config:TokenRetrievalConfig",
                problem=f"{__name__}.task:TokenRetrieval", trainers=("three_step", "two_step_then_fit", "adam", "adamw"),
                run_metrics=("attention_mass",)),),
    # tr_centring beside Fig 2: the mean-bias-free variant and its pack's phase diagram after the plain model's
    report=("tr_fig1a_capacity", "tr_fig2_attention_only", "tr_centring", "tr_fig3_attention_mlp", "tr_fig3_attention_mlp_rank2",
            "tr_fig4_mlp_width_rank2", "tr_fig5_adam", "tr_fig6_adam"),
    report_steps=(f"{__name__}.steps:term_probe_entry", f"{__name__}.steps:gradient_access_entry"),
    probe=f"{__name__}.judge:run_probe",
    finite_size=f"{__name__}.judge:finite_size_factor",
    all_terms=f"{__name__}.judge:all_terms_prediction",
    prediction_source=f"{__name__}.predictions:PREDICTION_SOURCE",
    page_kinds=(PageKind("term_probes", pages=f"{__name__}.pages:probe_pages", rows=f"{__name__}.pages:summary_rows",
                         compared="each term's fitted exponent against the pack's, per variable (TOST)",
                         own_intro=True),
                PageKind("gradient_access", pages=f"{__name__}.pages:gradient_access_pages",
                         rows=f"{__name__}.pages:gradient_access_rows",
                         compared="the d each decoder of the noisy first gradient needs against the gradient-access "
                                  "lower bound's d (DERIVATION.md §7.4)")),
)
