"""The sibling estimators on the kernel core, with scikit-learn's estimator API.

- :mod:`asebo.learn.mlkrr`: MLKR and MLKRR, metric learning for kernel regression;
- :mod:`asebo.learn.iokr`, :mod:`asebo.learn.mpiokr`: IOKR and magnitude-preserving IOKR;
- :mod:`asebo.learn.diffusion`: diffusion maps with Nyström extension;
- :mod:`asebo.learn.prediction`: energy prediction on configuration sets;
- :mod:`asebo.learn.qm9`: the QM9 data set.
"""
