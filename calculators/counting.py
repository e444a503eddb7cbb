"""A wrapper that counts the calls of any ASE calculator and times them."""

import time

from ase.calculators.calculator import Calculator, all_changes


class CountingCalculator(Calculator):
    """Delegates to ``calc`` and counts its calls.

    Parameters
    ----------
    calc : ase.calculators.calculator.Calculator
        The calculator that does the work.

    Attributes
    ----------
    ncalls : int
        Calculations run (energy and forces together count once).
    wall_time : float
        Seconds spent inside ``calc``.
    cpu_time : float
        Processor seconds of this process spent inside ``calc``.
    """

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, calc):
        super().__init__()
        self.calc = calc
        self.ncalls = 0
        self.wall_time = 0.0
        self.cpu_time = 0.0

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        start, start_cpu = time.perf_counter(), time.process_time()
        work = self.atoms.copy()
        work.calc = self.calc
        energy = work.get_potential_energy()
        forces = work.get_forces()
        self.wall_time += time.perf_counter() - start
        self.cpu_time += time.process_time() - start_cpu
        self.ncalls += 1
        self.results = {"energy": energy, "free_energy": energy, "forces": forces}
