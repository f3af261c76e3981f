import numpy as np
import pytest
import torch

from recallkit.empirics.config import parse_config
from recallkit.systems.token_retrieval.reference import ReferenceTokenRetrieval
from recallkit.empirics.tasks import build_problem
from recallkit.systems.token_retrieval.task import draw_instance, draw_samples
from recallkit.empirics.trainers import three_step
from recallkit.theory.errors import InputError

CPU = torch.device("cpu")


TR = dict(task="token_retrieval", model="attention-only", trainer="three_step", V=64, d=16, L=6, N=300, n_eval=500, eta=1.0, gamma=10.0)


def problem_for(*configs):
    return build_problem([parse_config(c) for c in configs], CPU)


def test_instance_follows_the_spec():
    inst = draw_instance(0, V=64, d=16, m=40)
    for key in ("E", "U"):
        assert torch.allclose(inst[key].norm(dim=1), torch.ones(64), atol=1e-6)
    assert sorted(inst["perm"].tolist()) == list(range(64))
    assert inst["W1"].shape == (40, 16)
    # rows N(0, I/d): squared row norms average about 1
    assert 0.7 < inst["W1"].pow(2).sum(1).mean().item() < 1.3
    tokens, positions = draw_samples(0, "train", 100, 64, 6)
    assert tokens.shape == (100, 6) and positions.max() < 6 and tokens.max() < 64


def test_a_models_data_does_not_depend_on_its_batch():
    alone = problem_for({**TR, "seed": 5})
    together = problem_for({**TR, "seed": 1}, {**TR, "seed": 5})
    assert torch.equal(alone.E[0], together.E[1])
    assert torch.equal(alone.train["tokens"][0], together.train["tokens"][1])
    assert torch.equal(alone.eval["labels"][0], together.eval["labels"][1])
    assert not torch.equal(together.E[0], together.E[1])
    assert not torch.equal(alone.train["tokens"][0], alone.eval["tokens"][0][:300])


def test_labels_are_the_permuted_informative_token():
    p = problem_for(TR)
    tokens, positions, labels = p.train["tokens"][0], p.train["positions"][0], p.train["labels"][0]
    assert tokens.dtype == torch.int16  # V = 64: the smallest type that holds it
    assert torch.equal(labels, p.perm[0][tokens[torch.arange(300), positions].long()])


@pytest.mark.parametrize(
    "extra",
    [{}, {"model": "attention-mlp", "m": 48}, {"model": "attention-mlp", "m": 48, "features": "relu_centred"},
     # the attended vector's three paths (systems/token_retrieval/task.py): dense mass matrix (V <= 2L),
     # embedding_bag with the bmm + gather backward (the default above, V = 64, L = 6), and pure embedding_bag (V > 32L)
     {"L": 40}, {"V": 256, "L": 4}],
    ids=["attention_only_bag_bmm_backward", "mlp", "mlp_centred", "dense_mass", "bag_sparse_backward"],
)
def test_three_step_equals_the_hand_derived_float64_reference(extra):
    cfg = {**TR, **extra}
    params, _ = three_step(problem_for(cfg), eta=[1.0], gamma=[10.0])
    ref = ReferenceTokenRetrieval(0, cfg["V"], 16, cfg["L"], 300, 500, m=cfg.get("m"),
                                  features=cfg.get("features", "relu")).three_step(1.0, 10.0)
    # float32 autograd against float64 hand-written gradients: agree to float32 rounding
    for ours, theirs in ((params["W"][0], ref["W1"]), (params["V"][0], ref["V2"])):
        theirs = torch.from_numpy(theirs).float()
        assert torch.allclose(ours, theirs, rtol=1e-4, atol=1e-5 * theirs.abs().max().item())
    metrics = build_problem([parse_config(cfg)], CPU).evaluate(params)
    assert metrics["accuracy"].item() == pytest.approx(ref["accuracy"], abs=2 / 500)
    assert metrics["attention_mass"].item() == pytest.approx(ref["attention_mass"], rel=1e-4)


def test_mlp_feature_options():
    with pytest.raises(InputError, match="features: expected one of relu, relu_centred, relu_normalised"):
        parse_config({**TR, "model": "attention-mlp", "m": 48, "features": "tanh"})
    p = problem_for({**TR, "model": "attention-mlp", "m": 48, "features": "relu_centred"})
    o = torch.randn(1, 5, 16)
    assert torch.allclose(p._mlp_features(o).mean(-1), torch.zeros(1, 5), atol=1e-6)
    p.features = "relu_normalised"
    assert torch.allclose(p._mlp_features(o).std(-1), torch.ones(1, 5), atol=1e-4)
    p.features = "relu"
    assert (p._mlp_features(o) >= 0).all()


def test_memorisation_tasks_have_the_right_labels_and_shapes():
    am = problem_for(dict(task="assoc_memory", model="mlp", trainer="adamw", N=20, d=8, m=16, lr=0.01, steps=1))
    assert am.params["W1"].shape == (1, 16, 8) and am.params["W2"].shape == (1, 8, 16)
    loss, acc = am.loss(am.params)
    assert loss.shape == (1,) and 0 <= acc.value().item() <= 1
    fb = problem_for(dict(task="fact_bijections", model="frozen-subjects", trainer="adam", N=10, R=3, d=8, lr=0.01, steps=1))
    assert "Es" not in fb.params and fb.n_train == 30
    for r in range(3):
        assert sorted(fb.bijections[0, r].tolist()) == list(range(10))
    assert fb.labels[0, 2 * 10 + 7].item() == fb.bijections[0, 2, 7].item()
    learned = problem_for(dict(task="fact_bijections", model="learned", trainer="adam", N=10, R=3, d=8, lr=0.01, steps=1))
    assert torch.equal(learned.params["Es"], fb.frozen_subjects)  # the control differs only by freezing


def test_three_step_gradient_accumulated_over_sample_chunks_equals_one_pass():
    whole, _ = three_step(problem_for(TR), eta=[1.0], gamma=[10.0])
    chunked_problem = problem_for(TR)
    chunked_problem.train_chunk = 70  # 300 samples -> 5 chunks, the last one partial
    chunked, _ = three_step(chunked_problem, eta=[1.0], gamma=[10.0])
    for name in ("W", "V"):
        assert torch.allclose(chunked[name], whole[name], rtol=1e-5, atol=1e-6 * whole[name].abs().max().item())


@pytest.mark.parametrize("options", [
    {},  # attention-only, one embedding_bag
    {"V": 16, "L": 10},  # the dense mass path (V <= 2L)
    {"model": "attention-mlp", "m": 24, "features": "relu_centred"},
    {"model": "attention-mlp", "m": 24, "features": "abs_centred", "mlp_input": "content"},
], ids=["bag", "dense_mass", "mlp_relu_centred", "mlp_abs_content"])
def test_step_one_gradient_written_out_equals_autograds(options):
    """value_gradient_at_zero (step 1 without the products with V = 0) is the gradient autograd takes there,
    over chunks of items too."""
    from recallkit.empirics.trainers import _grad

    problem = problem_for(*[{**TR, **options, "seed": s} for s in range(2)])
    problem.train_chunk = 70  # 300 samples -> 5 chunks, the last one partial
    zero = {k: torch.zeros_like(v) for k, v in problem.params.items()}
    expected = _grad(problem, zero, "V")
    written_out = problem.value_gradient_at_zero()
    assert expected.abs().max() > 0
    assert torch.allclose(written_out, expected, rtol=1e-5, atol=1e-6 * expected.abs().max().item())


def test_chunked_evaluation_does_not_depend_on_the_batch():
    configs = [{**TR, "model": "attention-mlp", "m": 32, "seed": s} for s in range(3)]
    batched = problem_for(*configs)
    batched.eval_chunk = 64  # 500 fresh samples -> 8 chunks
    params, _ = three_step(batched, eta=[1.0] * 3, gamma=[10.0] * 3)
    together = batched.evaluate(params)
    alone = problem_for(configs[2])
    alone.eval_chunk = 64
    single = alone.evaluate({k: v[2:3] for k, v in params.items()})
    for key in ("accuracy", "train_accuracy", "loss", "attention_mass"):
        assert together[key][2].item() == single[key][0].item(), key
    assert (together["accuracy"] * 500).tolist() == [round(x * 500) for x in together["accuracy"].tolist()]


def test_the_hand_written_cross_entropy_equals_torchs_and_stays_finite():
    from recallkit.empirics.tasks import cross_entropy_and_accuracy

    gen = torch.Generator().manual_seed(0)
    for scale in (1.0, 1e6):  # 1e6: the size of logits after a gamma = 1e7 step
        logits = (torch.randn(3, 40, 17, generator=gen) * scale).requires_grad_(True)
        labels = torch.randint(17, (3, 40), generator=gen)
        loss, accuracy = cross_entropy_and_accuracy(logits, labels)
        (grad,) = torch.autograd.grad((loss * torch.tensor([1.0, 2.0, 0.5])).sum(), [logits])
        ref_logits = logits.detach().double().requires_grad_(True)
        ref = torch.stack([torch.nn.functional.cross_entropy(ref_logits[k], labels[k]) for k in range(3)])
        (ref_grad,) = torch.autograd.grad((ref * torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)).sum(), [ref_logits])
        assert torch.isfinite(loss).all()
        assert torch.allclose(loss.double(), ref.detach(), rtol=1e-6, atol=1e-6 * scale)
        assert torch.allclose(grad.double(), ref_grad, atol=1e-7)
        assert torch.equal(accuracy.value(), (logits.argmax(-1) == labels).float().mean(1))


def test_accuracy_on_demand_answers_exactly_like_the_argmax():
    from recallkit.empirics.tasks import Accuracy, cross_entropy_and_accuracy, exceeds

    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(5, 50, 8, generator=gen)
    labels = logits.argmax(-1)
    labels[:, :10] = torch.randint(8, (5, 10), generator=gen)  # about 90% right
    logits[1] = 0.0  # every row a tie: argmax is index 0, so only label-0 rows count as right
    logits[2, :, :] = logits[2].max() + 1.0
    logits[2, :5, 3] = float("nan")  # argmax picks the NaN
    labels[2, :5] = 3
    exact = (logits.argmax(-1) == labels).float().mean(1)
    for threshold in (0.0, 0.1, 0.5, 0.85, 0.95, 1.0):
        t = torch.full((5,), threshold)
        _, lazy = cross_entropy_and_accuracy(logits.clone().requires_grad_(True), labels)
        assert torch.equal(lazy.exceeds(t), exact > t), threshold
        among = torch.tensor([True, False, True, False, True])
        assert torch.equal(exceeds(lazy, t, among), (exact > t) & among)
        assert torch.equal(exceeds(exact, t), exact > t)  # a plain tensor from another package's problem
    assert torch.equal(Accuracy(logits, labels).value(), exact)
