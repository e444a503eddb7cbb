"""The trust radius of a walk on the GP, following the model's force error.

A band's relaxation (:mod:`asebo.neb.relax`) and a saddle search's walk
(:mod:`asebo.saddle.model_search`) may stray only a trust radius from the configurations
computed (:func:`distance_to`). After each call the radius is judged by how well the GP
predicted the forces just computed, as a trust-region method judges its quadratic model
(J. Nocedal and S. J. Wright, "Numerical Optimization", Springer (2006), algorithm 4.1,
with the forces in place of the energy's decrease): where the largest atomic error of
the prediction is below ``good`` times the largest computed force (or ``fmax``) and the
walk was stopped by the radius, the radius doubles up to its largest; where the error
exceeds that force, it halves down to its smallest
(:class:`asebo.optimize.settings.WalkTrustSettings`).
"""

import numpy as np

from asebo.optimize.settings import WalkTrustSettings

DEFAULT_WALK = WalkTrustSettings()  # the defaults of the band and the saddle search


def largest_norm(forces):
    """The largest atomic norm of ``forces`` (n, 3)."""
    return float(np.sqrt((np.asarray(forces) ** 2).sum(axis=1)).max())


def adapted_radius(radius, computed, predicted, fmax, stopped, largest, walk=DEFAULT_WALK):
    """The trust radius after a call.

    Parameters
    ----------
    radius : float
        Å, the radius of the walk that chose the configuration computed.
    computed, predicted : array (n, 3)
        eV/Å, the forces computed there and the GP's prediction before the call (the
        atoms the walk moves).
    fmax : float
        eV/Å, the convergence criterion: the force scale below which errors are judged
        against ``fmax``.
    stopped : bool
        Whether the radius stopped the walk.
    largest : float
        Å, the largest radius.
    walk : asebo.optimize.settings.WalkTrustSettings
        ``good`` and the smallest radius.

    Returns
    -------
    float
    """
    error = largest_norm(np.asarray(computed) - np.asarray(predicted))
    scale = max(largest_norm(computed), fmax)
    if error < walk.good * scale and stopped:
        return min(2 * radius, largest)
    if error > scale:
        return max(radius / 2, walk.min_radius)
    return radius


def cut_back(inside, step, outside, bisections=WalkTrustSettings.bisections):
    """The point ``inside + t step``, t in [0, 1], where ``outside`` begins, by
    ``bisections`` halvings.

    ``inside`` (any shape) is not ``outside``; ``outside`` takes a point of its shape and
    says whether it lies beyond the trust radius.
    """
    low, high = 0.0, 1.0
    for _ in range(bisections):
        middle = 0.5 * (low + high)
        if outside(inside + middle * step):
            high = middle
        else:
            low = middle
    return inside + low * step


def distance_to(known, positions):
    """The largest atomic displacement (Å) from ``positions`` (n, 3) to the nearest of
    ``known`` (k, n, 3)."""
    return float(np.sqrt(((known - positions) ** 2).sum(axis=2)).max(axis=1).min())
