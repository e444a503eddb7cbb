"""The harmonic modes at a saddle point: its imaginary frequencies and the mode of the
reaction, from the model's Hessian (no call) or the calculator's (finite differences).

The Hessian is mass-weighted and its rigid motions are projected out (the
translations, and for a molecule the rotations, those that leave its held atoms in
place where some are held; a periodic cell keeps its rotations as vibrations), as
E. B. Wilson, J. C. Decius and P. C. Cross, *Molecular Vibrations*, McGraw-Hill (1955),
ch. 2, do; held atoms do not move. A
frequency below ``-IMAGINARY_THRESHOLD`` cm⁻¹ is imaginary: softer negative
curvatures are within the noise of a finite-difference Hessian, as in the endpoint
audit of the benchmarks.
"""

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from ase import units

from asebo.optimize.model_hessian import (
    curvature_with_evidence,
    mass_weighted_internal_basis,
    prior_where_interpolated,
)
from asebo.saddle.order import IMAGINARY_THRESHOLD

DISPLACEMENT = 0.005
"""Å, of the central differences of the calculator's forces."""
TO_WAVENUMBER = units._hbar * 1e10 / np.sqrt(units._e * units._amu) / units.invcm
"""sqrt(eV / (Å² amu)) in cm⁻¹: the frequency of a mass-weighted curvature."""


@dataclass(frozen=True)
class NormalModes:
    """The vibrations of a Hessian at a configuration.

    Attributes
    ----------
    frequencies : array (k,)
        cm⁻¹, ascending; imaginary ones negative.
    modes : array (k, n, 3)
        The Cartesian displacement of each mode, its largest atomic move 1.
    """

    frequencies: np.ndarray
    modes: np.ndarray

    @property
    def imaginary(self):
        """The imaginary frequencies above :data:`IMAGINARY_THRESHOLD`, cm⁻¹, positive,
        largest first."""
        return [float(-f) for f in self.frequencies if f < -IMAGINARY_THRESHOLD]

    @property
    def order(self):
        """How many imaginary modes: 1 at a first-order saddle point."""
        return len(self.imaginary)

    @property
    def lowest(self):
        """The displacement (n, 3) of the lowest mode: the reaction's at a saddle point."""
        return self.modes[0]


def normal_modes(hessian, atoms, free, rotations):
    """The :class:`NormalModes` of ``hessian`` at ``atoms``.

    Parameters
    ----------
    hessian : array (3n, 3n)
        eV/Å², atom-major; rows and columns of held coordinates are not read.
    atoms : ase.Atoms
        The configuration and its masses.
    free : bool array (n, 3)
        The coordinates no constraint holds.
    rotations : bool
        Whether rotations are rigid motions (a molecule, not a periodic cell).
    """
    positions, masses = atoms.positions, atoms.get_masses()
    weights = np.repeat(np.sqrt(masses), 3)  # (3n,)
    basis = mass_weighted_internal_basis(positions, masses, rotations, free)  # (3n, k)
    weighted = np.asarray(hessian) / np.outer(weights, weights)  # (3n, 3n), eV/(Å² amu)
    curvatures, vectors = np.linalg.eigh(basis.T @ weighted @ basis)  # (k,), (k, k)
    frequencies = np.sign(curvatures) * np.sqrt(np.abs(curvatures)) * TO_WAVENUMBER
    displacements = ((basis @ vectors).T / weights).reshape(len(curvatures), -1, 3)  # (k, n, 3)
    largest = np.linalg.norm(displacements, axis=2).max(axis=1)  # (k,)
    return NormalModes(frequencies, displacements / largest[:, None, None])


def calculator_hessian(atoms, calculator, free, displacement=DISPLACEMENT):
    """The calculator's Hessian (3n, 3n) at ``atoms``, eV/Å²: ASE's central differences
    of its forces (:class:`ase.vibrations.Vibrations`, ``6 f + 1`` calls for ``f`` atoms
    that move), zero in the rows and columns of held atoms.

    Parameters
    ----------
    atoms : ase.Atoms
    calculator : ase calculator
    free : bool array (n, 3)
        The coordinates no constraint holds; an atom with none is not displaced.
    displacement : float
        Å.
    """
    from ase.vibrations import Vibrations  # it brings Matplotlib: only when asked

    probe = atoms.copy()
    probe.calc = calculator
    moving = np.flatnonzero(np.asarray(free).any(axis=1))  # (f,)
    with tempfile.TemporaryDirectory() as folder:
        vibrations = Vibrations(
            probe, indices=moving, name=str(Path(folder) / "vib"), delta=displacement
        )
        vibrations.run()
        block = vibrations.get_vibrations().get_hessian_2d()  # (3f, 3f)
    rows = (3 * moving[:, None] + np.arange(3)).ravel()  # (3f,)
    hessian = np.zeros((3 * len(atoms), 3 * len(atoms)))
    hessian[np.ix_(rows, rows)] = 0.5 * (block + block.T)
    return hessian


def model_hessian(gp, observations, positions, free, rotations, searched):
    """The model's Hessian (3n, 3n) at ``positions``, eV/Å², no call: the GP's, each
    negative curvature that neither the prior calculator nor a configuration computed
    supports (:func:`asebo.optimize.model_hessian.evidence_of_descent`) replaced by the
    prior's own where that is positive
    (:func:`asebo.optimize.model_hessian.prior_where_interpolated`), as
    :meth:`asebo.BOOptimizer.model_hessian` reads it: between few calls the GP's mean
    can curve down by itself, most of all across a band, whose calls lie along a path.
    Where a saddle search ended at ``positions`` (``searched``), the lowest curvature is
    the one its walk maximised along and is kept, as its own order verdict keeps it
    (:func:`asebo.saddle.order.judge_order`).

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        Fitted to every one of ``observations``.
    observations : asebo.optimize.observations.Observations
    positions : array (n, 3)
    free : bool array (n, 3)
    rotations : bool
        Whether rotations are rigid motions too.
    searched : bool
        Whether a saddle search ended there.
    """
    _, curvature = curvature_with_evidence(
        gp, observations, positions, free, rotations, gp.prior.is_calculator, False
    )
    if searched and len(curvature.downward):
        evidence = curvature.evidence.copy()
        evidence[curvature.downward[0]] = True
        curvature = replace(curvature, evidence=evidence)
    return prior_where_interpolated(curvature, gp.prior.for_hessian(), positions).hessian
