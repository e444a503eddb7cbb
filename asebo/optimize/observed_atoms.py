"""What the optimizer asks of the calculator: ASE's view of the system that computes each
configuration once, the force-consistent energy as ASE's optimizers take it, and the
message for a calculator that returns NaN or inf."""

import numpy as np
from ase.calculators.calculator import PropertyNotImplementedError
from ase.optimize.optimize import OptimizableAtoms

from asebo.optimize.observations import calculator_results


class ObservedAtoms(OptimizableAtoms):
    """ASE's view of the atoms (or of a cell filter) that computes each configuration once.

    ``observe()`` returns the energy and the unconstrained forces (N, 3) at the
    system's positions, calling the calculator only for a configuration not seen
    before; the constraints of ``atoms``, the atoms behind the system, act on their
    first ``len(atoms)`` rows, and the gradient is projected onto ``subspace``
    (:class:`asebo.optimize.subspace.FreeSubspace`, the cell rows included) where given.
    """

    def __init__(self, system, atoms, observe, subspace=None):
        super().__init__(system)
        self.constrained = atoms
        self.observe = observe
        self.subspace = subspace

    def get_gradient(self):
        forces = self.observe()[1].copy()  # (N, 3)
        for constraint in self.constrained.constraints:
            constraint.adjust_forces(self.constrained, forces[: len(self.constrained)])
        if self.subspace is not None:
            forces = self.subspace.project(forces)
        return -forces.ravel()

    def get_value(self):
        return self.observe()[0]


class ComputedResults:
    """The energy and forces a system's calculator computes.

    The energy is the force-consistent one (``free_energy``, whose gradient the forces
    are; with a filter's ``p V`` term) where the calculator gives it, as ASE's
    optimizers take it, else the energy: decided at the first call, as ASE's
    ``_use_force_consistent_energy`` does, and asked of the system (a cell filter too)
    the same way at every call.
    """

    def __init__(self):
        self.force_consistent = None  # decided at the first call

    def results(self, system):
        """The energy (eV) and the unconstrained forces (N, 3) of ``system``."""
        return self._energy(system), system.get_forces(apply_constraint=False)

    def append_to(self, observations, system, coordinates, positions, step, restart):
        """Compute ``system`` at ``positions`` (N, 3) and append it to ``observations``
        with a cell filter's stress (no further call) and the calculator's other
        results; the index of the new observation.

        Raises
        ------
        FloatingPointError
            NaN or inf energy or forces (:func:`not_finite_message`), nothing appended.
        """
        energy, forces = self.results(system)
        if not (np.isfinite(energy) and np.isfinite(forces).all()):
            raise FloatingPointError(not_finite_message(step, observations, restart))
        stress = (
            coordinates.atoms.get_stress(apply_constraint=False)  # (6,), no call
            if coordinates.has_cell
            else None
        )
        results = calculator_results(coordinates.atoms)
        return observations.append(positions, energy, forces, stress, results)

    def _energy(self, system):
        """The force-consistent energy where the calculator gives it, else the energy."""
        if self.force_consistent is None:
            try:
                energy = system.get_potential_energy(force_consistent=True)
            except PropertyNotImplementedError:
                self.force_consistent = False
            else:
                self.force_consistent = True
                return energy
        return system.get_potential_energy(force_consistent=self.force_consistent)


def not_finite_message(step, observations, restart):
    """The message of a calculator that returned NaN or inf at ``step``: where the
    earlier observations are kept, and what to check."""
    where = (
        f"; the {len(observations)} earlier observations are kept in {restart}" if restart else ""
    )
    return (
        f"the calculator returned NaN or inf energy or forces at step {step}{where}. "
        "Check the calculator (SCF convergence, geometry) and run again."
    )
