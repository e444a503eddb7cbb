"""The saddle search's model: its prior and the guess it is built on."""

import numpy as np

from asebo.model.prior_names import AUTO
from asebo.optimize.build import build_surrogate
from asebo.optimize.observations import check_restart


def saddle_surrogate(atoms, restart, prior, kernel, gp_options):
    """The :class:`asebo.optimize.surrogate_model.Surrogate` of a saddle search from
    ``atoms`` (:func:`asebo.optimize.build.build_surrogate`, on the restart file's
    guess where it has one: :func:`search_start`), and why its prior was chosen (None
    unless chosen here: :func:`saddle_prior`). A periodic system takes
    :class:`asebo.BOOptimizer`'s periodic representation and prior, as a periodic
    band does."""
    periodic = bool(atoms.pbc.any())
    prior, why = (prior, None) if periodic else saddle_prior(prior, atoms)
    start = search_start(atoms, check_restart(restart))
    coordinates = {"numbers": atoms.numbers, "periodic": periodic}
    surrogate, _, _ = build_surrogate(
        start, coordinates, 3 * len(atoms), prior, kernel, {"gp_options": gp_options}
    )
    return surrogate, why


def saddle_prior(prior, atoms):
    """BOSaddle's ``prior`` argument for ``atoms`` and why (None unless chosen here):
    None and ``'auto'`` take :func:`asebo.model.priors.barrier_prior`'s GFN-xTB
    calculator, or the Lindh model where it has none; anything else is returned as it
    is."""
    if prior is not None and not (isinstance(prior, str) and prior == AUTO):
        return prior, None
    from asebo.model.priors import barrier_prior

    calculator, reason = barrier_prior(atoms)
    if calculator is None:
        return "lindh", f"the Lindh model ({reason})"
    return calculator, reason


def search_start(atoms, stored):
    """The guess a search began from: ``atoms`` at the restart file's ``start`` where its
    content ``stored`` has one, else ``atoms``. The default kernel is chosen on it, so
    that a resumed search fits the model of the search it resumes."""
    positions = None if stored is None else stored.get("start")
    if positions is None or np.shape(positions) != atoms.positions.shape:
        return atoms  # other atoms' file: refused when it is read
    start = atoms.copy()
    start.positions = np.asarray(positions, dtype=float)
    return start
