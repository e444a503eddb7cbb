"""Sella's own saddle test, with BOSaddle in place of Sella.

The system, start and assertions of Sella's integration test of a Morse cluster
(``tests/integration/test_morse_cluster.py``, ``order=1``), written anew: four Xe atoms
drawn at random (``numpy.random.RandomState(4)``, normal with a scale of 3 Å) under a
Morse potential of xenon's parameters, searched to ``fmax = 1e-3`` eV/Å; the end must
have converged forces and exactly one negative curvature, here by finite differences
of the forces with the rigid motions left out (Sella's test asks Sella's own Hessian).
"""

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.morse import MorsePotential
from ase.units import kB

from asebo.optimize.model_hessian import internal_basis

pytest.importorskip("sella")

from asebo import BOSaddle  # noqa: E402


def xenon_morse():
    """Xenon's Morse potential (Sella's test, after Z. Naturforsch. A 42, 466 (1987))."""
    return MorsePotential(alpha=226.9 * kB, r0=4.73, rho0=4.73 * 1.099)


def curvatures(atoms, step=1e-3):
    """The eigenvalues of the finite-difference Hessian (eV/Å²) at ``atoms``' positions,
    rigid motions left out, in ascending order."""
    start = atoms.positions.copy()  # (n, 3)
    hessian = np.zeros((start.size, start.size))
    probe = atoms.copy()
    probe.calc = xenon_morse()
    for coordinate in range(start.size):
        for sign in (1.0, -1.0):
            moved = start.ravel().copy()
            moved[coordinate] += sign * step
            probe.positions = moved.reshape(start.shape)
            hessian[coordinate] -= sign * probe.get_forces().ravel() / (2 * step)
    basis = internal_basis(start, np.ones(start.shape, dtype=bool))  # (3n, 3n - 6)
    return np.linalg.eigvalsh(basis.T @ (0.5 * (hessian + hessian.T)) @ basis)


@pytest.mark.slow
def test_morse_cluster_first_order_saddle():
    rng = np.random.RandomState(4)
    atoms = Atoms(["Xe"] * 4, rng.normal(size=(4, 3), scale=3.0))
    atoms.calc = xenon_morse()
    search = BOSaddle(atoms, logfile=None)
    assert search.run(fmax=1e-3, steps=400)
    assert np.linalg.norm(atoms.get_forces(), axis=1).max() < 1e-3
    assert (curvatures(atoms) < 0).sum() == 1


def test_a_heavy_cluster_saddle_point_below_ten_wavenumbers_is_found():
    # Sella finds the cluster's saddle point (imaginary mode near 7i cm⁻¹: xenon is
    # heavy and its Morse bonds weak); from there rattled, BOSaddle ends on it, converged:
    # a flat region is judged by the model's curvature, not by a frequency
    rng = np.random.RandomState(4)
    atoms = Atoms(["Xe"] * 4, rng.normal(size=(4, 3), scale=3.0))
    atoms.calc = xenon_morse()
    from sella import Sella

    Sella(atoms, internal=True, order=1, logfile=None).run(fmax=1e-3, steps=300)
    saddle = atoms.get_potential_energy()
    atoms.rattle(0.05, seed=1)
    search = BOSaddle(atoms, logfile=None)
    assert search.run(fmax=1e-3, steps=30)
    assert 0 < search.result.imaginary < 10
    assert atoms.get_potential_energy() == pytest.approx(saddle, abs=1e-5)
    assert (curvatures(atoms) < 0).sum() == 1
