"""Monkhorst-Pack k-point grids for periodic cells, from a density or a number."""

import numpy as np

AXES = "xyz"


def kpoint_grid(cell, pbc, density):
    r"""The k-point grid of a cell at a k-point density, one point along non-periodic axes.

    Along a periodic direction ``i`` the grid has

    .. math:: N_i = \max(1, \lceil 2\pi \, |\mathbf b_i| \, \rho \rceil)

    points, with ``b_i`` the reciprocal lattice vectors (``a_i . b_j = delta_ij``, so
    ``2 pi |b_i|`` is the length of the reciprocal vector in Å⁻¹ and ``1 / |b_i|``
    the spacing of the lattice planes) and ``rho`` the density in points per Å⁻¹,
    the convention of ASE's ``kptdensity2monkhorstpack`` and GPAW's ``kpts={'density':
    ...}`` without rounding up to even numbers. An orthorhombic cell of side ``L``
    gets ``ceil(2 pi rho / L)`` points: at ``rho = 3.5`` Å, 6 for a 4 Å cell and 1 from
    22 Å on.

    Parameters
    ----------
    cell : array_like of shape (3, 3)
        Lattice vectors in Å, one a row; the volume must not be zero.
    pbc : array_like of 3 bool
        Periodic directions.
    density : float
        Points per Å⁻¹ of the reciprocal vectors' length (Å), > 0.

    Returns
    -------
    tuple of 3 int

    References
    ----------
    H. J. Monkhorst, J. D. Pack, Phys. Rev. B 13, 5188 (1976).
    """
    if not density > 0:
        raise ValueError(f"kdensity must be a positive number of k-points per Å⁻¹, got {density}")
    reciprocal = np.linalg.inv(np.asarray(cell, dtype=float)).T  # (3, 3): rows b_i
    lengths = 2 * np.pi * np.linalg.norm(reciprocal, axis=1)  # (3,) Å⁻¹
    sizes = np.ceil(density * lengths - 1e-9).astype(int)  # (3,)
    return tuple(int(n) if p else 1 for n, p in zip(np.maximum(sizes, 1), pbc))


def kpoint_size(kpts, pbc):
    """The grid ``(n1, n2, n3)`` of a number of k-points given per direction.

    Parameters
    ----------
    kpts : int or sequence of 3 int
        One number for every periodic direction (non-periodic ones get 1), or
        three numbers, 1 along every non-periodic direction.
    pbc : array_like of 3 bool

    Returns
    -------
    tuple of 3 int

    Raises
    ------
    ValueError
        For a number below 1, not three numbers, or more than one k-point
        along a non-periodic direction.
    """
    sizes = check_kpts(kpts)
    if isinstance(sizes, int):
        return tuple(sizes if p else 1 for p in pbc)
    for axis, (n, periodic) in enumerate(zip(sizes, pbc)):
        if n > 1 and not periodic:
            raise ValueError(
                f"kpts={kpts} puts {n} k-points along {AXES[axis]}, which is not periodic: "
                f"give 1 there or one number (kpts={max(sizes)}) for the periodic axes"
            )
    return sizes


def check_kpts(kpts):
    """``kpts`` as an int or a tuple of 3 ints, each at least 1.

    Parameters
    ----------
    kpts : int or sequence of 3 int

    Returns
    -------
    int or tuple of 3 int

    Raises
    ------
    ValueError
        When ``kpts`` is neither.
    """
    message = (
        f"kpts must be a number of k-points (kpts=4) or three (kpts=(4, 4, 1)), each at "
        f"least 1, got {kpts!r}; for a density use kdensity=3.5 (points per Å⁻¹)"
    )
    if isinstance(kpts, (int, np.integer)) and not isinstance(kpts, bool):
        if kpts < 1:
            raise ValueError(message)
        return int(kpts)
    try:
        sizes = tuple(kpts)
    except TypeError:
        raise ValueError(message) from None
    if len(sizes) != 3 or not all(
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in sizes
    ):
        raise ValueError(message)
    return tuple(int(n) for n in sizes)
