"""The saddle point from a relaxed band: :class:`asebo.BOSaddle` from its highest image
with every call of the band as an observation, or the band's climbing image converged
on the same GP (one atom, Sella not installed: :func:`route_of`).

Either way the stage ends with the configuration reached and its computed energy and
forces (:class:`SaddleStage`), and the GP of every call made, the model the check reads.
"""

from dataclasses import dataclass

from ase.calculators.singlepoint import SinglePointCalculator

SEARCH = "saddle search"
CLIMBING = "climbing image"
AFTER_SEARCH = "climbing image after the saddle search"


@dataclass(frozen=True)
class SaddleStage:
    """Where the saddle stage ended.

    Attributes
    ----------
    atoms : ase.Atoms
        The configuration computed last (the saddle point where converged), with its
        computed energy and forces (a single-point calculator), constraints kept.
    converged : bool
    why : str
        Why not converged (:class:`asebo.saddle.result.SaddleResult`'s reason, or
        ``'steps'``); empty where converged.
    surrogate : asebo.optimize.surrogate_model.Surrogate
        The model of the stage (:meth:`asebo.optimize.surrogate_model.Surrogate.fitted`).
    gp : asebo.model.gp.EnergyForceGP
        Its GP, fitted to every call of the band and the stage.
    observations : asebo.optimize.observations.Observations
        Those calls.
    calls : int
        Calculator calls of the stage.
    route : str
        :data:`SEARCH`, :data:`CLIMBING`, or :data:`AFTER_SEARCH` (the search did not
        converge, the band's climbing image did the rest).
    """

    atoms: object
    converged: bool
    why: str
    surrogate: object
    gp: object
    observations: object
    calls: int
    route: str


def route_of(atoms):
    """:data:`SEARCH` for two atoms or more, a molecule or a periodic cell, where Sella
    is installed, else :data:`CLIMBING`."""
    if len(atoms) < 2:
        return CLIMBING
    try:
        import sella  # noqa: F401
    except ImportError:
        return CLIMBING
    return SEARCH


def observation_atoms(atoms, observations, index):
    """A copy of ``atoms`` at observation ``index`` of ``observations`` with its energy and
    forces as a single-point calculator."""
    positions, energies, forces = observations.arrays()
    result = atoms.copy()
    result.positions = positions[index]
    energy = float(energies[index])
    result.calc = SinglePointCalculator(
        result, energy=energy, free_energy=energy, forces=forces[index]
    )
    return result


def searched_saddle(band, fmax, steps, **options):
    """The :class:`SaddleStage` of :meth:`asebo.BOSaddle.from_band` run to ``fmax`` (eV/Å)
    in at most ``steps`` calls, those of a search resumed from its restart file counted;
    ``options`` for :class:`asebo.BOSaddle`. Where the search's prior calculator fails at
    a configuration of its record, the stage ends there, not converged (no model)."""
    from asebo.model.priors import PriorCalculationError
    from asebo.saddle import BOSaddle

    with BOSaddle.from_band(band, **options) as search:
        before = len(search.observations)  # the band's, and a restart file's calls
        made = before - search.observations.state.get("given", before)  # resumed: its calls
        try:
            converged = bool(search.run(fmax=fmax, steps=max(steps - made, 0)))
            gp, _ = search.surrogate.fitted(search.observations)
        except PriorCalculationError as error:  # at a band's image far up, say
            record = search.observations
            atoms = observation_atoms(search.atoms, record, len(record) - 1)
            why = f"its prior has no value at a configuration it holds: {error}"
            return SaddleStage(atoms, False, why, None, None, record, len(record) - before, SEARCH)
        record = search.observations
        index = record.find(search.atoms.positions)
        index = len(record) - 1 if index is None else index  # a search cut short by steps
        why = "" if converged else search.result.reason
        atoms = observation_atoms(search.atoms, record, index)
    calls = len(record) - before
    return SaddleStage(atoms, converged, why, search.surrogate, gp, record, calls, SEARCH)


def climbed_saddle(band, fmax, steps):
    """The :class:`SaddleStage` of ``band`` (:class:`asebo.neb.BONEB`, after its run)
    run on with its climbing image to ``fmax`` (eV/Å), at most ``steps`` calls more."""
    before = band.calls
    band.neb.climb = True
    converged = bool(band.run(fmax=fmax, steps=steps))
    record = band.record.observations
    top = band.record.highest_computed(band.images)
    gp, _ = band.surrogate.fitted(record)
    atoms = observation_atoms(top, record, band.record.find(top.positions))
    why = "" if converged else "steps"
    calls = band.calls - before
    return SaddleStage(atoms, converged, why, band.surrogate, gp, record, calls, CLIMBING)
