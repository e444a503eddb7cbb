"""The saddle search's model, built on the guess it began from."""

import numpy as np

from asebo.optimize.build import build_surrogate
from asebo.optimize.observations import check_restart


def saddle_surrogate(atoms, restart, prior, kernel, gp_options, threads=None):
    """The :class:`asebo.optimize.surrogate_model.Surrogate` of a saddle search from
    ``atoms`` (:func:`asebo.optimize.build.build_surrogate`, on the restart file's
    guess where it has one: :func:`search_start`), and the log's line on the prior
    chosen where ``prior`` was None or ``'auto'`` (else None): the saddle search's
    default of :func:`asebo.model.default_prior.default_prior`. A periodic system takes
    :class:`asebo.BOOptimizer`'s periodic representation, as a periodic band does;
    a default GFN-xTB prior computes on the search's ``threads``."""
    periodic = bool(atoms.pbc.any())
    start = search_start(atoms, check_restart(restart))
    coordinates = {"numbers": atoms.numbers, "periodic": periodic}
    surrogate, _, why = build_surrogate(
        start,
        coordinates,
        3 * len(atoms),
        prior,
        kernel,
        {"gp_options": gp_options},
        "saddle",
        threads,
    )
    return surrogate, why


def search_start(atoms, stored):
    """The guess a search began from: ``atoms`` at the restart file's ``start`` where its
    content ``stored`` has one, else ``atoms``. The default kernel is chosen on it, so
    that a resumed search fits the model of the search it resumes; the copy keeps the
    calculator of ``atoms``, which chooses the default prior."""
    positions = None if stored is None else stored.get("start")
    if positions is None or np.shape(positions) != atoms.positions.shape:
        return atoms  # other atoms' file: refused when it is read
    start = atoms.copy()
    start.positions = np.asarray(positions, dtype=float)
    start.calc = atoms.calc  # the target chooses the default prior
    return start
