"""The first-order saddle point of the GP's posterior mean near a configuration.

Sella's partitioned rational-function optimization in internal coordinates, Cartesian
ones for a periodic system (E. D. Hermes, K. Sargsyan, H. N. Najm and J. Zádor, J. Chem.
Theory Comput. 18, 6974 (2022)), walks on the GP's mean
(:class:`asebo.optimize.model_calculators.ModelCalculator`), whose gradients cost no
calculator call: Sella's iterative diagonalisation finds the model's
lowest mode and its steps maximise the energy along it and minimise it along the
others. The walk may stray only a trust radius from the configurations computed, as
the band's relaxation in :mod:`asebo.neb.relax`; the first step beyond is cut back to
the boundary and the walk stops there, so that the next call is made where the GP
still knows the surface. Where the GP's prior calculator fails (an xTB SCF that does not
converge), the walk stops at the last configuration the model had a value for; where
the walk itself fails (Sella's ``Geometry update ODE is taking too long to converge``,
a ``LinAlgError``), at the last configuration it reached: a failed walk is a shorter
one, never the caller's exception.
"""

import numpy as np

from asebo.model.priors import PriorCalculationError
from asebo.optimize.settings import WalkTrustSettings
from asebo.optimize.walk_trust import cut_back, distance_to

WALK_FAILED = (RuntimeError, np.linalg.LinAlgError)
"""What Sella raises where its walk fails: a geometry update in internal coordinates that
does not converge, a Gram-Schmidt or restricted step that fails (``RuntimeError``), a
decomposition that does not converge."""


def saddle_on_model(
    surface,
    atoms,
    known,
    trust_radius,
    fmax,
    steps,
    bisections=WalkTrustSettings.bisections,
    internal=True,
):
    """Walk from ``atoms``' positions towards the saddle point of ``surface``.

    Parameters
    ----------
    surface : ase.calculators.calculator.Calculator
        The surface walked on: the GP's posterior mean fitted to the configurations
        computed (:class:`asebo.optimize.model_calculators.ModelCalculator`).
    atoms : ase.Atoms
        The start; copied with its constraints, not moved.
    known : array (k, n, 3)
        The configurations computed.
    trust_radius : float
        Å: the largest atomic displacement from the nearest of ``known``.
    fmax : float
        eV/Å: the walk ends where the model's largest atomic force is below.
    steps : int
        Sella's steps at most.
    bisections : int
        Halvings of the step that crosses the trust radius
        (:func:`asebo.optimize.walk_trust.cut_back`).
    internal : bool
        Sella's internal coordinates (a molecule's); False walks in Cartesian
        coordinates (a periodic system's, as Sella's ``internal=False``).

    Returns
    -------
    positions : array (n, 3)
    reason : str
        ``'model saddle'``, ``'trust radius'``, ``'steps'``, ``'prior failed'`` or
        ``'walk failed'`` (:data:`WALK_FAILED`).
    """
    from sella import Sella  # asebo[sella]

    model = atoms.copy()
    model.calc = surface
    last = model.positions.copy()  # (n, 3)

    def beyond(positions):
        return distance_to(known, positions) > trust_radius

    try:
        walk = Sella(model, internal=internal, order=1, logfile=None, trajectory=None)
        for converged in walk.irun(fmax=fmax, steps=steps):
            now = model.positions.copy()
            if beyond(now):
                model.positions = cut_back(last, now - last, beyond, bisections)
                model.get_forces()  # the model has a value there
                return model.positions.copy(), "trust radius"
            if converged:
                return now, "model saddle"
            last = now
    except PriorCalculationError:
        return last, "prior failed"
    except WALK_FAILED:
        return last, "walk failed"
    return last, "steps"
