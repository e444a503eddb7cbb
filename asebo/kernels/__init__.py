"""The kernel core shared by the GP optimizer, MLKRR, IOKR and diffusion maps."""

from asebo.kernels.configuration import (
    CartesianKernel,
    ConfigurationKernel,
    SVDKernel,
    configuration_kernel,
)
from asebo.kernels.euclidean import (
    GaussianKernel,
    Kernel,
    LaplacianKernel,
    LinearKernel,
    TanimotoKernel,
    squared_distances,
)
from asebo.kernels.operators import JointCovariance, joint_covariance, solve_joint
from asebo.kernels.svd import (
    optimal_alignment,
    svd_distance,
    svd_kernel_blocks,
    svd_kernel_blocks_batched,
)

__all__ = [
    "Kernel",
    "GaussianKernel",
    "LaplacianKernel",
    "LinearKernel",
    "TanimotoKernel",
    "squared_distances",
    "ConfigurationKernel",
    "SVDKernel",
    "CartesianKernel",
    "configuration_kernel",
    "svd_kernel_blocks",
    "svd_kernel_blocks_batched",
    "svd_distance",
    "optimal_alignment",
    "JointCovariance",
    "joint_covariance",
    "solve_joint",
]
