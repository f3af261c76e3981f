"""What ``recallkit sweep`` prints per check: a fraction of the ceiling is named as one (it printed "accuracy >=
0.25" for the check at 0.25 x ceiling, merged with an absolute 0.25), and a curve's interpolated size is shown to
three figures, not six."""
from __future__ import annotations

from types import SimpleNamespace

from recallkit.cli_sweep import _format_points


def _point(threshold, relative, V, d, censored=False):
    return SimpleNamespace(line="l", threshold=threshold, relative=relative, base_value=V, size_value=d,
                           censored=censored)


def test_a_fraction_of_the_ceiling_is_its_own_row_and_sizes_read_as_a_person_writes_them():
    experiment = SimpleNamespace(kind="min_size", lines=[SimpleNamespace(label="l")], base="V", size="d",
                                 metric="accuracy", values_of=lambda index: [64, 128], base_values=[64, 128])
    points = [_point(0.25, False, 64, 45.25483399593904), _point(0.25, False, 128, 181.0193359837562),
              _point(0.25, True, 64, 22.627416997969522), _point(0.25, True, 128, 64.0, censored=False)]
    out = _format_points(SimpleNamespace(experiment=experiment, points=points, violations=[]))
    assert out == ["line l",
                   "  accuracy >= 0.25:  V=64: d=45.3;  V=128: d=181",
                   "  accuracy >= 0.25 x ceiling:  V=64: d=22.6;  V=128: d=64"]
