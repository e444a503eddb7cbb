"""Whether a relaxation ended at a minimum: the target's own Hessian at its endpoint.

``--audit`` of the molecule benchmarks (``asebo bench baker``, the drug-like sets,
``rough``, ``s22``, ``g2``) computes, for every endpoint, the Hessian of the target by
central differences of its forces (6n calls, not counted in the table), and its
harmonic frequencies with the rigid motions projected out in mass-weighted
coordinates (E. B. Wilson, J. C. Decius, P. C. Cross, *Molecular Vibrations*,
McGraw-Hill (1955), ch. 2). An endpoint with a mode above :data:`THRESHOLD` cm⁻¹
imaginary is a saddle point; the section it writes under the table counts them per
optimizer and compares each endpoint's energy with L-BFGS's from the same start.
"""

import numpy as np
from ase import units

from asebo.optimize.model_hessian import mass_weighted_internal_basis

THRESHOLD = 50.0  # cm⁻¹: an imaginary mode above this is not noise
DISPLACEMENT = 0.005  # Å, of the central differences
HIGHER = 0.01  # eV: an endpoint this far above L-BFGS's is another minimum
TO_WAVENUMBER = units._hbar * 1e10 / np.sqrt(units._e * units._amu) / units.invcm
"""sqrt(eV / (Å² amu)) in cm⁻¹: the frequency of a mass-weighted curvature."""


def finite_difference_hessian(atoms, calculator, displacement=DISPLACEMENT):
    """Hessian (3n, 3n) of ``calculator``'s energy at ``atoms``, eV/Å², symmetrised.

    Central differences of the forces, two calls per coordinate.
    """
    work = atoms.copy()
    work.calc = calculator
    hessian = np.zeros((3 * len(atoms), 3 * len(atoms)))
    for index in range(3 * len(atoms)):
        for sign in (1.0, -1.0):
            moved = atoms.positions.copy()
            moved.flat[index] += sign * displacement
            work.positions = moved
            hessian[index] -= sign * work.get_forces().ravel() / (2.0 * displacement)
    return 0.5 * (hessian + hessian.T)


def frequencies(hessian, atoms):
    """Harmonic frequencies (k,) in cm⁻¹, ascending, imaginary ones negative.

    The rigid motions (translations, and rotations for a molecule not in a periodic
    cell) are projected out of the mass-weighted Hessian first, so ``k`` is ``3n - 6``
    for a nonlinear molecule.

    Parameters
    ----------
    hessian : array (3n, 3n)
        eV/Å².
    atoms : ase.Atoms
    """
    masses = atoms.get_masses()
    weights = np.repeat(np.sqrt(masses), 3)  # (3n,)
    weighted = hessian / np.outer(weights, weights)  # (3n, 3n), eV/(Å² amu)
    rotations = not np.any(atoms.pbc)
    basis = mass_weighted_internal_basis(atoms.get_positions(), masses, rotations)  # (3n, k)
    curvatures = np.linalg.eigvalsh(basis.T @ weighted @ basis)  # (k,)
    return np.sign(curvatures) * np.sqrt(np.abs(curvatures)) * TO_WAVENUMBER


def imaginary_modes(atoms, calculator, hessian=None):
    """The imaginary frequencies above :data:`THRESHOLD` at ``atoms``, cm⁻¹ (positive);
    ``hessian`` (3n, 3n), eV/Å², where computed already."""
    if hessian is None:
        hessian = finite_difference_hessian(atoms, calculator)
    found = frequencies(hessian, atoms)
    return [float(-f) for f in found if f < -THRESHOLD]


def lowest_mode(hessian, atoms):
    """The unit Cartesian displacement (n, 3) of the lowest mass-weighted curvature of
    ``hessian`` (3n, 3n) at ``atoms``, the rigid motions left out as in
    :func:`frequencies`."""
    masses = atoms.get_masses()
    weights = np.repeat(np.sqrt(masses), 3)  # (3n,)
    rotations = not np.any(atoms.pbc)
    basis = mass_weighted_internal_basis(atoms.get_positions(), masses, rotations)  # (3n, k)
    weighted = hessian / np.outer(weights, weights)
    _, vectors = np.linalg.eigh(basis.T @ weighted @ basis)
    displacement = (basis @ vectors[:, 0]) / weights  # (3n,): back to Cartesian
    return (displacement / np.linalg.norm(displacement)).reshape(-1, 3)


def mode_overlap(reference, mode, other, other_mode):
    """The absolute overlap of unit modes (n, 3) at two configurations of one molecule:
    ``other_mode`` turned by the rotation that best lays ``other`` onto ``reference``
    (W. Kabsch, Acta Cryst. A 32, 922 (1976); none in a periodic cell), 1 for the same
    motion, 0 for orthogonal ones."""
    turn = np.eye(3)
    if not np.any(reference.pbc):
        from calculators.box import kabsch_rotation

        here = other.positions - other.positions.mean(axis=0)
        there = reference.positions - reference.positions.mean(axis=0)
        turn = kabsch_rotation(here, there)
    return float(abs(np.vdot(mode, np.asarray(other_mode) @ turn.T)))


def audit_section(results, labels, reference="lbfgs"):
    """Markdown lines of the audit under a benchmark's table.

    Parameters
    ----------
    results : dict
        ``{row: {label: result}}``; a result audited has ``imaginary`` (the list of
        :func:`imaginary_modes`) and ``energy``.
    labels : list of str
    reference : str
        The optimizer whose endpoints the others' energies are compared with.

    Returns
    -------
    list of str
    """
    saddles = {label: [] for label in labels}
    above = dict.fromkeys(labels, 0)
    below = dict.fromkeys(labels, 0)
    for row, runs in results.items():
        base = runs.get(reference, {}).get("energy")
        for label in labels:
            run = runs.get(label, {})
            if run.get("imaginary"):
                saddles[label].append(f"{row} ({run['imaginary'][-1]:.0f}i cm⁻¹)")
            if base is None or "energy" not in run or label == reference:
                continue
            above[label] += run["energy"] > base + HIGHER
            below[label] += run["energy"] < base - HIGHER
    lines = [
        "",
        f"Endpoint audit: the target's finite-difference Hessian at each endpoint; a saddle "
        f"has a mode above {THRESHOLD:.0f}i cm⁻¹; above and below: endpoints more than "
        f"{HIGHER} eV from {reference}'s from the same start.",
        "",
        "| | " + " | ".join(labels) + " |",
        "|" + "---|" * (len(labels) + 1),
        "| **saddles** | " + " | ".join(str(len(saddles[label])) for label in labels) + " |",
    ]
    if reference in labels:
        for name, counts in (("above", above), ("below", below)):
            lines.append(
                f"| **{name} {reference}** | "
                + " | ".join("-" if label == reference else str(counts[label]) for label in labels)
                + " |"
            )
    lines.append("")
    lines += [
        f"- {label} saddles: " + "; ".join(saddles[label]) for label in labels if saddles[label]
    ]
    return lines
