"""Observations from calculations made before the run: a warm start.

Every configuration an earlier run computed, whatever optimizer made it (an L-BFGS
job cut short, a relaxation at a lower level of theory with the same calculator, an
``ase.db`` of single points), is an energy and forces the GP can learn from at no
cost. :func:`read_frames` takes what users hold such frames in; :func:`observed_frames`
turns them into the positions, energies and forces an optimizer observes, refusing
frames that are not observations of the same system, or that name another calculator
or record other settings of it (a GFN1-xTB trajectory for a GFN2-xTB run).
"""

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from ase import Atoms
from ase.calculators.singlepoint import SinglePointCalculator
from ase.db import connect
from ase.io import read
from ase.io.formats import filetype
from ase.io.jsonio import encode

from asebo.optimize.observations import (
    calculator_name,
    calculator_parameters,
    held_elsewhere,
    wrapped_calculators,
)
from asebo.optimize.subspace import held_coordinates

OUTPUT_PARAMETERS = frozenset(
    {"verbosity", "verbose", "txt", "label", "directory", "command", "cache_api", "parallel"}
)
"""Parameters that say what a calculator writes, where, and how it spends its time
(tblite's ``verbosity`` and ``cache_api``, GPAW's ``txt`` and ``parallel``), not what it
computes: frames that differ in them alone are of the same calculation."""


@dataclass(frozen=True)
class ObservedFrame:
    """One earlier calculation, in the coordinates the optimizer moves.

    Attributes
    ----------
    positions, forces : array (N, 3)
        A cell filter's generalized positions and forces (N = n + 3), else the atoms'.
    energy : float
        The force-consistent energy where the frame holds it (with a filter's ``p V``).
    stress : array (6,) or None
        The frame's stress, under a cell filter.
    """

    positions: np.ndarray
    energy: float
    forces: np.ndarray
    stress: np.ndarray | None


def read_frames(source):
    """The :class:`ase.Atoms` (with their results) of ``source``.

    Parameters
    ----------
    source : str, Path, Atoms, or iterable
        A file that :func:`ase.io.read` reads (every frame: an ASE trajectory, an
        ``ase.db`` file, extended XYZ with forces), an open
        :class:`ase.io.Trajectory`, one ``Atoms``, or an iterable of ``Atoms`` or of
        ``ase.db`` rows (``db.select(...)``).

    Returns
    -------
    list of ase.Atoms

    Raises
    ------
    FileNotFoundError
        For a file name where there is no file.
    ValueError
        For a file that no reader of ASE reads whole (empty, cut short, of another
        format), naming the file.
    """
    if isinstance(source, (str, os.PathLike)):
        if not os.path.isfile(source):
            raise FileNotFoundError(f"observations: no file {os.fspath(source)!r}")
        return _read_file(os.fspath(source))
    if isinstance(source, Atoms):
        return [source]
    if not isinstance(source, Iterable):
        raise TypeError(
            f"observations: {type(source).__name__} is not a file name, a trajectory, "
            "Atoms or an iterable of Atoms or ase.db rows"
        )
    return [_row_atoms(item) if hasattr(item, "toatoms") else item for item in source]


def _row_atoms(row):
    """The atoms of an ``ase.db`` row, their calculator with the parameters the row
    records (``calculator_parameters``), which ``row.toatoms()`` leaves out."""
    atoms = row.toatoms()
    parameters = row.get("calculator_parameters")
    if atoms.calc is not None and parameters:
        atoms.calc.parameters.update(parameters)
    return atoms


def _read_file(path):
    """Every frame of the file ``path`` (the rows of an ``ase.db`` file with their
    calculator's parameters, :func:`_row_atoms`); a ValueError naming it where it
    cannot be read."""
    try:
        if filetype(path) == "db":
            with connect(path) as db:
                return [_row_atoms(row) for row in db.select()]
        return list(read(path, index=":"))
    except Exception as error:  # each reader and format has its own errors
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        raise ValueError(
            f"observations: cannot read {path!r} ({reason}): give a complete ASE "
            "trajectory, ase.db file or extended XYZ file of calculations with energies "
            "and forces"
        ) from error


def observed_frames(frames, coordinates):
    """Each frame as an :class:`ObservedFrame` of the system of ``coordinates``.

    Parameters
    ----------
    frames : list of ase.Atoms
        With energy and forces (a single-point calculator, as trajectories and
        ``ase.db`` rows give them; a live calculator's results for these positions).
        The frames' constraints play no part: forces are read unconstrained. A frame
        whose calculator has a name (ASE's trajectories and ``ase.db`` rows keep the
        name of the calculator that computed it, and its parameters) must name the
        calculator of the atoms optimized, or a wrapper of it, and where it records
        parameters (:func:`frame_parameters`) their settings must be that calculator's
        (:func:`settings`: defaults filled in, :data:`OUTPUT_PARAMETERS` left out). A
        frame without a name (a single-point calculator built by hand, extended XYZ)
        is taken, and so is one that records no parameters (:func:`take_frames` notes
        it where this run sets some): what they were computed with is not known.
    coordinates : asebo.model.cell_coordinates.GeneralizedCoordinates
        The optimizer's coordinates: the numbers to match, and under a cell filter
        the filter that turns atoms, cell and stress into its generalized positions
        and forces (frames need a stress there).

    Returns
    -------
    list of ObservedFrame

    Raises
    ------
    ValueError
        For a frame of other atoms, of another calculator or settings, without energy
        or forces (or stress under a filter), with values that are not finite, or
        (without a filter) in another periodic cell. Nothing is returned then: a warm start is
        taken whole or not.
    """
    return [_observed(k, frame, coordinates) for k, frame in enumerate(frames)]


def _observed(k, frame, coordinates):
    atoms = coordinates.atoms
    if not isinstance(frame, Atoms):
        raise TypeError(f"observations: item {k} is a {type(frame).__name__}, not Atoms")
    if len(frame) != len(atoms) or (frame.numbers != atoms.numbers).any():
        raise ValueError(
            f"observations: frame {k} holds other atoms ({frame.get_chemical_formula()}, "
            f"{len(frame)} atoms) than those optimized ({atoms.get_chemical_formula()}, "
            f"{len(atoms)} atoms, in the same order)"
        )
    _check_calculator(k, frame, atoms.calc)
    energy = _result(frame, "free_energy")
    energy = _result(frame, "energy") if energy is None else energy
    forces = _result(frame, "forces")
    stress = _result(frame, "stress") if coordinates.has_cell else None
    missing = [
        name
        for name, value in (("energy", energy), ("forces", forces), ("stress", stress))
        if value is None and (name != "stress" or coordinates.has_cell)
    ]
    if missing:
        what = (
            "energy, forces and stress (a cell filter)"
            if coordinates.has_cell
            else "energy and forces"
        )
        raise ValueError(
            f"observations: frame {k} has no {' or '.join(missing)}: a warm start needs "
            f"frames with the {what} of a calculator, as an optimizer's trajectory or "
            "ase.db rows of calculations hold them"
        )
    values = [np.atleast_1d(energy), np.ravel(forces), np.ravel(frame.positions)]
    if stress is not None:
        values.append(np.ravel(stress))
    if not all(np.isfinite(value).all() for value in values):
        raise ValueError(f"observations: frame {k} holds energy, forces or positions not finite")
    if coordinates.has_cell:
        return _through_filter(frame, energy, forces, stress, coordinates)
    if (frame.pbc != atoms.pbc).any():
        raise ValueError(
            f"observations: frame {k} has periodic boundary conditions "
            f"{frame.pbc.tolist()}, the atoms optimized {atoms.pbc.tolist()}: its energy is "
            "another system's; pass frames computed with the same pbc"
        )
    if atoms.pbc.any() and not _same_cell(frame, atoms):
        raise ValueError(
            f"observations: frame {k} is in another periodic cell than the atoms optimized: "
            "pass the atoms through a cell filter to take frames of other cells"
        )
    return ObservedFrame(np.array(frame.positions, dtype=float), float(energy), forces, None)


def _check_calculator(k, frame, calc):
    """Raise ValueError where frame ``k`` names a calculator (``frame.calc.name``) that
    is neither ``calc`` nor one of the calculators it wraps, or records parameters
    (:func:`frame_parameters`) whose settings (:func:`settings`) differ from those of
    every calculator of that name; 'unknown' (a single-point calculator's own name)
    names none."""
    name = _frame_calculator_name(frame)
    if name is None or calc is None:
        return
    named = _named(calc, name)
    if not named:
        raise ValueError(
            f"observations: frame {k} was computed by {name}, not by this run's calculator "
            f"({calculator_name(calc)}): a warm start takes frames of the same calculator "
            "and settings; pass frames of this one, or no observations"
        )
    recorded = frame_parameters(frame)
    if not recorded:
        return
    differences = [_differences(recorded, c) for c in named]
    if all(differences):
        theirs, ours = differences[-1]
        raise ValueError(
            f"observations: frame {k} was computed by {name} with {theirs}, not with this "
            f"run's {ours}: a warm start takes frames of the same calculator and settings; "
            "pass frames of this one, or no observations"
        )


def _frame_calculator_name(frame):
    """The name of the calculator that computed ``frame``, or None where it names none."""
    name = getattr(frame.calc, "name", None)
    if not isinstance(name, str) or name.lower() in ("", "unknown"):
        return None
    return name


def _named(calc, name):
    """The calculators of ``calc``'s chain (:func:`wrapped_calculators`) named ``name``."""
    return [
        c
        for c in wrapped_calculators(calc)
        if isinstance(getattr(c, "name", None), str) and c.name.lower() == name.lower()
    ]


def frame_parameters(frame):
    """The parameters of the calculator that computed ``frame`` as the frame records
    them: ASE's trajectories and ``ase.db`` rows keep its ``todict()`` (those that
    differ from its defaults), and a live calculator gives its own; empty where none
    are recorded (a single-point calculator built by hand, frames written before
    asebo recorded them), as where every one is the default."""
    return {} if frame.calc is None else calculator_parameters(frame.calc)


def settings(parameters, calc):
    """The settings of a calculation with ``parameters`` on the calculator ``calc``:
    ``calc``'s defaults (``default_parameters``) updated with them, less the
    :data:`OUTPUT_PARAMETERS`, as JSON values (a value JSON cannot hold, by its
    ``repr``)."""
    merged = {**(getattr(calc, "default_parameters", None) or {}), **parameters}
    return {
        key: _json_value(value) for key, value in merged.items() if key not in OUTPUT_PARAMETERS
    }


def _json_value(value):
    """``value`` as JSON gives it back (lists for arrays and tuples), or its ``repr``."""
    try:
        return json.loads(encode(value))
    except TypeError:
        return repr(value)


def _differences(recorded, calc):
    """How the settings of the ``recorded`` parameters differ from ``calc``'s own, as
    two texts (``"method='GFN1-xTB'"``, ``"method='GFN2-xTB'"``); None where they do
    not."""
    theirs, ours = settings(recorded, calc), settings(calculator_parameters(calc), calc)
    keys = sorted(key for key in theirs.keys() | ours.keys() if theirs.get(key) != ours.get(key))
    if not keys:
        return None
    return tuple(", ".join(f"{key}={side.get(key)!r}" for key in keys) for side in (theirs, ours))


def _result(frame, name):
    """The frame's result ``name`` without any calculation, or None."""
    if frame.calc is None:
        return None
    try:
        value = frame.calc.get_property(name, frame, allow_calculation=False)
    except Exception:  # a calculator that cannot say without computing
        return None
    return None if value is None else np.array(value, dtype=float)


def _same_cell(frame, atoms):
    return (frame.pbc == atoms.pbc).all() and np.allclose(
        frame.cell.array, atoms.cell.array, rtol=0, atol=1e-6
    )


def _through_filter(frame, energy, forces, stress, coordinates):
    """The frame in a filter's generalized positions and forces, as the filter of
    ``coordinates`` presents them."""
    atoms = coordinates.atoms.copy()
    atoms.constraints = []
    atoms.set_cell(frame.cell, scale_atoms=False)
    atoms.positions = frame.positions
    atoms.calc = SinglePointCalculator(
        atoms, energy=float(energy), free_energy=float(energy), forces=forces, stress=stress
    )
    system = coordinates.new_filter(atoms)
    return ObservedFrame(
        np.array(system.get_positions(), dtype=float),
        float(system.get_potential_energy(force_consistent=True)),
        np.array(system.get_forces(apply_constraint=False), dtype=float),
        np.array(stress, dtype=float),
    )


def take_frames(observations, source, coordinates):
    """Take every frame of ``source`` not seen before as an observation.

    The frames are checked whole (:func:`observed_frames`) before any is taken.

    Parameters
    ----------
    observations : asebo.optimize.observations.Observations
        Appended to in place.
    source
        Anything :func:`read_frames` reads.
    coordinates : asebo.model.cell_coordinates.GeneralizedCoordinates

    Returns
    -------
    added : int
        The observations taken.
    notes : list of str
        The log's lines on the warm start.
    """
    frames = read_frames(source)
    observed = observed_frames(frames, coordinates)
    system = coordinates.filter_object if coordinates.has_cell else coordinates.atoms
    held = held_coordinates(coordinates, system.get_positions())
    found = held_elsewhere([f.positions for f in observed], **held)
    if found is not None:
        index, where, distance = found
        raise ValueError(
            f"observations: frame {index} has {where} {distance:.3g} Å from where this "
            "run's constraints hold it: frames computed without them cannot be reached; "
            "pass frames computed under the same constraints, or none"
        )
    unrecorded = _unrecorded_note(frames, coordinates.atoms.calc)
    added = 0
    for frame in observed:
        if observations.find(frame.positions) is None:
            observations.append(frame.positions, frame.energy, frame.forces, frame.stress)
            added += 1
    if not added:
        return 0, [f"warm start: the {len(frames)} frames are observations already"]
    observations.state["warm_start"] = observations.state.get("warm_start", 0) + added
    known = f", {len(observed) - added} of them known already" if added < len(observed) else ""
    note = f"warm start: {added} observations taken from {len(frames)} frames{known}"
    return added, [note, *unrecorded]


def _unrecorded_note(frames, calc):
    """The log's line, in a list, where a frame names a calculator of ``calc`` but
    records none of its parameters while this run sets some: the frames are taken as
    computed with them. Empty otherwise."""
    for frame in frames:
        name = _frame_calculator_name(frame)
        if name is None or calc is None or frame_parameters(frame):
            continue
        own = _differences({}, _named(calc, name)[-1])
        if own is not None:
            return [
                f"warm start: the frames name {name} but record none of its parameters; "
                f"they are taken as computed with this run's {own[1]}"
            ]
    return []


class WarmStart:
    """ASE's hook of a warm start for an optimizer that has ``observations``,
    ``coordinates``, ``trust`` and a log of notes, ``_write_notes``
    (:class:`asebo.BOOptimizer`)."""

    def _replay_trajectory(self, traj):
        """Take every frame of ``traj`` not seen before as an observation.

        Called by ASE's :meth:`ase.optimize.optimize.Optimizer.replay_trajectory` (which
        opens a file name as a trajectory) and by the ``observations`` argument; ``traj``
        is anything :func:`read_frames` reads. The frames are
        checked whole before any is taken, written to the restart file, and come first
        in the trajectory. Where a frame is taken, the next step is not judged against
        the last proposal's prediction (the trust radius is kept); where none is (a
        resumed run given its frames again), the pending proposal is judged as in the
        uninterrupted run.
        """
        added, notes = take_frames(self.observations, traj, self.coordinates)
        self._write_notes(notes)
        if added:  # else a resumed run given its frames again: the pending step stands
            self.predicted_energy = None
            self.observations.save(trust_radius=self.trust.radius, predicted_energy=None)
