"""The trainers flush subnormal floats on the CPU while they train (converged models otherwise spend most of
their time in the CPU's subnormal slow paths) and restore the setting afterwards; the cross-entropy's exp
floor leaves the loss as torch computes it."""
import torch

from recallkit.empirics.engine import run_configs
from recallkit.empirics.tasks import EXP_FLOOR, cross_entropy_and_accuracy
from recallkit.empirics.trainers import flush_denormals


def _subnormal_survives() -> bool:
    return bool((torch.tensor([1e-39]) * 1.0).item() != 0.0)


def test_subnormals_are_flushed_inside_a_training_and_restored_after():
    seen = []

    class Problem:
        params = {"W": torch.zeros(1)}

    @flush_denormals
    def trainer(problem):
        seen.append(_subnormal_survives())

    assert _subnormal_survives()
    trainer(Problem())
    assert seen == [False] and _subnormal_survives()
    run_configs([dict(task="assoc_memory", model="linear", trainer="adamw", lr=0.1, steps=3, N=8, d=4, seed=0)],
                device="cpu", progress=False)
    assert _subnormal_survives()


def test_the_exp_floor_keeps_the_loss_of_widely_spread_logits():
    logits = torch.tensor([[[0.0, -50.0, -90.0, -1e6], [3.0, 2.0, -200.0, -88.0]]])
    labels = torch.tensor([[0, 1]])
    loss, _ = cross_entropy_and_accuracy(logits, labels)
    reference = torch.nn.functional.cross_entropy(logits[0], labels[0])
    assert EXP_FLOOR == -87.0 and torch.allclose(loss[0], reference, rtol=0, atol=1e-6)


def test_the_engine_evaluates_the_trained_models_with_subnormals_flushed_too(monkeypatch):
    """A model trained with Adam to sharp attention has subnormal attention weights; evaluated outside the trainer's
    flush, its final evaluation took 25x the ones logged during training (tr_fig5_adam at V = 512)."""
    from recallkit.systems.assoc_memory.task import AssocMemory

    seen = []
    evaluate = AssocMemory.evaluate
    monkeypatch.setattr(AssocMemory, "evaluate", lambda self, params: seen.append(_subnormal_survives())
                        or evaluate(self, params))
    run_configs([dict(task="assoc_memory", model="linear", trainer="adamw", lr=0.1, steps=3, N=8, d=4, seed=0)],
                device="cpu", progress=False)
    assert seen and not any(seen) and _subnormal_survives()
