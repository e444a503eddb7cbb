"""The first-order saddle point of the GP's posterior mean near a configuration.

Sella's partitioned rational-function optimization in internal coordinates
(E. D. Hermes, K. Sargsyan, H. N. Najm and J. Zádor, J. Chem. Theory Comput. 18, 6974
(2022)) walks on the GP's mean (:class:`asebo.neb.band.ModelCalculator`), whose
gradients cost no calculator call: Sella's iterative diagonalisation finds the model's
lowest mode and its steps maximise the energy along it and minimise it along the
others. The walk may stray only a trust radius from the configurations computed, as
the band's relaxation in :mod:`asebo.neb.relax`; the first step beyond is cut back to
the boundary and the walk stops there, so that the next call is made where the GP
still knows the surface. Where the GP's prior calculator fails (an xTB SCF that does not
converge), the walk stops at the last configuration the model had a value for.
"""

from asebo.model.priors import PriorCalculationError
from asebo.neb.band import ModelCalculator
from asebo.neb.relax import distance_to
from asebo.neb.trust_radius import cut_back


def saddle_on_model(gp, atoms, known, trust_radius, fmax, steps):
    """Walk from ``atoms``' positions towards the GP's saddle point.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted to the configurations computed.
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

    Returns
    -------
    positions : array (n, 3)
    reason : str
        ``'model saddle'``, ``'trust radius'``, ``'steps'`` or ``'prior failed'``.
    """
    from sella import Sella  # asebo[sella]

    model = atoms.copy()
    model.calc = ModelCalculator(gp)
    walk = Sella(model, internal=True, order=1, logfile=None, trajectory=None)
    last = model.positions.copy()  # (n, 3)

    def beyond(positions):
        return distance_to(known, positions) > trust_radius

    try:
        for converged in walk.irun(fmax=fmax, steps=steps):
            now = model.positions.copy()
            if beyond(now):
                model.positions = cut_back(last, now - last, beyond)
                model.get_forces()  # the model has a value there
                return model.positions.copy(), "trust radius"
            if converged:
                return now, "model saddle"
            last = now
    except PriorCalculationError:
        return last, "prior failed"
    return last, "steps"
