"""One call of a calculator, as the counting wrappers make it: the energy, the
force-consistent energy and the forces at a copy of the atoms."""

from ase.calculators.calculator import PropertyNotImplementedError


def computed(atoms, calculator):
    """The energy, force-consistent energy (the energy where ``calculator`` gives none)
    and forces of ``calculator`` at a copy of ``atoms``, the forces as it gives them (no
    constraint applied, as of any calculator): (the copy, the results)."""
    work = atoms.copy()
    work.calc = calculator
    energy = work.get_potential_energy()
    try:
        free_energy = work.get_potential_energy(force_consistent=True)
    except PropertyNotImplementedError:
        free_energy = energy
    forces = work.get_forces(apply_constraint=False)  # (n, 3)
    return work, {"energy": energy, "free_energy": free_energy, "forces": forces}
