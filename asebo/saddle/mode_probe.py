"""The mode a saddle search of a periodic system climbs from its start, tested by calls.

From the start, the walk on the model climbs along the model's lowest mode
(:mod:`asebo.saddle.model_search`). Under a prior calculator (a GFN-xTB method, EMT)
that mode is the prior's, which knows the bonds. Under the pair springs, the default
prior of a periodic system, it is the softest mode of a harmonic model around the
guess, whose curvature at a compressed guess (an adatom pressed onto a bridge) the
springs do not know: the walk climbs it, pushing surface atoms into their slab. So,
before the first walk, the model's lowest mode at the start is tested by calls: the
configuration ``probe_length`` Å (the largest atomic move) along it is computed, an
observation as any other, which teaches the GP the curvature along that mode, and the
model is fitted again. Where its lowest mode then still lies along the one probed (the
absolute overlap of the unit modes at least ``probe_overlap``), that mode is the one
climbed; else the new lowest mode is probed, ``mode_probes`` calls at most. This is the
lowest-mode search of the GP-accelerated dimer method (O.-P. Koistinen, V. Ásgeirsson,
A. Vehtari and H. Jónsson, J. Chem. Theory Comput. 16, 499 (2020)), its rotations made
on the GP, with the probe calls kept as observations
(:class:`asebo.optimize.settings.SaddleSettings`). Where a map of the crystal carries
the start onto itself and reverses the mode the test ends on, each configuration is
then observed with its image under that map too (:meth:`StartModeTest._take_crystal_map`,
:mod:`asebo.optimize.crystal_symmetry`). A molecule under the Lindh model is
not tested: its prior is reversed along the bonds the guess makes and breaks instead
(:class:`asebo.model.priors.RecentredLindh`), which holds the reaction's mode all
along the walk where probes at the start teach the model only there.
"""

from dataclasses import dataclass

import numpy as np
from ase.parallel import broadcast
from scipy.spatial.transform import Rotation

from asebo.model.priors import PriorCalculationError
from asebo.optimize.crystal_symmetry import reversing_map
from asebo.optimize.model_hessian import internal_basis, posterior_hessian
from asebo.optimize.walk_trust import largest_norm
from asebo.threads import with_optimizer_threads


def mode_overlap(start, start_mode, end, end_mode, rotations):
    """The absolute overlap of the unit modes ``start_mode`` at ``start`` and
    ``end_mode`` at ``end`` (each (n, 3)): 1 for the same motion, 0 for orthogonal
    ones. With ``rotations`` (a molecule), ``start_mode`` is first turned by the
    rotation that best lays ``start`` onto ``end`` (W. Kabsch, Acta Cryst. A 32, 922
    (1976), as :meth:`scipy.spatial.transform.Rotation.align_vectors` finds it)."""
    mode = np.asarray(start_mode, dtype=float)  # (n, 3)
    if rotations:
        start = np.asarray(start) - np.mean(start, axis=0)
        end = np.asarray(end) - np.mean(end, axis=0)
        turn, _ = Rotation.align_vectors(end, start)
        mode = turn.apply(mode)
    return float(abs(np.vdot(mode, end_mode)))


def lowest_mode(gp, positions, free, rotations):
    """The lowest curvature (eV/Å²) of the GP's mean at ``positions`` (n, 3) and its unit
    mode (n, 3), in the ``free`` (n, 3) coordinates less the rigid motions (the
    rotations too with ``rotations``)."""
    hessian = posterior_hessian(gp, positions, free)  # (3n, 3n)
    basis = internal_basis(positions, free, rotations)  # (3n, k)
    values, vectors = np.linalg.eigh(basis.T @ hessian @ basis)  # (k,), (k, k)
    return float(values[0]), (basis @ vectors[:, 0]).reshape(np.shape(positions))


@dataclass(frozen=True)
class ModeProbe:
    """The next call of the test of the start's lowest mode, or its end.

    Attributes
    ----------
    positions : array (n, 3) or None
        Where to compute next; None where the test has ended.
    mode : array (n, 3)
        The model's lowest unit mode at the start.
    curvature : float
        eV/Å², the model's curvature along it.
    overlap : float or None
        The absolute overlap of ``mode`` with the mode probed last; None before the
        first probe.
    """

    positions: np.ndarray | None
    mode: np.ndarray
    curvature: float
    overlap: float | None

    def note(self, probes):
        """The log's line where the test ends after ``probes`` probe calls."""
        agreed = "lies along" if self.positions is None and self.overlap is not None else ""
        return (
            f"after {probes} probe calls the start's lowest mode by the model "
            f"({self.curvature:.3g} eV/Å²) {agreed or 'still turns from'} the mode probed "
            f"last (overlap {self.overlap or 0.0:.2f}): the walk climbs along it"
        )


def next_probe(gp, start, free, rotations, probed, settings):
    """The :class:`ModeProbe` after the probes along the unit modes ``probed`` (list of
    (n, 3)) from ``start`` (n, 3): the configuration along the model's lowest mode
    there, or the end of the test where that mode lies along the last one probed or
    ``settings.mode_probes`` were made.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted to every configuration computed, ``start`` and the probes among them.
    start : array (n, 3)
    free : bool array (n, 3)
    rotations : bool
        Whether rotations are rigid motions (a molecule's).
    probed : list of array (n, 3)
    settings : asebo.optimize.settings.SaddleSettings
    """
    curvature, mode = lowest_mode(gp, start, free, rotations)
    overlap = None if not probed else abs(float(np.vdot(mode, probed[-1])))
    agreed = overlap is not None and overlap >= settings.probe_overlap
    if agreed or len(probed) >= settings.mode_probes:
        return ModeProbe(None, mode, curvature, overlap)
    positions = np.asarray(start) + settings.probe_length * mode / largest_norm(mode)
    return ModeProbe(positions, mode, curvature, overlap)


class StartModeTest:
    """The test of the start's lowest mode in :class:`asebo.saddle.BOSaddle`, and the
    record of the mode climbed from the start: a mixin of a driver with ``atoms``,
    ``comm``, ``observations``, ``settings``, ``prior``, ``surrogate``, ``rotations``,
    ``step_log``, ``reason``, ``_predicted``, ``_free()``, ``_fitted()`` and ``_save()``."""

    def _keep_start_mode(self):
        """Keep the model's lowest mode at the start, the mode the first walk climbs,
        in the record (``start_mode``) once, where the start is computed: what
        :attr:`asebo.saddle.BOSaddle.result` compares the endpoint's imaginary mode
        with. Under a prior calculator only the configurations the first walk's model
        was fitted to are counted (``start_seen``), and the mode is found where the
        search ends (:meth:`_start_mode_afterwards`): the model's Hessian calls the
        prior, and a calculator that starts from its last state (tblite's SCF from the
        last wavefunction) would then give the walk other values. Rank 0 computes the
        mode and broadcasts it."""
        state = self.observations.state
        start = np.asarray(state["start"], dtype=float)  # (n, 3)
        if "start_mode" in state or self.observations.find(start) is None:
            return
        if self.prior.is_calculator:
            state.setdefault("start_seen", len(self.observations))
            return
        mode = None
        if self.comm.rank == 0:
            _, mode = lowest_mode(self._fitted(), start, self._free(), self.rotations)
        state["start_mode"] = broadcast(mode, root=0, comm=self.comm)

    @with_optimizer_threads
    def _start_mode_afterwards(self):
        """Under a prior calculator, the model's lowest mode (n, 3) at the start as the
        first walk's model had it: a GP fitted to the ``start_seen`` configurations
        alone (:meth:`asebo.optimize.surrogate_model.Surrogate.fitted_alone`), kept in
        the record; None where no walk began from the start, or where the prior
        fails at a configuration of the Hessian (the overlap is then not known, and
        the search's end stands). Rank 0 computes it and broadcasts it."""
        state = self.observations.state
        if "start_mode" in state:
            return np.asarray(state["start_mode"], dtype=float)
        seen = state.get("start_seen")
        if seen is None:
            return None
        start = np.asarray(state["start"], dtype=float)  # (n, 3)
        mode = None
        if self.comm.rank == 0:
            positions, energies, forces = self.observations.arrays()
            first = (positions[:seen], energies[:seen], forces[:seen])
            try:
                gp = self.surrogate.fitted_alone(first)
                _, mode = lowest_mode(gp, start, self._free(), self.rotations)
            except PriorCalculationError:
                mode = None
        mode = broadcast(mode, root=0, comm=self.comm)
        if mode is None:
            del state["start_seen"]  # not tried again
        else:
            state["start_mode"] = mode
        return mode

    def _take_crystal_map(self, start):
        """Where a map of the crystal carries ``start`` (n, 3) onto itself and reverses
        the start's mode (:func:`asebo.optimize.crystal_symmetry.reversing_map`), name
        it in the record (``crystal_map``): every fit then takes each configuration's
        image under it as an observation. The log's line, if any."""
        if not self.settings.crystal_images:
            return []
        state = self.observations.state
        held = ~self._free().all(axis=1)  # (n,)
        cell = self.atoms.cell.array
        found = reversing_map(start, self.atoms.numbers, cell, held, state["start_mode"])
        if found is None:
            return []
        state["crystal_map"] = found.as_state()
        return [
            "a map of the crystal carries the start onto itself and reverses that mode: "
            "each configuration computed is observed with its image under it"
        ]

    def _probe_step(self):
        """Move the atoms to the next probe of the start's lowest mode and return True;
        False where the test has ended or does not apply (a molecule, a prior
        calculator, no probes in the settings, a start not computed). Rank 0 decides
        and broadcasts."""
        state = self.observations.state
        if state.get("mode_tested") or self.rotations or self.prior.is_calculator:
            return False
        if not self.settings.mode_probes:
            return False
        start = np.asarray(state["start"], dtype=float)  # (n, 3)
        if self.observations.find(start) is None:
            return False
        probed = [np.asarray(mode, dtype=float) for mode in state.get("probed", [])]
        probe = None
        if self.comm.rank == 0:
            gp = self._fitted()
            probe = next_probe(gp, start, self._free(), self.rotations, probed, self.settings)
        probe = broadcast(probe, root=0, comm=self.comm)
        if probe.positions is None:
            state["mode_tested"] = True
            state["start_mode"] = probe.mode
            self.step_log.notes([probe.note(len(probed)), *self._take_crystal_map(start)])
            return False
        state["probed"] = [*probed, probe.mode]
        self.reason = "probe: lowest mode"
        self._predicted = None
        self._save(probe.positions)
        self.atoms.positions = probe.positions
        return True
