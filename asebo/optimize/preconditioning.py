r"""Coordinates of the trust box in which the search's bound is well conditioned.

In Cartesian coordinates the model's energy of a molecule is stiff along its bonds and
soft along its torsions: the curvatures of a hundred atoms span three orders of
magnitude, and a quasi-Newton method that starts from the identity needs many
iterations to learn them. With ``x = c + P y`` and ``P = H^{-1/2}`` for a model
Hessian ``H`` of the energy at the box's centre ``c``, the bound's Hessian in ``y`` is
close to the identity where ``H`` is close to the model's: L-BFGS in ``y`` is L-BFGS
in ``x`` with ``H^{-1}`` for its initial matrix (Nocedal and Wright, *Numerical
Optimization*, Springer (2006), sec. 7.2), and its first step a Newton step of ``H``
(the evaluations a search takes either way in docs/notes/large-molecules.md, "The
search's conditioning"). The trust box ``|x - c| <= r`` per coordinate is not a box in
``y``; the map ``x = c + r tanh(P y / r)``, coordinate by coordinate, keeps every
``y`` inside it, is ``x = c + P y`` to first order at the centre, and leaves the search
unconstrained (a transform of bounded variables in the manner of M. J. Box, *The
Computer Journal* 9, 67 (1966)).
"""

import numpy as np
import torch

from asebo.model.metric import EIGENVALUE_FLOOR, InternalMetric

INSIDE = 0.98
"""A start on or beyond the box's face enters the map at this fraction of the radius,
where ``tanh`` still passes a gradient (``1 - 0.98**2 = 0.04`` of it)."""


def metric_preconditioner(metric, positions, free):
    """:func:`preconditioner` at ``positions`` (n, 3) on the ``free`` (n, 3) coordinates
    from the Lindh model an internal-coordinate metric is built from
    (:class:`asebo.model.metric.InternalMetric`): the model's Gauss-Newton Hessian
    (:meth:`asebo.model.lindh.LindhModel.gauss_newton_hessian`), whose eigenvectors at
    the reference the metric's features follow. None for another metric or none."""
    if not isinstance(metric, InternalMetric):
        return None
    free = np.asarray(free, dtype=bool).ravel()  # (3n,)
    hessian = metric.model.gauss_newton_hessian(positions)  # (3n, 3n)
    return preconditioner(hessian[np.ix_(free, free)])


def preconditioner(hessian):
    """``P = H^{-1/2}`` (d, d) of a symmetric model Hessian ``hessian`` (d, d), eV/Å², and
    its inverse ``H^{1/2}``.

    Eigenvalues below :data:`asebo.model.metric.EIGENVALUE_FLOOR` times the largest
    (rigid motions, a model that curves down away from its reference) are raised to
    it, as in the kernel's metric.

    Returns
    -------
    transform, inverse : arrays (d, d)
    """
    values, vectors = np.linalg.eigh(np.asarray(hessian, dtype=np.float64))
    floor = EIGENVALUE_FLOOR * max(values.max(), 0.0)
    if floor <= 0.0:  # a model that does not curve up anywhere says nothing
        identity = np.eye(len(values))
        return identity, identity
    roots = np.sqrt(np.clip(values, floor, None))  # (d,)
    return (vectors / roots) @ vectors.T, (vectors * roots) @ vectors.T


class BoxCoordinates:
    """``x = c + r tanh(P y / r)``: every ``y`` a point of the trust box ``c +- r``.

    Parameters
    ----------
    centre : tensor (d,)
        The box's centre, free coordinates only.
    radius : float
        Half-width of the box, Å.
    transform, inverse : arrays (d, d)
        ``P`` and ``P^{-1}`` (:func:`preconditioner`).
    """

    def __init__(self, centre, radius, transform, inverse):
        self.centre = centre
        self.radius = float(radius)
        self.transform = torch.as_tensor(transform, dtype=centre.dtype)
        self.inverse = torch.as_tensor(inverse, dtype=centre.dtype)

    def to_box(self, y):
        """Free coordinates x (..., d) in the box of ``y`` (..., d); differentiable."""
        return self.centre + self.radius * torch.tanh(y @ self.transform.T / self.radius)

    def from_box(self, x):
        """``y`` (..., d) of free coordinates ``x`` (..., d), those on or beyond a face
        entering at :data:`INSIDE` times the radius."""
        scaled = ((x - self.centre) / self.radius).clamp(-INSIDE, INSIDE)
        return (self.radius * torch.atanh(scaled)) @ self.inverse.T
