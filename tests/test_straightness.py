"""One definition of nearly straight bends and molecules, and the order of its thresholds."""

import dataclasses

import numpy as np
import pytest

from asebo.model import internals, metric
from asebo.model.straightness import NEARLY_STRAIGHT, NearlyStraight, is_near_linear


def symmetric_triatomic(angle, bond=1.2):
    """Positions (3, 3) of a triatomic with two bonds ``bond`` Å at ``angle`` rad."""
    half = angle / 2
    return np.array(
        [[-bond * np.sin(half), 0, 0], [0, bond * np.cos(half), 0], [bond * np.sin(half), 0, 0]]
    )


def test_thresholds_come_in_order_widest_last():
    s = NEARLY_STRAIGHT
    assert s.torsion_fade_start < s.straight_reference < s.near_linear_bend()
    assert s.near_linear_bend() < s.torsion_fade_end <= s.bonded_bend_limit < s.left_out_bend
    assert np.degrees(s.near_linear_bend()) == pytest.approx(150.87, abs=0.01)


def test_near_linear_bend_is_where_a_symmetric_triatomic_reaches_the_ratio():
    bend = NEARLY_STRAIGHT.near_linear_bend()
    centred = symmetric_triatomic(bend) - symmetric_triatomic(bend).mean(axis=0)
    s = np.linalg.svd(centred, compute_uv=False)
    assert s[1] / s[0] == pytest.approx(NEARLY_STRAIGHT.near_linear_ratio, rel=1e-12)
    assert not is_near_linear(symmetric_triatomic(bend - 1e-3))
    assert is_near_linear(symmetric_triatomic(bend + 1e-3))


@pytest.mark.parametrize(
    "field, degrees",
    [("straight_reference", 140.0), ("torsion_fade_end", 150.5), ("left_out_bend", 155.0)],
)
def test_thresholds_out_of_order_are_refused(field, degrees):
    with pytest.raises(ValueError, match="out of order"):
        dataclasses.replace(NEARLY_STRAIGHT, **{field: np.radians(degrees)})
    with pytest.raises(ValueError, match="out of order"):
        NearlyStraight(near_linear_ratio=0.3)  # a 125° bend: before torsions fade


def test_the_model_takes_its_thresholds_from_the_one_definition():
    assert internals.TORSION_FADE == (
        NEARLY_STRAIGHT.torsion_fade_start,
        NEARLY_STRAIGHT.torsion_fade_end,
    )
    assert metric.LINEAR_BOND_ANGLE == NEARLY_STRAIGHT.bonded_bend_limit
    assert metric.STRAIGHT_BEND == NEARLY_STRAIGHT.left_out_bend
