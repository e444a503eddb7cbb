"""asebo: Bayesian optimization of molecular geometries for ASE, on a kernel core."""

__version__ = "0.1.0"
