"""From two minima to a verified transition state, in one call: :func:`transition_state`.

Three stages on one record of calls, none repeated:

1. **Band.** :class:`asebo.neb.BONEB` relaxes an IDPP band between the minima to a
   loose ``band_fmax`` (:mod:`asebo.barrier.band_setup`), its climbing image on by
   default (the choice measured in docs/notes/two-minima-workflow.md).
2. **Saddle point.** :class:`asebo.BOSaddle` searches from the band's highest image,
   every call of the band an observation, to ``fmax``; where it does not converge in
   :data:`SEARCH_CALLS` calls, the band's climbing image is converged instead
   (:mod:`asebo.barrier.saddle_stage`). For one atom, or without Sella
   (:func:`asebo.barrier.saddle_stage.route_of`), the band is handed to no search: its
   climbing image converges to ``fmax`` in the band stage.
3. **Check.** The Hessian at the end, the GP's (no call) or the calculator's by finite
   differences, must have one imaginary mode (:mod:`asebo.barrier.modes`), and a
   descent either way along it, on the GP or on the calculator, must end at the two
   minima given (:mod:`asebo.barrier.connection`).

This is the workflow of a loose band whose highest image a saddle search refines, as
ASE's NEB followed by Sella (E. D. Hermes, K. Sargsyan, H. N. Najm and J. Zádor, J.
Chem. Theory Comput. 18, 6974 (2022)) runs it, with every stage on the GP of the calls
made: the band of O.-P. Koistinen, F. B. Dagbjartsdóttir, V. Ásgeirsson, A. Vehtari and
H. Jónsson (J. Chem. Phys. 147, 152720 (2017)), the saddle search of A. Denzel and J.
Kästner (J. Chem. Theory Comput. 14, 5777 (2018)).
"""

import math
import numbers
import warnings
from dataclasses import replace

import numpy as np
from ase.parallel import world
from ase.utils import IOContext

from asebo.barrier.band_setup import check_endpoints, interpolated_band
from asebo.barrier.connection import descents
from asebo.barrier.counted import CountedCalls
from asebo.barrier.modes import calculator_hessian, model_hessian, normal_modes
from asebo.barrier.record import (
    NOT_CONNECTED,
    NOT_CONVERGED,
    NOT_FIRST_ORDER,
    VERIFIED,
    TransitionState,
)
from asebo.barrier.saddle_stage import (
    AFTER_SEARCH,
    SEARCH,
    climbed_saddle,
    observation_atoms,
    route_of,
    searched_saddle,
)

SURFACES = ("model", "calculator")
"""What the check's Hessian and descents are computed on: the GP of every call (no
call) or the calculator (calls counted)."""
BAND_FMAX = 1.0
"""eV/Å: the band's loose criterion before the saddle stage."""
SEARCH_CALLS = 30
"""Calls at most of the saddle search from the band's highest image before the band's
climbing image takes over: from a band it needed 1 to 4 (docs/notes/two-minima-workflow.md),
and a search that wanders off the band does not come back to it."""
TOLERANCE = 0.25
"""Å: a descent's end this close (RMSD of the atoms that move) to a minimum is at it."""


def transition_state(
    initial,
    final,
    calculator,
    n_images=5,
    fmax=0.05,
    band_fmax=BAND_FMAX,
    climb=True,
    steps=200,
    prior=None,
    hessian="model",
    descent="model",
    tolerance=TOLERANCE,
    restart=None,
    logfile=None,
):
    """The transition state between the minima ``initial`` and ``final`` (module
    docstring), checked.

    Parameters
    ----------
    initial, final : ase.Atoms
        Relaxed minima of the same atoms in the same order and cell; ``FixAtoms`` kept.
    calculator : ase calculator
        Computes every call, one configuration at a time.
    n_images : int
        Moving images of the band.
    fmax : float
        eV/Å: the saddle point's largest force.
    band_fmax : float
        eV/Å: the band's, before the saddle search (for one atom, or without Sella,
        the band's climbing image converges to ``fmax``).
    climb : bool
        The band's climbing image during its loose relaxation (always on where the
        band converges to ``fmax``).
    steps : int
        Calls at most of the band, and again of the saddle stage.
    prior : optional
        The GP's prior mean for the band and the saddle search (as for
        :class:`asebo.BOOptimizer`); default: each driver's own.
    hessian, descent : {'model', 'calculator'}
        What the check's Hessian and its descents are computed on: the GP of every
        call (no call) or the calculator (finite differences, ``6 f + 1`` calls for
        ``f`` atoms that move; BFGS to ``fmax``).
    tolerance : float
        Å: a descent's end this close (RMSD) to a minimum is at it.
    restart : str, optional
        Stem of the band's and the saddle search's restart files
        (``STEM-band.json``, ``STEM-saddle.json``): the same call again repeats no call
        of the band or the search (the check's own calls are not kept).
    logfile : file, str or None
        ``'-'`` for standard output: the band's and the search's step lines and a line
        per stage.

    Returns
    -------
    asebo.barrier.record.TransitionState

    Raises
    ------
    TypeError, ValueError
        For what no band can take, before any call (:func:`check_options`,
        :func:`asebo.barrier.band_setup.check_endpoints`, and the drivers' own checks).
    """
    check_endpoints(initial, final, calculator, n_images)
    check_options(fmax=fmax, band_fmax=band_fmax, tolerance=tolerance, steps=steps)
    for name, value in (("hessian", hessian), ("descent", descent)):
        if value not in SURFACES:
            raise ValueError(f"{name} must be 'model' or 'calculator', got {value!r}")
    from asebo.neb import BONEB

    with IOContext() as files:
        log = files.openfile(logfile, world, mode="a")
        searching = route_of(initial) == SEARCH
        loose = band_fmax if searching else fmax  # no search: the climbing image converges
        neb = interpolated_band(initial, final, calculator, n_images, climb or not searching)
        band_file = None if restart is None else f"{restart}-band.json"
        with BONEB(neb, restart=band_file, logfile=log, prior=prior) as band:
            before = len(band.record.observations)
            band_converged = bool(band.run(fmax=loose, steps=steps))
            endpoint_calls = len(band.record.observations) - before - band.calls
            ends = [_computed_image(band, index) for index in (0, len(neb.images) - 1)]
            _note_unrelaxed(log, ends, fmax)
            _note(log, f"band: {band.calls} calls, {_converged(band_converged)} to {loose} eV/Å")
            band_calls = band.calls
            saddle_file = None if restart is None else f"{restart}-saddle.json"
            stage = _saddle_stage(band, fmax, steps, log, restart=saddle_file, prior=prior)
        _note(
            log, f"{stage.route}: {stage.calls} calls, {_converged(stage.converged)} to {fmax} eV/Å"
        )
        modes, found, check_calls = _check(
            stage, ends, calculator, hessian, descent, fmax, steps, tolerance
        )
        record = _record(stage, ends, modes, found)
        calls = {
            "endpoints": endpoint_calls,
            "band": band_calls,
            "saddle": stage.calls,
            "check": check_calls,
        }
        result = TransitionState(
            **record, calls=calls, band_converged=band_converged, saddle_converged=stage.converged
        )
        _note(log, result.summary())
    return result


def check_options(**values):
    """Raise ValueError for an ``fmax``, ``band_fmax`` or ``tolerance`` that is not a
    positive number, or ``steps`` that is not a whole number of 1 or more."""
    for name, value in values.items():
        if name == "steps":
            whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
            if not whole or value < 1:
                raise ValueError(f"steps must be a whole number of calls, 1 or more, got {value!r}")
            continue
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")


def _saddle_stage(band, fmax, steps, log, **options):
    """The :class:`asebo.barrier.saddle_stage.SaddleStage` from ``band``: the saddle
    search (``options`` for :class:`asebo.BOSaddle`) where it takes the system, for at
    most :data:`SEARCH_CALLS` calls, and where it does not converge, the band's
    climbing image after it; else the climbing image."""
    if route_of(band.images[0]) != SEARCH:
        return climbed_saddle(band, fmax, steps)
    searched = searched_saddle(band, fmax, min(steps, SEARCH_CALLS), logfile=log, **options)
    if searched.converged:
        return searched
    _note(
        log,
        f"saddle search: not converged after {searched.calls} calls ({searched.why}); the "
        "band's climbing image goes on",
    )
    climbed = climbed_saddle(band, fmax, steps)
    return replace(climbed, calls=searched.calls + climbed.calls, route=AFTER_SEARCH)


def _computed_image(band, index):
    """Image ``index`` of the band with its computed energy and forces."""
    image = band.images[index]
    return observation_atoms(image, band.record.observations, band.record.find(image.positions))


def _check(stage, ends, calculator, hessian, descent, fmax, steps, tolerance):
    """The normal modes at the stage's end, the descents along the lowest, and the
    calculator's calls they took."""
    from asebo.optimize.subspace import free_atoms

    atoms = stage.atoms
    free = free_atoms(atoms)  # (n, 3)
    rotations = not atoms.pbc.any()
    counted = CountedCalls(calculator)
    matrix = _hessian(stage, free, rotations, hessian, counted)  # (3n, 3n)
    modes = normal_modes(matrix, atoms, free, rotations)
    model = (stage.surrogate, stage.observations) if descent == "model" else None
    found = descents(atoms, modes.lowest, *ends, counted, model, fmax, steps, tolerance)
    return modes, found, counted.calls


def _hessian(stage, free, rotations, hessian, counted):
    """The Hessian (3n, 3n) at the stage's end: the model's where ``hessian`` is
    ``'model'`` and its prior calculator gives one (an SCF that does not converge there
    gives none), else the calculator ``counted``'s."""
    from asebo.model.priors import PriorCalculationError

    atoms = stage.atoms
    if hessian == "model":
        try:
            searched = stage.route == SEARCH
            return model_hessian(
                stage.gp, stage.observations, atoms.positions, free, rotations, searched
            )
        except PriorCalculationError:
            pass
    return calculator_hessian(atoms, counted, free)


def _record(stage, ends, modes, found):
    """The fields of :class:`asebo.barrier.record.TransitionState` but the calls and
    convergence."""
    energy = stage.atoms.get_potential_energy()  # the record's: no call
    imaginary = modes.imaginary
    if len(imaginary) == 1:
        order = f"one imaginary mode ({imaginary[0]:.0f}i cm⁻¹)"
    elif imaginary:
        order = (
            f"{len(imaginary)} imaginary modes ({', '.join(f'{f:.0f}i' for f in imaginary)} cm⁻¹)"
        )
    else:
        order = "no imaginary mode"
    if not stage.converged:
        code, reason = (
            NOT_CONVERGED,
            f"the {stage.route} ended before converging ({stage.why}); {order}",
        )
    elif len(imaginary) != 1:
        code, reason = NOT_FIRST_ORDER, f"not a first-order saddle point: {order}"
    elif not found.connected:
        code, reason = NOT_CONNECTED, f"not connected to the minima given: {found.note()}"
    else:
        code, reason = VERIFIED, "a first-order saddle point joining the two minima"
    return {
        "atoms": stage.atoms,
        "forward_barrier": energy - ends[0].get_potential_energy(),
        "backward_barrier": energy - ends[1].get_potential_energy(),
        "imaginary": imaginary[0] if imaginary else None,
        "first_order": len(imaginary) == 1,
        "connected": found.connected,
        "code": code,
        "reason": reason,
        "route": stage.route,
        "ends": found.ends,
        "distances": found.distances,
    }


def _converged(converged):
    return "converged" if converged else "not converged"


def _note_unrelaxed(log, ends, fmax):
    """A line in the log, and a warning (seen without a log), for each endpoint whose
    largest force (of the atoms no ``FixAtoms`` holds) is above ``fmax``: no minimum,
    the barrier measured from it."""
    for name, end in zip(("initial", "final"), ends):
        largest = float(np.linalg.norm(end.get_forces(), axis=1).max())  # constraints applied
        if largest > fmax:
            line = (
                f"the {name} endpoint's largest force is {largest:.3f} eV/Å, above fmax "
                f"{fmax}: it is no minimum, and the barrier is measured from it; relax the "
                "endpoints first (BOOptimizer)"
            )
            _note(log, line)
            warnings.warn(line, UserWarning, stacklevel=3)


def _note(log, line):
    """Write ``line`` to the log."""
    log.write(f"{line}\n")
    log.flush()
