"""Whether a saddle point joins two minima: a descent either way along its imaginary
mode, each end compared with the minima.

From the saddle point displaced by :data:`DISPLACEMENT` Å (the largest atomic move)
along ``+mode`` and ``-mode``, each side descends to a minimum: the two ends of a
quasi-IRC (a short step along the mode, then a minimisation, in place of the intrinsic
reaction coordinate of K. Fukui, Acc. Chem. Res. 14, 363 (1981)). On the model, ASE's
FIRE descends on the GP's posterior mean while the GP is sure of it (its standard
deviation at most :data:`UNSURE` eV); where it is not, or where the descent ends at
neither minimum given, the calculator computes the configuration reached, the GP learns
it and the descent goes on (an end where the calculator's forces are below ``fmax`` is
another minimum), as a GP-accelerated minimisation computes where its model is unsure
(the GPMin of E. Garijo del Río, J. J. Mortensen and K. W. Jacobsen, Phys. Rev. B 100,
104103 (2019)): along a band's path the calls of the band and the saddle search make it
sure, and the descent costs no call. On the calculator, ASE's BFGS descends with it from
the start.

Each end is compared with the initial and final minima by the RMSD of the atoms that
move, after the best rotation and translation for a molecule
(:func:`ase.build.minimize_rotation_and_translation`), by the minimum image in a periodic
cell (:func:`ase.geometry.find_mic`). The saddle point is connected where one end lies
within ``tolerance`` of the initial minimum and the other within it of the final one.
"""

from dataclasses import dataclass

import numpy as np
from ase.build import minimize_rotation_and_translation
from ase.calculators.calculator import CalculationFailed
from ase.constraints import FixAtoms
from ase.geometry import find_mic
from ase.optimize import BFGS, FIRE

from asebo.model.priors import PriorCalculationError
from asebo.optimize.model_calculators import ModelCalculator
from asebo.optimize.observations import Observations

DISPLACEMENT = 0.1
"""Å: the largest atomic move off the saddle point along its mode."""
UNSURE = 0.1
"""eV: the GP's standard deviation beyond which a descent on the model stops. Across a
band's calls the GP's mean can hold a basin the calculator does not: a Pt adatom's
descent on it ended 1.3 eV below the calculator's energy there, the GP's std on the way
0.2 eV; the descents that ended where the calculator's did stayed below 0.07 eV on the
EMT hops and the closed-form surface (docs/notes/two-minima-workflow.md)."""
MODEL_FMAX = 0.01
"""eV/Å: a descent on the model ends here (it costs no call)."""
MODEL_CALLS = 10
"""Calls at most of a descent on the model before the calculator finishes it: a GP that
misses the calculator's forces where it is sure (a descent from the saddle point of the
reaction 14_meoh with GFN2-xTB: its forces 0.01 eV/Å on the model, 0.3-0.6 on
the calculator after each of 20 calls) would call it at every step."""
MODEL_STEP = 0.05
"""Å: FIRE's largest step on the model, short enough to follow its valley."""
MODEL_STEPS = 2000
"""FIRE's steps at most of a descent on the model: they cost no call, so the run's
``steps`` (calls) do not bound them."""
INITIAL, FINAL, ELSEWHERE, UNFINISHED = "initial", "final", "elsewhere", "unfinished"


@dataclass(frozen=True)
class Descents:
    """Where the descents along ``+mode`` and ``-mode`` ended.

    Attributes
    ----------
    ends : tuple of 2 str
        :data:`INITIAL`, :data:`FINAL`, :data:`ELSEWHERE` or :data:`UNFINISHED` (the
        calculator's descent ran out of its steps at neither minimum), for ``+mode``
        then ``-mode``.
    distances : tuple of 2 (tuple of 2 float or None)
        Å: each end's RMSD to the initial and to the final minimum; None where the
        calculator failed on the way (an SCF that does not converge).
    """

    ends: tuple
    distances: tuple

    @property
    def connected(self):
        """One end at the initial minimum, the other at the final one."""
        return sorted(self.ends) == sorted((INITIAL, FINAL))

    def note(self):
        """One line: where each descent ended."""
        parts = []
        for sign, end, apart in zip("+-", self.ends, self.distances):
            if apart is None:
                parts.append(f"{sign}mode: the calculator failed on the way down")
                continue
            where = {
                ELSEWHERE: "ends elsewhere",
                UNFINISHED: "ran out of its steps before a minimum",
            }.get(end, f"ends at the {end} minimum")
            parts.append(
                f"{sign}mode {where} (RMSD {apart[0]:.3f} Å to the initial, "
                f"{apart[1]:.3f} Å to the final)"
            )
        return "; ".join(parts)


def rmsd(reference, atoms):
    """RMSD (Å) of ``atoms`` to ``reference`` over the atoms no ``FixAtoms`` holds: after
    the best rotation and translation where nothing is held and the cell is not periodic,
    by the minimum image in a periodic cell."""
    moving = ~np.isin(np.arange(len(atoms)), held_atoms(atoms))
    moved = atoms.copy()
    periodic = bool(np.any(atoms.pbc))
    if moving.all() and not periodic:
        minimize_rotation_and_translation(reference, moved)
    difference = moved.positions - reference.positions  # (n, 3)
    if periodic:
        difference, _ = find_mic(difference, atoms.cell, atoms.pbc)
    return float(np.sqrt((difference[moving] ** 2).sum(axis=1).mean()))


def held_atoms(atoms):
    """The indices of the atoms a ``FixAtoms`` holds."""
    held = [c.get_indices() for c in atoms.constraints if isinstance(c, FixAtoms)]
    return np.concatenate(held) if held else np.zeros(0, dtype=int)


def descent_on_model(start, surrogate, observations, calculator, fmax, steps, at_minimum):
    """``start`` (ase.Atoms, left as it is) relaxed by FIRE on the posterior mean of
    ``surrogate`` fitted to ``observations`` to :data:`MODEL_FMAX`. Where the GP's
    standard deviation exceeds :data:`UNSURE`, or the descent ends where
    ``at_minimum(atoms)`` is False, ``calculator`` computes the configuration reached,
    added to ``observations``, and the descent goes on on the GP refitted; an end the
    calculator's forces put below ``fmax`` (eV/Å) is a minimum. After
    :data:`MODEL_CALLS` calls the calculator's BFGS finishes the descent
    (:func:`descent_on_calculator`, at most ``steps`` steps). Returns the end and
    whether it is a minimum (False: the calculator's descent ran out of its steps)."""
    atoms = start.copy()
    for _ in range(MODEL_CALLS):
        gp, _ = surrogate.fitted(observations)
        atoms.calc = ModelCalculator(gp)
        sure = _sure_descent(atoms, gp)
        if sure and at_minimum(atoms):
            return atoms, True
        computed = atoms.copy()
        computed.calc = calculator
        forces = computed.get_forces()
        if sure and np.sqrt((forces**2).sum(axis=1)).max() < fmax:
            return atoms, True
        observations.append(computed.positions, computed.get_potential_energy(), forces)
    return descent_on_calculator(atoms, calculator, fmax, steps)


def _sure_descent(atoms, gp):
    """Relax ``atoms`` (on ``gp``'s mean) by FIRE, at most :data:`MODEL_STEPS` steps;
    whether it ended where the GP was sure
    all the way, else stop at the first configuration where it is not, or at the last
    one before the GP's prior calculator failed (an SCF that does not converge)."""
    last = atoms.positions.copy()  # (n, 3)
    try:
        descent = FIRE(atoms, logfile=None, maxstep=MODEL_STEP)
        for _ in descent.irun(fmax=MODEL_FMAX, steps=MODEL_STEPS):
            _, std = gp.predict(atoms.positions[None], return_std=True)
            if float(np.ravel(std)[0]) > UNSURE:
                return False
            last = atoms.positions.copy()
    except PriorCalculationError:
        atoms.positions = last
        return False
    return True


def descent_on_calculator(start, calculator, fmax, steps):
    """``start`` (ase.Atoms, left as it is) relaxed by BFGS with ``calculator`` to
    ``fmax`` (eV/Å), at most ``steps`` steps, and whether it converged."""
    atoms = start.copy()
    atoms.calc = calculator
    converged = BFGS(atoms, logfile=None).run(fmax=fmax, steps=steps)
    return atoms, bool(converged)


def descents(saddle, mode, initial, final, calculator, model, fmax, steps, tolerance):
    """The :class:`Descents` from ``saddle`` along ``+mode`` and ``-mode``.

    Parameters
    ----------
    saddle : ase.Atoms
        With its constraints.
    mode : array (n, 3)
        The imaginary mode's displacement.
    initial, final : ase.Atoms
        The minima.
    calculator : ase calculator
        Computes where the model is unsure, or every step where ``model`` is None.
    model : (asebo.optimize.surrogate_model.Surrogate, Observations) or None
        The model descended on and the calls it learns (a copy is taken); None: the
        calculator alone.
    fmax : float
        eV/Å, of a descent with the calculator.
    steps : int
        Steps at most of each descent, on the model and with the calculator.
    tolerance : float
        Å: an end this close (RMSD) to a minimum is at it.
    """
    step = DISPLACEMENT * np.asarray(mode) / np.linalg.norm(mode, axis=1).max()  # (n, 3)
    ends, distances = [], []
    for sign in (1.0, -1.0):
        start = saddle.copy()
        start.positions = saddle.positions + sign * step
        try:
            if model is None:
                end, minimum = descent_on_calculator(start, calculator, fmax, steps)
            else:

                def at_minimum(atoms):
                    return _nearest(atoms, initial, final, tolerance)[0] != ELSEWHERE

                surrogate, observations = model
                learnt = _copied(observations)
                end, minimum = descent_on_model(
                    start, surrogate, learnt, calculator, fmax, steps, at_minimum
                )
        except CalculationFailed:  # an SCF that does not converge on the way down
            end = None
        where, apart = (
            (ELSEWHERE, None) if end is None else _nearest(end, initial, final, tolerance)
        )
        if where == ELSEWHERE and end is not None and not minimum:
            where = UNFINISHED
        ends.append(where)
        distances.append(apart)
    return Descents(tuple(ends), tuple(distances))


def _copied(observations):
    """A record in memory of the configurations of ``observations``."""
    copy = Observations(observations.numbers)
    for positions, energy, forces in zip(*observations.arrays()):
        copy.append(positions, energy, forces)
    return copy


def _nearest(end, initial, final, tolerance):
    """Which minimum ``end`` is at (:data:`ELSEWHERE` where neither is within
    ``tolerance`` Å), and its RMSD to each."""
    apart = (rmsd(initial, end), rmsd(final, end))
    nearest = int(np.argmin(apart))
    return ((INITIAL, FINAL)[nearest] if apart[nearest] < tolerance else ELSEWHERE), apart
