r"""Energy prediction from molecular configurations with the SVD kernel (Wong and Kolter).

Three parts, as in the paper's section "Application to Molecular Energy Prediction":

* **Data.** :func:`generate_dataset` relaxes a molecule (built from SMILES by RDKit),
  displaces its atoms by seeded Gaussian noise and labels every configuration with
  the energy and forces of an ASE calculator (after a GFN2-xTB pre-relaxation for
  GPAW, :func:`default_prerelax`); :func:`load_dataset` returns a cached or shipped
  set (``asebo/data``) made with the same settings and only computes what is missing.
* **Models.** The mean predictor; kernel ridge regression (KRR) on the sorted
  eigenvalues of the Coulomb matrix with a Gaussian kernel (Rupp et al. 2012); KRR
  with the SVD kernel on energies; and the SVD kernel with derivatives, trained on
  energies and forces and predicting the energy by Wong and Kolter, eq. 34, with the
  joint covariance of their eqs. 11-14 and regularisation ``lambda`` on energies and
  ``lambda_deriv`` on gradients.
* **Model selection and assessment.** Hyperparameters (``gamma``, ``lambda``,
  ``lambda_deriv``) from a grid by inner k-fold cross-validation on RMSE, as in the
  paper, or by the marginal likelihood on the same grid (Rasmussen and Williams, eq.
  2.30, with the signal variance profiled out); RMSE by outer cross-validation and
  learning curves (Wong and Kolter, Tables 1-2, Fig. 1). All ``lambda`` values share one
  factorisation per fold (Woodbury on the energy rows), and a grid can be screened on
  the first inner fold so that only its best points are cross-validated on all folds.

Energies are in eV, positions in Å, forces in eV/Å; gradients are ``-forces``.

References
----------
.. [1] E. Wong and J. Z. Kolter, "An SVD and derivative kernel approach to learning
   from geometric data", Carnegie Mellon University (preprint).
.. [2] C. E. Rasmussen and C. K. I. Williams, "Gaussian Processes for Machine
   Learning", MIT Press (2006).
.. [3] G. Schmitz, "Introduction to kernel methods: with special focus on Gaussian
   process regression", lecture, Aarhus University (2017).
.. [4] M. Rupp, A. Tkatchenko, K.-R. Müller, O. A. von Lilienfeld, Phys. Rev. Lett.
   108, 058301 (2012).
"""

from asebo.learn.prediction.data import (
    DATA_DIR,
    DEFAULT_DISPLACEMENT,
    DEFAULT_FMAX,
    DISPLACEMENTS,
    MOLECULES,
    ConfigurationSet,
    dataset_filename,
    default_cache_dir,
    default_prerelax,
    displaced_positions,
    generate_dataset,
    load_dataset,
    relax_molecule,
)
from asebo.learn.prediction.evaluate import FoldResult, evaluate_model
from asebo.learn.prediction.models import (
    CG_RESIDUAL_LIMIT,
    MODELS,
    EigenspectrumKRR,
    MeanPredictor,
    SVDDerivativeKRR,
    SVDKernelKRR,
    coulomb_eigenspectrum,
    make_model,
)
from asebo.learn.prediction.selection import (
    DEFAULT_GRIDS,
    Selection,
    configuration_folds,
    select_hyperparameters,
)

__all__ = [
    "CG_RESIDUAL_LIMIT",
    "DATA_DIR",
    "DEFAULT_DISPLACEMENT",
    "DEFAULT_FMAX",
    "DEFAULT_GRIDS",
    "DISPLACEMENTS",
    "MODELS",
    "MOLECULES",
    "ConfigurationSet",
    "EigenspectrumKRR",
    "FoldResult",
    "MeanPredictor",
    "SVDDerivativeKRR",
    "SVDKernelKRR",
    "Selection",
    "configuration_folds",
    "coulomb_eigenspectrum",
    "dataset_filename",
    "default_cache_dir",
    "default_prerelax",
    "displaced_positions",
    "evaluate_model",
    "generate_dataset",
    "load_dataset",
    "make_model",
    "relax_molecule",
    "select_hyperparameters",
]
