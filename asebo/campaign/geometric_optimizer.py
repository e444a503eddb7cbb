"""geomeTRIC as an optimizer of ASE atoms, for side-by-side comparisons.

geomeTRIC (L.-P. Wang and C. Song, "Geometry optimization made simple with
translation and rotation coordinates", J. Chem. Phys. 144, 214108 (2016)) steps in
translation-rotation internal coordinates (TRIC) with a BFGS Hessian and a trust
radius. :class:`GeomeTRIC` runs it on the calculator of an :class:`ase.Atoms`
through geomeTRIC's own ASE engine, with the largest atomic force as the only
convergence criterion, the criterion of every ASE optimizer.
"""

import tempfile

import numpy as np
from ase import units

from asebo.extras import missing_optimizer_package

NOT_A_CRITERION = 1e10  # geomeTRIC's energy-change and displacement criteria, switched off


class GeomeTRIC:
    """geomeTRIC in TRIC coordinates on ``atoms.calc``, with ASE's ``run(fmax, steps)``.

    Parameters
    ----------
    atoms : ase.Atoms
        A molecule (no periodic cell, no constraints) with its calculator; left at
        the last configuration computed.
    logfile : None
        Accepted for the interface of ASE's optimizers; geomeTRIC writes to its
        ``logging`` logger.
    **params
        More keyword arguments of ``geometric.params.OptParams`` (``trust``,
        ``tmax``...).

    Attributes
    ----------
    nsteps : int
        geomeTRIC's iterations in the last run.
    """

    def __init__(self, atoms, logfile=None, **params):
        missing = missing_optimizer_package("geometric")
        if missing:
            raise ImportError(missing)
        if np.any(atoms.pbc):
            raise ValueError("geomeTRIC optimizes molecules: these atoms have a periodic cell")
        if atoms.constraints:
            raise ValueError(
                "the geometric optimizer takes no ASE constraints: geomeTRIC has its own "
                "constraint input, which this comparison does not pass on"
            )
        if atoms.calc is None:
            raise ValueError("the atoms have no calculator: set atoms.calc first")
        self.atoms = atoms
        self.params = params
        self.nsteps = 0

    def run(self, fmax=0.05, steps=200):
        """Relax to a largest atomic force below ``fmax`` (eV/Å) in at most ``steps``
        iterations; True when converged."""
        from geometric.ase_engine import EngineASE
        from geometric.errors import GeomOptNotConvergedError
        from geometric.internal import DelocalizedInternalCoordinates
        from geometric.molecule import Molecule
        from geometric.optimize import Optimizer
        from geometric.params import OptParams

        molecule = Molecule()
        molecule.elem = self.atoms.get_chemical_symbols()
        molecule.xyzs = [self.atoms.get_positions()]  # (n, 3), Å
        calc = self.atoms.calc
        engine = EngineASE(molecule, calc)
        params = OptParams(
            convergence_gmax=fmax / (units.Hartree / units.Bohr),
            convergence_grms=NOT_A_CRITERION,
            convergence_energy=NOT_A_CRITERION,
            convergence_drms=NOT_A_CRITERION,
            convergence_dmax=NOT_A_CRITERION,
            maxiter=steps,
            **self.params,
        )
        # TRIC: each fragment's translation and rotation beside its internal coordinates
        internal = DelocalizedInternalCoordinates(
            molecule, build=True, connect=False, addcart=False
        )
        start = molecule.xyzs[0].reshape(-1) / units.Bohr  # (3n,), Bohr
        with tempfile.TemporaryDirectory() as scratch:
            optimizer = Optimizer(start, molecule, internal, engine, scratch, params, False)
            try:
                optimizer.optimizeGeometry()
                converged = True
            except GeomOptNotConvergedError:
                converged = False
        self.nsteps = int(optimizer.Iteration)
        # the configuration geomeTRIC computed last, bit for bit: no call to repeat it
        self.atoms.set_positions(calc.atoms.get_positions())
        return converged
