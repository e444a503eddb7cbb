"""The record of every energy and force computed in an optimization, and its restart file.

:class:`Observations` appends each evaluation (positions, energy, forces), finds a
configuration already computed, and writes itself, with the optimizer's state, to a
JSON restart file atomically (a unique temporary file renamed over the old one), so
a run killed at any moment leaves either the previous or the new record, never a
broken one. :class:`TrajectoryFrames` writes each observation to an ASE trajectory
exactly once, however many times the run is resumed.
"""

import json
import os
import stat
import tempfile
from pathlib import Path

import numpy as np
from ase.calculators.calculator import all_properties
from ase.calculators.singlepoint import SinglePointCalculator
from ase.geometry import find_mic
from ase.io.jsonio import decode, encode
from ase.io.trajectory import Trajectory
from ase.optimize import optimize
from ase.parallel import world

from asebo.model.default_prior import calculator_chain

RESTART_VERSION = 1
SAME_POSITIONS = 1e-10  # Å: configurations closer than this in every coordinate are one
SAME_START = 1e-3
"""Å per coordinate: atoms given to resume a run are its start (or a configuration it
computed) within this; well above the rounding of positions written to a file, well
below a change of geometry."""


RUNS = {"minimisation": "BOOptimizer", "band": "BONEB", "saddle search": "BOSaddle"}
"""The kinds of run a restart file may hold, each with the optimizer that writes it."""


class RestartError(optimize.RestartError):
    """A restart file that cannot be used for these atoms (ASE's own ``RestartError``,
    so that code written for ASE's optimizers catches it)."""


class Observations:
    """Every evaluation of one molecule, persisted to a restart file after each change.

    Parameters
    ----------
    numbers : array (n,)
        Atomic numbers; a restart file of other atoms is refused.
    path : str or None
        Restart file; None keeps the record in memory only.
    comm : communicator
        Only rank 0 writes the file.
    run : str, optional
        The kind of run (:data:`RUNS`), written in the file's ``run`` entry; a file of
        another kind is refused when it is loaded.
    system : dict, optional
        The boundary conditions and cell the observations are computed in
        (:func:`system_of`), written in the file's ``system`` entry; a file of another
        system is refused when it is loaded (:func:`check_system`).

    Attributes
    ----------
    positions, forces : list of arrays (n, 3)
        Forces unconstrained, as the calculator returned them.
    energies : list of float
    stresses : list of arrays (6,) or None
        The calculator's stress (Voigt order, eV/Å³) where it was observed (under a
        cell filter), None elsewhere.
    results : list of dict or None
        Everything else the calculator computed at each observation (charges, dipole,
        free energy, magnetic moments: :func:`calculator_results`), None where it is
        not known (observations given as a warm start, or read from an older file).
    state : dict
        The optimizer's state saved with the observations (JSON-encodable values).
    """

    def __init__(self, numbers, path=None, comm=world, run=None, system=None):
        self.numbers = np.asarray(numbers).copy()
        self.path = None if path is None else str(path)
        self.comm = comm
        self.positions = []
        self.energies = []
        self.forces = []
        self.stresses = []
        self.results = []
        self.state = {} if run is None else {"run": run}
        if system is not None:
            self.state["system"] = system
        self._new_file_mode = None  # a new restart file's permissions, from the umask
        self._on_disk = None  # the file as this record last read or wrote it (_file_state)

    def __len__(self):
        return len(self.energies)

    @classmethod
    def load(cls, numbers, path, comm=world, run=None, system=None):
        """The observations stored in ``path``; :class:`RestartError` if unusable, of
        another kind of ``run`` than its ``run`` entry, or computed in another
        ``system`` than its ``system`` entry (files without these entries pass)."""
        record = cls(numbers, path, comm)
        stored = _read_restart(path)
        check_run(path, stored.get("run"), run)
        check_system(path, stored.get("system"), system)
        numbers_on_file = np.asarray(stored.pop("numbers"))
        if (
            numbers_on_file.shape != record.numbers.shape
            or (numbers_on_file != record.numbers).any()
        ):
            raise RestartError(
                f"restart file {path} holds observations of other atoms "
                f"({len(numbers_on_file)} atoms, numbers {numbers_on_file.tolist()[:8]}...): "
                "pass another restart file name to start afresh; this one was left untouched"
            )
        record.positions = [np.asarray(p, dtype=float) for p in stored.pop("positions")]
        record.energies = [float(e) for e in stored.pop("energies")]
        record.forces = [np.asarray(f, dtype=float) for f in stored.pop("forces")]
        stresses = stored.pop("stresses", None)  # absent without a cell filter
        record.stresses = (
            [None] * len(record.energies)
            if stresses is None
            else [np.asarray(s, dtype=float) for s in stresses]
        )
        results = stored.pop("results", None)  # absent from older files
        record.results = (
            [None] * len(record.energies)
            if results is None
            else [None if r is None else numeric_results(r) for r in results]
        )
        stored.pop("version")
        record._on_disk = _file_state(path)
        record.state = stored if run is None else {**stored, "run": run}
        if system is not None:
            record.state["system"] = system
        return record

    def append(self, positions, energy, forces, stress=None, results=None):
        """Add an evaluation and return its index; the caller then :meth:`save` s.

        ``results`` (a dict, optional) are the calculator's other results there
        (:func:`calculator_results`), kept apart from ``energy`` and ``forces``.
        """
        self.positions.append(np.array(positions, dtype=float))  # (n, 3)
        self.energies.append(float(energy))
        self.forces.append(np.array(forces, dtype=float))  # (n, 3)
        self.stresses.append(None if stress is None else np.array(stress, dtype=float))  # (6,)
        self.results.append(None if results is None else numeric_results(results))
        return len(self.energies) - 1

    def find(self, positions, tolerance=SAME_POSITIONS):
        """Index of an observation at ``positions`` (n, 3) within ``tolerance`` Å, or None."""
        if not self.positions:
            return None
        distance = np.abs(np.array(self.positions) - positions).max(axis=(1, 2))  # (m,)
        index = int(np.argmin(distance))
        return index if distance[index] <= tolerance else None

    def best(self):
        """Index of the lowest energy observed."""
        return int(np.argmin(self.energies))

    def arrays(self):
        """Positions (m, n, 3), energies (m,) and forces (m, n, 3)."""
        return np.array(self.positions), np.array(self.energies), np.array(self.forces)

    def save(self, **state):
        """Update the optimizer's state and write everything to the restart file.

        The file is written to a temporary file unique to this process in the same
        folder, given the permissions of the restart file it replaces (those a new file
        gets under the process's umask where there is none yet), flushed to disk, then
        renamed over the restart file. A file that another record wrote since this one
        last read or wrote it (two optimizers given one restart file) is refused with
        :class:`RestartError` and left as it is.
        """
        self.state.update(state)
        if self.path is None or self.comm.rank != 0:
            return
        found = _file_state(self.path)
        if found is not None and found != self._on_disk:
            raise RestartError(
                f"restart file {self.path} was written by another optimizer since this run "
                "read or wrote it: it is left as the other wrote it, and this run's last "
                "call is not in it; give each optimizer its own restart file"
            )
        content = {
            "version": RESTART_VERSION,
            "numbers": self.numbers,
            "positions": np.array(self.positions),
            "energies": np.array(self.energies),
            "forces": np.array(self.forces),
            **self.state,
        }
        if self.stresses and all(stress is not None for stress in self.stresses):
            content["stresses"] = np.array(self.stresses)
        if any(results is not None for results in self.results):
            content["results"] = self.results
        mode = self._file_mode()
        folder, name = os.path.split(os.path.abspath(self.path))
        descriptor, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
        try:
            os.fchmod(descriptor, mode)  # mkstemp makes it 0600
            with os.fdopen(descriptor, "w") as fd:
                fd.write(encode(content))
                fd.flush()
                os.fsync(fd.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self._on_disk = _file_state(self.path)

    def _file_mode(self):
        """The permissions of the restart file, where it exists; else those of a new
        file under the process's umask, read once."""
        try:
            return stat.S_IMODE(os.stat(self.path).st_mode)
        except FileNotFoundError:
            pass
        if self._new_file_mode is None:
            self._new_file_mode = 0o666 & ~_umask()
        return self._new_file_mode


class TrajectoryFrames:
    """Writes each observation to an ASE trajectory once, across resumed runs.

    Parameters
    ----------
    trajectory : str, Path or open ase.io.Trajectory
        A file name, or a trajectory opened for writing, which receives every
        observation of the record (those read from a restart file included).
    atoms : ase.Atoms
        Supplies numbers, cell and constraints of the frames.
    keep : bool
        Keep the frames already in the file: those of the observations read from a
        restart file are not written again. Otherwise the file is started afresh.
    observations : Observations
        The record at the start of this run (read from a restart file). A kept file
        whose frames are not its first observations (a frame that cannot be read, as
        after a write cut short; more frames than observations, as with an older
        restart file; other positions) is moved aside (:attr:`note` says where) and
        the trajectory is written afresh.
    comm : communicator
    description : dict
        Written in the trajectory's header.
    coordinates : asebo.model.cell_coordinates.GeneralizedCoordinates, optional
        Of a cell filter: the observations are its generalized positions and forces,
        and each frame holds the atoms in their cell, with the atoms' forces, the
        energy less the filter's ``p V`` term and the calculator's stress.

    Attributes
    ----------
    note : str or None
        What was done with a kept file that did not match the observations.
    """

    def __init__(
        self,
        trajectory,
        atoms,
        keep,
        observations,
        comm=world,
        description=None,
        coordinates=None,
    ):
        self.atoms = atoms
        self.coordinates = coordinates
        self.comm = comm
        self.description = description or {}
        self.trajectory = trajectory
        self.opened = hasattr(trajectory, "write")
        self.note = None
        self.written = 0
        if self.opened:
            return
        self.trajectory = Path(trajectory)
        exists = self.trajectory.is_file() and self.trajectory.stat().st_size > 0
        if not keep:
            if comm.rank == 0:
                self.trajectory.unlink(missing_ok=True)
        elif exists and len(observations):
            kept, problem = self._kept_frames(observations)
            if problem is None:
                self.written = kept
            else:
                aside = _set_aside(self.trajectory, comm)
                self.note = (
                    f"the trajectory {self.trajectory} {problem}: it was moved to {aside}, "
                    f"and the {len(observations)} observations are written afresh"
                )

    @classmethod
    def of_run(cls, trajectory, append, atoms, observations, **options):
        """The frames of an optimizer's ``trajectory`` (None: no trajectory, None),
        kept where ``append`` says, by default where the run resumed (``observations``
        not empty); ``options`` as the constructor takes them."""
        if trajectory is None:
            return None
        keep = len(observations) > 0 if append is None else bool(append)
        return cls(trajectory, atoms, keep, observations, **options)

    def _kept_frames(self, observations):
        """The number of frames in the kept file, and why they are not the first
        observations (None where they are)."""
        try:
            with Trajectory(self.trajectory, "r") as traj:
                frames = [traj[k] for k in range(len(traj))]
        except Exception as error:  # any damage: ULM, JSON, Unicode, struct errors
            return 0, f"cannot be read to its end ({type(error).__name__}: {error})"
        if len(frames) > len(observations):
            return len(frames), (
                f"holds {len(frames)} frames for {len(observations)} observations in the "
                "restart file"
            )
        for k, frame in enumerate(frames):
            expected = self._frame(observations.positions[k], 0.0, observations.forces[k])
            if not np.allclose(frame.positions, expected.positions, rtol=0, atol=SAME_POSITIONS):
                return len(frames), f"holds at frame {k} other positions than observation {k}"
        return len(frames), None

    def sync(self, observations):
        """Write the observations not yet in the trajectory."""
        if self.written >= len(observations):
            return
        frames = []
        for index in range(self.written, len(observations)):
            frames.append(
                self._frame(
                    observations.positions[index],
                    observations.energies[index],
                    observations.forces[index],
                    observations.stresses[index],
                    observations.results[index],
                )
            )
        if self.opened:
            for frame in frames:
                self.trajectory.write(frame)
        else:
            with Trajectory(self.trajectory, "a", comm=self.comm) as traj:
                traj.set_description(self.description)
                for frame in frames:
                    traj.write(frame)
        self.written = len(observations)

    def _frame(self, positions, energy, forces, stress=None, results=None):
        """The atoms (n) at ``positions`` (N, 3) with ``energy``, ``forces`` (N, 3), the
        ``stress`` (6,) where one was observed, and the calculator's other ``results``
        (a dict) where they are known; the frame's calculator bears the name and the
        parameters of the calculator that computed it (:func:`calculator_parameters`),
        which ASE's trajectory records."""
        frame = self.atoms.copy()
        coordinates = self.coordinates
        if coordinates is not None and coordinates.has_cell:
            configuration = coordinates.configuration(positions)
            energy = energy - coordinates.pressure * configuration.cell.volume
            forces = coordinates.atoms_forces(positions, forces)
            frame.set_cell(configuration.cell, scale_atoms=False)
            positions = configuration.positions
        frame.set_positions(positions, apply_constraint=False)
        results = {**(results or {}), "energy": energy, "forces": forces}
        if stress is not None:
            results["stress"] = stress
        frame.calc = SinglePointCalculator(frame, **results)
        name = calculator_name(self.atoms.calc)
        if name is not None:
            frame.calc.name = name
            computing = wrapped_calculators(self.atoms.calc)[-1]
            frame.calc.parameters.update(calculator_parameters(computing))
        return frame


def _file_state(path):
    """The inode, size and modification time (ns) of the file ``path``; None where there
    is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def _set_aside(path, comm):
    """Rename ``path`` to the first free ``<path>.damaged``, ``<path>.damaged.1``...;
    return the new name."""
    aside = path.with_name(path.name + ".damaged")
    number = 0
    while aside.exists():
        number += 1
        aside = path.with_name(f"{path.name}.damaged.{number}")
    if comm.rank == 0:
        os.replace(path, aside)
    return aside


def wrapped_calculators(calc):
    """``calc`` and the calculators it wraps, outermost first.

    Wrappers (counters, recorders) keep the calculator they wrap as ``calc``.
    """
    return list(calculator_chain(calc)) or [calc]


def calculator_name(calc):
    """The name ASE gives the calculator that computes (``calc.name``), wrappers looked
    through; None without a calculator."""
    return None if calc is None else getattr(wrapped_calculators(calc)[-1], "name", None)


def numeric_results(results):
    """The entries of ``results`` that ASE's trajectories store (``all_properties``)
    and that are numbers or numeric arrays, as float64 copies."""
    kept = {}
    for name, value in results.items():
        if name not in all_properties or isinstance(value, (bool, str)):
            continue
        array = np.asarray(value)
        if array.dtype.kind in "iuf":
            kept[name] = float(array) if array.ndim == 0 else array.astype(np.float64)
    return kept


def calculator_results(atoms):
    """What the calculator of ``atoms`` computed at their configuration, energy and
    forces left out (:func:`numeric_results`), or None without a calculator.

    The calculators a wrapper holds give their results too (a counting wrapper keeps
    the energy and forces; the charges and dipole are its calculator's), those of the
    outer calculator taking precedence; a wrapped calculator whose last
    configuration is not that of ``atoms`` gives none.
    """
    if atoms.calc is None:
        return None
    results = {}
    for calc in reversed(wrapped_calculators(atoms.calc)):
        computed = getattr(calc, "atoms", None)
        if calc is not atoms.calc and not _same_configuration(computed, atoms):
            continue
        results.update(numeric_results(getattr(calc, "results", None) or {}))
    for name in ("energy", "forces"):
        results.pop(name, None)
    return results


def _same_configuration(computed, atoms):
    """Whether the atoms ``computed`` (a calculator's copy, or None) are ``atoms``."""
    return (
        computed is not None
        and len(computed) == len(atoms)
        and np.array_equal(computed.numbers, atoms.numbers)
        and np.array_equal(computed.positions, atoms.positions)
        and np.array_equal(computed.cell.array, atoms.cell.array)
    )


def calculator_identity(calc):
    """The name and parameters of the calculator that computes, as one canonical string.

    Wrappers that keep the calculator they wrap as ``calc`` (counters, recorders) are
    looked through: a run resumed with another wrapper resumes. Parameters are those
    of ``todict()`` (what differs from the calculator's defaults).
    """
    calc = wrapped_calculators(calc)[-1]
    identity = {"name": type(calc).__name__, "parameters": calculator_parameters(calc)}
    return json.dumps(identity, sort_keys=True)


def calculator_parameters(calc):
    """The parameters of ``calc`` that differ from its defaults (``todict()``) as JSON
    values (lists for arrays and tuples); empty for a calculator without ``todict()``."""
    try:
        parameters = calc.todict()
    except Exception:  # a calculator without todict(): its name alone
        return {}
    return json.loads(encode(dict(parameters)))


def check_run(path, stored, current):
    """Raise :class:`RestartError` when a restart file holds another kind of run
    (:data:`RUNS`) than ``current``; a file or a run of no kind passes."""
    if stored is not None and current is not None and stored != current:
        raise RestartError(
            f"restart file {path} holds a {stored} ({RUNS.get(stored, 'another optimizer')}'s), "
            f"not a {current}: pass another restart file name; this one was left untouched"
        )


def system_of(atoms, cell=True):
    """The boundary conditions of ``atoms``, where ``cell`` their cell (Å), and the
    totals of their initial charges and magnetic moments (what a calculator that takes
    no charge or spin of its own reads), as the JSON values a restart file keeps:
    ``{"pbc": [bool] * 3, "cell": (3, 3) list or None, "charge": float, "magmom":
    float}``. A cell filter, which moves the cell, passes ``cell=False``."""
    return {
        "pbc": [bool(periodic) for periodic in atoms.pbc],
        "cell": atoms.cell.array.tolist() if cell else None,
        "charge": float(np.sum(atoms.get_initial_charges())),
        "magmom": float(np.sum(atoms.get_initial_magnetic_moments())),
    }


def check_system(path, stored, current):
    """Raise :class:`RestartError` where the restart file's observations were computed
    with other boundary conditions, initial charges or magnetic moments (in total), or in
    another cell (by more than :data:`SAME_START` Å in any component) than ``current``
    (:func:`system_of`); files written before it was recorded (``stored`` None or
    without the entry), runs that do not say (``current`` None) and cells of None
    pass."""
    if stored is None or current is None:
        return
    if list(stored["pbc"]) != list(current["pbc"]):
        raise RestartError(
            f"restart file {path} holds observations computed with periodic boundary "
            f"conditions {list(stored['pbc'])}, not these atoms' {list(current['pbc'])}: "
            "their energies are another system's; set the same pbc to resume, or pass "
            "another restart file name to start afresh; this one was left untouched"
        )
    for key, what in (("charge", "initial charges"), ("magmom", "initial magnetic moments")):
        if key in stored and abs(stored[key] - current[key]) > 1e-6:
            raise RestartError(
                f"restart file {path} holds observations computed with {what} summing to "
                f"{stored[key]:g}, not these atoms' {current[key]:g}: their energies are "
                "another state's; set the same to resume, or pass another restart file "
                "name to start afresh; this one was left untouched"
            )
    if stored.get("cell") is None or current.get("cell") is None:
        return
    difference = np.abs(np.asarray(stored["cell"]) - np.asarray(current["cell"])).max()
    if difference > SAME_START:
        raise RestartError(
            f"restart file {path} holds observations computed in another cell (a cell "
            f"vector component {difference:.3g} Å from these atoms'): their energies are "
            "another system's; set the same cell to resume, or pass another restart file "
            "name to start afresh; this one was left untouched"
        )


def check_calculator(path, stored, current):
    """Raise :class:`RestartError` when a restart file's calculator is not ``current``.

    Files written before the calculator was recorded (``stored`` None) pass.
    """
    if stored is not None and stored != current:
        raise RestartError(
            f"restart file {path} holds observations of another calculator ({stored}), "
            f"not of this one ({current}): attach the same calculator to resume, or pass "
            "another restart file name to start afresh; this one was left untouched"
        )


def check_start(path, given, start, observations, system=None):
    """Raise :class:`RestartError` when the positions ``given`` (N, 3) are neither the
    recorded ``start`` of the run nor a configuration of its ``observations``.

    Within :data:`SAME_START` Å per coordinate; the pending configuration counts as
    one of them. In the periodic cell of ``system`` (:func:`system_of`; a cell filter's
    has none) atoms a lattice vector apart are the same (a start wrapped into the
    cell). Files written before the start was recorded (``start`` None) pass.
    """
    if start is None:
        return
    candidates = [np.asarray(start, dtype=float), *observations.positions]
    pending = observations.state.get("pending")
    if pending is not None:
        candidates.append(np.asarray(pending, dtype=float))
    periodic = system is not None and system["cell"] is not None and any(system["pbc"])

    def apart(candidate):  # (N, 3)
        offset = given - candidate
        return find_mic(offset, system["cell"], system["pbc"])[0] if periodic else offset

    distance = min(np.abs(apart(candidate)).max() for candidate in candidates)
    if distance > SAME_START:
        raise RestartError(
            f"restart file {path} holds a run from another start: the atoms given are "
            f"{distance:.3g} Å (largest coordinate difference) from its start and from each "
            f"of its {len(observations)} configurations; pass the same start (or the last "
            "frame of its trajectory) to resume, or another restart file name to start "
            "afresh; this one was left untouched"
        )


def held_elsewhere(
    configurations, positions, free, cell=None, pbc=None, subspace=None, atom_rows=None
):
    """The first of ``configurations`` (m, N, 3) that the constraints holding
    ``positions`` (N, 3) cannot reach: a row more than :data:`SAME_START` Å off the
    displacements they allow, ``(index, where, distance)`` with ``where`` the row's name
    (``'atom 3'``, ``"the cell's row 1"``); None where each is reachable.

    The constraints hold the coordinates that ``free`` (bool (N, 3)) does not and,
    where ``subspace`` is given (:func:`asebo.optimize.subspace.free_subspace`: a plane or
    line along no axis, FixSymmetry, a filter's strain), allow displacements within it
    alone. Displacements of the first ``atom_rows`` rows (all by default; a cell
    filter's atoms, whose rows are Cartesian in ``cell``) are taken by the minimum image
    where ``pbc`` is periodic.

    Configurations computed without the constraints of this run: a search cannot reach
    them, and a model whose lowest point is one of them proposes it again at every step.
    """
    held = ~np.asarray(free, dtype=bool)  # (N, 3)
    if not held.any() and subspace is None:
        return None
    positions = np.asarray(positions, dtype=float)
    atom_rows = len(positions) if atom_rows is None else atom_rows
    periodic = pbc is not None and bool(np.any(pbc))
    for index, configuration in enumerate(configurations):
        offset = np.asarray(configuration, dtype=float) - positions  # (N, 3)
        if periodic:
            offset[:atom_rows] = find_mic(offset[:atom_rows], cell, pbc)[0]
        if subspace is None:
            offset = np.where(held, offset, 0.0)
        else:
            offset = offset - subspace.project(offset)
        distances = np.linalg.norm(offset, axis=1)  # (N,)
        row = int(distances.argmax())
        if distances[row] > SAME_START:
            where = f"atom {row}" if row < atom_rows else f"the cell's row {row - atom_rows}"
            return index, where, float(distances[row])
    return None


def check_held(path, configurations, positions, free, cell=None, pbc=None, **allowed):
    """Raise :class:`RestartError` where one of the ``configurations`` (m, N, 3) of the
    restart file ``path`` is one the constraints holding ``positions`` (N, 3) cannot
    reach (:func:`held_elsewhere`, which takes ``allowed``): computed without this
    run's constraints."""
    found = held_elsewhere(configurations, positions, free, cell, pbc, **allowed)
    if found is not None:
        raise held_error(path, *found)


def held_error(path, index, where, distance):
    """The :class:`RestartError` of :func:`check_held`: configuration ``index`` of the
    restart file ``path`` has an atom or cell row (``where``, of :func:`held_elsewhere`)
    ``distance`` Å from where it is held."""
    return RestartError(
        f"restart file {path} holds configurations computed without this run's "
        f"constraints (in configuration {index}, {where} stands {distance:.3g} Å "
        "from where they hold it): a search under them cannot reach those; give the "
        "constraints of its run to resume, or pass another restart file name to start "
        "afresh; this one was left untouched"
    )


def check_choice(path, what, stored, current):
    """Raise :class:`RestartError` when the restart file's ``what`` (``'kernel'``,
    ``'prior'``) was ``stored``, not the ``current`` one given; files written before
    it was recorded (``stored`` None) pass."""
    if stored is not None and stored != current:
        raise RestartError(
            f"restart file {path} holds a run with {what} {stored}, not {current} as given: "
            f"pass the same {what} to resume, or another restart file name to start "
            "afresh; this one was left untouched"
        )


def choices_of_run(representation, prior):
    """The kernel and prior of a run, as the restart file records them: the
    representation's name, the prior's label and, for a prior calculator, its name and
    parameters (:func:`calculator_identity`)."""
    calculator = getattr(prior, "calculator", None)
    return {
        "kernel": representation.name,
        "prior": prior.label,
        "prior_calculator": None if calculator is None else calculator_identity(calculator),
    }


def compare_choices(path, state, chosen, given):
    """Refuse a resume whose ``kernel`` or ``prior``, ``given``, is not the restart
    file's; the notes for the log where one was not given and the default differs.

    Parameters
    ----------
    path : str
        The restart file.
    state : dict
        Its run's state; updated in place to ``chosen``.
    chosen : dict
        :func:`choices_of_run` of this run.
    given : dict
        ``{'kernel': bool, 'prior': bool}``: whether each was an argument.
    """
    stored = {name: state.get(name, chosen[name]) for name in chosen}
    notes = []
    for what, names in (("kernel", ["kernel"]), ("prior", ["prior", "prior_calculator"])):
        if all(stored[name] == chosen[name] for name in names):
            continue
        was, now = (_choice_text(stored, names), _choice_text(chosen, names))
        if given[what]:
            check_choice(path, what, was, now)
        notes.append(f"the restart file's run took {what} {was}; this one takes {now}, the default")
    state.update(chosen)
    return notes


def _choice_text(choices, names):
    """How a log line or message names the kernel or prior of ``choices``."""
    return " ".join(repr(choices[name]) for name in names if choices[name] is not None)


def check_restart(path):
    """The content of the restart file ``path`` (None where there is none);
    :class:`RestartError` when it cannot be resumed from.

    For a check before anything else about the run (as ASE's optimizers read their
    restart file first); the atoms are compared later, in :meth:`Observations.load`.
    """
    if path is not None and os.path.isfile(path):
        return _read_restart(path)
    return None


def _read_restart(path):
    try:
        with open(path) as fd:
            text = fd.read()
        json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise RestartError(
            f"Could not decode restart file {path} as JSON, so it cannot be read ({error}). "
            "It was left untouched: move it away (or pass another restart name) to start "
            "afresh"
        ) from error
    try:
        state = decode(text)  # ASE's arrays within
        if not isinstance(state, dict):
            raise TypeError("not a JSON object")
        missing = {"numbers", "positions", "energies", "forces", "trust_radius"} - set(state)
        if missing:
            raise KeyError(f"missing {sorted(missing)}")
        if state.get("version") != RESTART_VERSION:
            raise KeyError(f"version {state.get('version')!r}, not {RESTART_VERSION!r}")
        m = len(state["energies"])
        if len(state["positions"]) != m or len(state["forces"]) != m:
            raise KeyError("positions, energies and forces differ in length")
        if "stresses" in state and np.shape(state["stresses"]) != (m, 6):
            raise ValueError(f"stresses of shape {np.shape(state['stresses'])}, not ({m}, 6)")
        results = state.get("results", [None] * m)
        if len(results) != m or not all(r is None or isinstance(r, dict) for r in results):
            raise ValueError("results that are not one dictionary per observation")
        _check_stored_values(state)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise RestartError(
            f"restart file {path} cannot be read ({error}). It was left untouched: move it "
            "away (or pass another restart name) to start afresh"
        ) from error
    return state


def _check_stored_values(state):
    """Raise ValueError for a stored value the optimizer could not resume from."""
    n = len(state["numbers"])
    for name in ("positions", "forces"):
        values = np.asarray(state[name], dtype=float)
        if len(values) and values.shape[1:] != (n, 3):
            raise ValueError(f"{name} of shape {values.shape[1:]}, not ({n}, 3) per observation")
        if not np.isfinite(values).all():
            raise ValueError(f"{name} that are not finite")
    if not np.isfinite(np.asarray(state["energies"], dtype=float)).all():
        raise ValueError("energies that are not finite")
    for name in ("start", "pending", "next"):  # a minimisation's, a saddle search's
        value = state.get(name)
        if value is not None:
            value = np.asarray(value, dtype=float)
            if value.shape != (n, 3) or not np.isfinite(value).all():
                raise ValueError(f"a {name} of shape {value.shape}, not ({n}, 3) finite positions")
    warm = state.get("warm_start", 0)
    if not (isinstance(warm, int) and 0 <= warm <= len(state["energies"])):
        raise ValueError(f"warm_start {warm!r}, not a count of the observations")
    proposals = state.get("proposals", [])
    if not isinstance(proposals, list) or not all(isinstance(p, dict) for p in proposals):
        raise ValueError("proposals that are not a list of records")
    system = state.get("system")
    if system is not None:
        cell = system.get("cell")
        totals = [system.get(key, 0.0) for key in ("charge", "magmom")]
        if (
            np.shape(system.get("pbc")) != (3,)
            or not (cell is None or (np.shape(cell) == (3, 3) and np.isfinite(cell).all()))
            or not all(_is_real(total) and np.isfinite(total) for total in totals)
        ):
            raise ValueError(
                f"a system {system!r}, not three pbc flags, a 3x3 cell and finite totals"
            )
    radius = state["trust_radius"]
    if not (_is_real(radius) and np.isfinite(radius) and radius > 0):
        raise ValueError(f"trust_radius {radius!r}, not a positive length")
    predicted = state.get("predicted_energy")
    if predicted is not None and not (_is_real(predicted) and np.isfinite(predicted)):
        raise ValueError(f"predicted_energy {predicted!r}, not a finite energy")


def _umask():
    """The process's umask: read from ``/proc/self/status`` where Linux gives it, else
    set and restored at once."""
    try:
        with open("/proc/self/status") as fd:
            for line in fd:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _is_real(value):
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
