"""The experiment tr_centring: the plain and the centred attention-only model on the same line, instances and
seeds, judged against the mean-bias-free pack (the plain line for reference), with the two comparative claims.
The numbers of its quick preset are in the file and in DERIVATION.md §10 (a sweep takes about 100 s, too long here)."""
from recallkit.empirics.config import config_hash
from recallkit.empirics.experiment import load_experiment


def test_the_two_lines_differ_only_in_the_centring():
    exp = load_experiment("tr_centring", "quick")
    assert exp.pack == "token_retrieval_attn_centred"
    plain, centred = exp.lines
    assert plain.scaling == centred.scaling and plain.reference_note and not centred.reference_note
    a, b = (exp.build_config(line, 128, 40, 3) for line in (plain, centred))
    assert "centring" not in a and b.pop("centring") == "labels"
    assert a == b  # same instance, samples and schedule: the seed draws them, the centring changes step 3 only
    assert config_hash(exp.build_config(centred, 128, 40, 3)) != config_hash(a)


def test_claims_compare_the_plain_line_with_the_centred_one_on_level_and_slope():
    exp = load_experiment("tr_centring", "quick")
    claims = {c.id: c for c in exp.claims}
    assert {c.relation for c in claims.values()} == {"level >", "slope >"}
    for claim in claims.values():
        assert claim.a.line.startswith("plain") and claim.b.line.startswith("centred")
        assert claim.provenance.startswith("derived-here")
