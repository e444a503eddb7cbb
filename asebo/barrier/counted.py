"""A calculator that counts the calls of the one it wraps."""

from ase.calculators.calculator import Calculator, all_changes

from asebo.calls import computed


class CountedCalls(Calculator):
    """The energy, force-consistent energy and forces of ``calculator`` (kept as
    ``calc``, as wrappers keep it), each configuration's call counted.

    Parameters
    ----------
    calculator : ase calculator

    Attributes
    ----------
    calls : int
    """

    implemented_properties = ("energy", "free_energy", "forces")

    def __init__(self, calculator):
        super().__init__()
        self.calc, self.calls = calculator, 0

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        self.calls += 1
        _, self.results = computed(self.atoms, self.calc)
