"""Experiment files: the shipped ones load, bad ones fail with one line naming the file and key."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from recallkit.empirics.experiment import SafeExpression, load_experiment
from recallkit.theory.errors import InputError
from tests.experiment_texts import TINY_THREE_STEP_BODY

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = [
    "tr_fig2_attention_only", "tr_fig3_attention_mlp", "tr_fig4_mlp_width", "tr_fig5_adam", "tr_fig6_adam",
    "tr_fig7_adam", "tr_fig2_heatmap", "geo_dmin_learned_vs_frozen", "geo_capacity", "assoc_memory_linear",
    "assoc_memory_mlp", "tr_fig3_attention_mlp_rank2", "tr_fig4_mlp_width_rank2", "tr_fig1a_capacity",
]
# experiments with a preset sized for one large GPU
GPU_PRESETS = ["tr_fig2_attention_only", "tr_fig3_attention_mlp", "tr_fig4_mlp_width", "tr_fig3_attention_mlp_rank2",
               "tr_fig4_mlp_width_rank2"]

MINIMAL = """
name = "tiny"
task = "token_retrieval"
model = "attention-only"
trainer = "three_step"
thresholds = [0.1]
""" + TINY_THREE_STEP_BODY + """min = 4
max = 64
[presets.quick]
V = [32, 64, 128]
seeds = [0, 1]
[presets.paper]
V = [256]
seeds = [0]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_shipped_experiments_load(name, preset):
    exp = load_experiment(name, preset)
    assert exp.name == name and exp.preset == preset
    assert exp.lines and exp.seeds and exp.base_values


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_gpu_presets_load_and_use_curves_with_relative_thresholds(name):
    exp = load_experiment(name, "gpu")
    assert exp.search.method == "curve" and exp.relative_thresholds and len(exp.seeds) >= 8
    assert max(exp.base_values) >= 1024 and exp.planned_runs() < 5000


def test_config_follows_the_line_and_floors_sizes(tmp_path):
    exp = load_experiment(write(tmp_path, MINIMAL))
    cfg = exp.build_config(exp.lines[0], 256, 48, 1)
    assert cfg == {"task": "token_retrieval", "model": "attention-only", "trainer": "three_step", "seed": 1,
                   "V": 256, "d": 48, "N": math.floor(256 * math.log(256)), "L": 16, "eta": 1.0, "gamma": 1e7}


def test_expressions_in_fixed_parameters(tmp_path):
    text = MINIMAL.replace('trainer = "three_step"', 'trainer = "adam"').replace(
        "eta = 1.0\ngamma = 1e7", 'lr = "0.1/sqrt(d)"\nepochs = 2\nbatch_size = "floor(N/16)"')
    exp = load_experiment(write(tmp_path, text))
    cfg = exp.build_config(exp.lines[0], 128, 16, 0)
    assert cfg["batch_size"] == math.floor(math.floor(128 * math.log(128)) / 16)
    assert isinstance(cfg["batch_size"], int)
    assert cfg["lr"] == pytest.approx(0.1 / 4)


def test_preset_selects_lines_and_overrides(tmp_path):
    text = MINIMAL.replace('[fixed]', '[[lines]]\nscaling = "N=V**1.5, L=V**0.5"\nlabel = "big N"\n[fixed]')
    text = text.replace("seeds = [0, 1]", 'seeds = [0, 1]\nlines = ["big N"]\nsearch = { resolution = 0.2 }')
    exp = load_experiment(write(tmp_path, text))
    assert [ln.label for ln in exp.lines] == ["big N"]
    assert exp.search.resolution == 0.2 and exp.search.max == 64
    assert len(load_experiment(write(tmp_path, text), "paper").lines) == 2


@pytest.mark.parametrize("old,new,message", [
    ("V = [32, 64, 128]", "V = [32, 64, -3]", "x.toml: presets.quick.V[2]: expected a positive integer, got -3"),
    ("V = [32, 64, 128]", "V = [32, 0]", "x.toml: presets.quick.V[1]: expected a positive integer, got 0"),
    ("max = 64", "max = 1000000", "x.toml: search.max: 1000000 is above the limit 16384 for d"),
    ("gamma = 1e7", 'gamma = "1e7*Q"', "x.toml: fixed.gamma: unknown symbol 'Q'"),
    ('name = "tiny"', 'name = "tiny"\ncolour = 3', "x.toml: unknown key 'colour'"),
    ("[search]", "[search]\nstep = 2", "x.toml: search: unknown key 'step'"),
    ("seeds = [0, 1]", "seeds = [0, 1]\nepochs = 3", "x.toml: presets.quick: unknown key 'epochs'"),
    ('scaling = "N=V*log(V), L=V**0.5"', 'scaling = "N=V*log(V), L=W"', "x.toml: lines[0].scaling: unknown symbol 'W'"),
    ('kind', 'kind', None),
    ("eta = 1.0", 'eta = "__import__(\'os\').system(\'touch PWNED\')"', "x.toml: fixed.eta:"),
    ("eta = 1.0", 'eta = "d.__class__"', "x.toml: fixed.eta:"),
    ("eta = 1.0", 'eta = "(lambda: 1)()"', "x.toml: fixed.eta:"),
    ("eta = 1.0", "eta = 1.0\nbogus = 2", "bogus: unknown key for task token_retrieval"),
    ("thresholds = [0.1]", "thresholds = [1.5]", "x.toml: thresholds[0]: expected a number in (0, 1], got 1.5"),
])
def test_bad_files_give_one_line_errors(tmp_path, monkeypatch, old, new, message):
    monkeypatch.chdir(tmp_path)
    if message is None:  # the file as is must load (guards the test's own template)
        load_experiment(write(tmp_path, MINIMAL))
        return
    assert old in MINIMAL
    with pytest.raises(InputError) as info:
        load_experiment(write(tmp_path, MINIMAL.replace(old, new, 1)))
    text = str(info.value)
    assert "\n" not in text
    assert message in text, text
    assert not (tmp_path / "PWNED").exists()


def test_malformed_toml_and_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"x.toml: malformed TOML"):
        load_experiment(write(tmp_path, "name = \n"))
    with pytest.raises(InputError, match=r"nope.toml: no such experiment file"):
        load_experiment(tmp_path / "nope.toml")
    with pytest.raises(InputError, match=r"presets: no preset 'huge'"):
        load_experiment(write(tmp_path, MINIMAL), "huge")


def test_size_computed_by_a_line_is_checked(tmp_path):
    text = MINIMAL.replace('"N=V*log(V), L=V**0.5"', '"N=V*log(V), L=V**0.5-20"')
    with pytest.raises(InputError, match=r"L at V=32, d=4: expected a positive integer, got -15"):
        load_experiment(write(tmp_path, text))


def test_safe_expression_whitelist():
    expr = SafeExpression("floor(N/16) + Max(d, 2)**2 - log(V)", {"N", "d", "V"}, "here")
    assert expr.evaluate({"N": 100, "d": 3, "V": math.e}) == 6 + 9 - 1
    for hostile in ("open('x')", "N.real", "[N]", "N if N else 1", "'a'", "N < 3"):
        with pytest.raises(InputError, match="here:"):
            SafeExpression(hostile, {"N"}, "here")


CLAIMS = """
[[lines]]
scaling = "N=V**1.5, L=V**0.5"
label = "steep"

[[claims]]
id = "n-regime"
text = "V log V needs more parameters than V^1.5"
relation = "level >"
a = { line = "N=V*log(V), L=V**0.5", threshold = 0.1 }
b = { line = "steep" }
provenance = "paper-reported: Fig 2(c)"
"""


def test_claims_table_is_read_from_the_file(tmp_path):
    text = MINIMAL.replace("[fixed]", CLAIMS.strip() + "\n[fixed]")
    exp = load_experiment(write(tmp_path, text))
    (claim,) = exp.claims
    assert (claim.id, claim.relation, claim.provenance) == ("n-regime", "level >", "paper-reported: Fig 2(c)")
    assert (claim.a.line, claim.a.threshold, claim.a.relative, claim.a.experiment) == (
        "N=V*log(V), L=V**0.5", 0.1, False, None)
    assert claim.b.line == "steep" and claim.b.threshold is None and claim.alpha is None
    assert exp.to_dict()["claims"][0]["id"] == "n-regime"


@pytest.mark.parametrize("old,new,message", [
    ('b = { line = "steep" }', 'b = { line = "stepe" }', "claims[0].b.line: no line labelled 'stepe' in this experiment"),
    ('relation = "level >"', 'relation = "level >="', "claims[0].relation: expected one of"),
    ('id = "n-regime"', 'id = "n-regime"\nweight = 2', "claims[0]: unknown key 'weight'"),
    ('b = { line = "steep" }', 'b = { line = "steep", threshold = 0.5 }', "claims[0].b.threshold: 0.5 is not one of"),
])
def test_a_bad_claim_names_the_field(tmp_path, old, new, message):
    text = MINIMAL.replace("[fixed]", CLAIMS.strip().replace(old, new) + "\n[fixed]")
    with pytest.raises(InputError) as info:
        load_experiment(write(tmp_path, text))
    assert "\n" not in str(info.value) and str(info.value).startswith(str(tmp_path / "x.toml"))
    assert message in str(info.value), str(info.value)


@pytest.mark.parametrize("reader", ["experiment", "probe"])
def test_a_file_nested_100000_deep_is_one_line_not_a_recursion_error(tmp_path, reader):
    """tomllib recurses once per level; the file is refused before it is parsed."""
    from recallkit.systems.token_retrieval.judge import load_probe_grid

    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(InputError, match=r"deep\.toml: malformed TOML: nested deeper than \d+ levels"):
        (load_experiment if reader == "experiment" else load_probe_grid)(str(deep))
