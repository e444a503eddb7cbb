"""A wrapper that counts the calls of any ASE calculator and times them."""

import time

from ase.calculators.calculator import Calculator, all_changes

from asebo.calls import computed


class CountingCalculator(Calculator):
    """Delegates to ``calc`` and counts its calls.

    ``free_energy`` is the wrapped calculator's where it gives one (with smearing, the
    energy whose gradient the forces are), otherwise the energy. The stress is
    computed only when asked for (a cell filter asks after the forces, at the same
    configuration): that adds no call to the count.

    Parameters
    ----------
    calc : ase.calculators.calculator.Calculator
        The calculator that does the work.

    Attributes
    ----------
    ncalls : int
        Configurations computed (energy, forces and stress together count once).
    wall_time : float
        Seconds spent inside ``calc``, failed calls included.
    cpu_time : float
        Processor seconds of this process spent inside ``calc``.
    """

    implemented_properties = ("energy", "free_energy", "forces", "stress")

    def __init__(self, calc):
        super().__init__()
        self.calc = calc
        self.ncalls = 0
        self.wall_time = 0.0
        self.cpu_time = 0.0
        self._work = None

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            if system_changes or self._work is None:
                self._work = None  # the atoms computed, once computed
                self._compute()
            if "stress" in properties:
                self.results["stress"] = self._work.get_stress(apply_constraint=False)
        finally:  # a failed call takes its time too
            self.wall_time += time.perf_counter() - start
            self.cpu_time += time.process_time() - start_cpu

    def _compute(self):
        """Energy, free energy and forces of ``calc`` at the atoms
        (:func:`asebo.calls.computed`); where it raises, nothing is kept, so
        that asking again calls it again."""
        self._work, self.results = computed(self.atoms, self.calc)
        self.ncalls += 1
