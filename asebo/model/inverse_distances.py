r"""Features of a molecule from the inverse distances of all its pairs of atoms.

Koistinen, Ásgeirsson, Vehtari and Jónsson (J. Chem. Theory Comput. 15, 6738 (2019))
give the GP of a nudged elastic band the inverse interatomic distances as features: a
kernel on them is invariant to rigid motions and needs no reference configuration, so
it is as good across a reaction as near either end, and a displacement that brings two
atoms together moves the features far more than one that parts them, as the energy
does. Here each pair's inverse distance is scaled by the sum of the two covalent radii,

.. math:: p_{ij}(x) = (R_i + R_j) / r_{ij}, \qquad i < j,

``d = n (n - 1) / 2`` features (padded with zeros to ``(k, 3)``, ``k = ceil(d / 3)``,
the shape the GP takes), and the GP's Gaussian kernel on them has one length scale for
every pair.

An energy's gradient ``g = B^T h`` in the positions (``B = dp / dx``, ``(d, 3n)``)
fixes its gradient ``h`` in the features only along the ``3n - 6`` directions the
features move in, ``range(B)``. The GP is given ``h = (B^T)^+ g``, the one with no
component across them, and observes it only along ``range(B)``
(:meth:`InverseDistanceMetric.observation_bases`,
:mod:`asebo.model.observed_directions`): its posterior is that of the Cartesian
gradients through the chain rule, with nothing said of the gradient across those
directions, which the ``n (n - 1) / 2 - 3n + 6`` surplus features leave free. Gradients
of functions of ``p`` map back exactly as ``B^T h``.
"""

from itertools import combinations

import numpy as np
import torch
from ase.data import covalent_radii

from asebo.model.internals import bond_lengths

PSEUDO_INVERSE_RTOL = 1e-6
"""Singular values of ``B`` below this fraction of the largest are left out of the map of
gradients to the features: the bends of a straight molecule, which change no distance
to first order (their forces vanish there by symmetry)."""


class InverseDistanceMetric:
    """Scaled inverse distances of every pair of atoms as the GP's features (module
    docstring), with the interface of :class:`asebo.model.metric.HessianMetric`.

    Parameters
    ----------
    numbers : array (n,)
        Atomic numbers: the covalent radii ``R`` (``ase.data.covalent_radii``).

    Raises
    ------
    ValueError
        For fewer than three atoms (one distance describes two).
    """

    invariant = True  # to rigid motions, by construction

    def __init__(self, numbers):
        numbers = np.asarray(numbers)
        n = len(numbers)
        if n < 3:
            raise ValueError(f"{n} atoms: the inverse distances describe three atoms or more")
        self.pairs = torch.as_tensor(list(combinations(range(n), 2)), dtype=torch.long)  # (d, 2)
        radii = covalent_radii[numbers]
        self.radii_sums = torch.as_tensor(radii[self.pairs.numpy()].sum(axis=1))  # (d,)
        self.n_atoms, self.n_pairs = n, len(self.pairs)
        self.n_features = -(-self.n_pairs // 3)
        self._mapped = {}  # (positions, gradient) bytes -> (d,) gradient in the features
        self._bases = {}  # positions bytes -> (d, r) orthonormal basis of range(B)

    def _values_and_derivatives(self, x):
        """``p`` (b, d) of positions x (b, n, 3) and ``dp/dx`` of each pair's two atoms
        (b, d, 2, 3)."""
        length, derivative = bond_lengths(x, self.pairs)  # (b, d), (b, d, 2, 3)
        inverse = self.radii_sums / length
        return inverse, -(inverse / length)[..., None, None] * derivative

    def _pad(self, values):
        """Values (b, d) as features (b, k, 3)."""
        out = values.new_zeros(len(values), 3 * self.n_features)
        out[:, : self.n_pairs] = values
        return out.reshape(len(values), self.n_features, 3)

    def _wilson_b(self, x):
        """``B = dp/dx`` (d, 3n) at one configuration x (n, 3)."""
        _, derivatives = self._values_and_derivatives(x[None])
        dense = derivatives.new_zeros(self.n_pairs, self.n_atoms, 3)
        rows = torch.arange(self.n_pairs)
        dense[rows, self.pairs[:, 0]] = derivatives[0, :, 0]
        dense[rows, self.pairs[:, 1]] = derivatives[0, :, 1]
        return dense.reshape(self.n_pairs, 3 * self.n_atoms)

    def _pullback(self, derivatives, gradients):
        """``B^T h``: gradients (b, n, 3) in the positions of gradients h (b, d)."""
        contributions = gradients[..., None, None] * derivatives  # (b, d, 2, 3)
        out = contributions.new_zeros(len(gradients), self.n_atoms, 3)
        out.index_add_(1, self.pairs[:, 0], contributions[:, :, 0])
        out.index_add_(1, self.pairs[:, 1], contributions[:, :, 1])
        return out

    def features(self, positions):
        """Features (m, k, 3) of positions (m, n, 3)."""
        x = torch.as_tensor(positions, dtype=torch.float64)
        values, _ = self._values_and_derivatives(x)
        return self._pad(values)

    def feature_gradients(self, positions, gradients):
        """Gradients (m, k, 3) in the features, ``(B^T)^+ g``, of invariant functions whose
        gradients in the positions (m, n, 3) are ``gradients`` (m, n, 3).

        Meant for observations, which come back at every fit: each mapped gradient is
        stored.
        """
        x = torch.as_tensor(positions, dtype=torch.float64)
        g = torch.as_tensor(gradients, dtype=torch.float64).reshape(len(x), -1)  # (m, 3n)
        mapped = []
        for xi, gi in zip(x, g):
            key = (xi.numpy().tobytes(), gi.numpy().tobytes())
            if key not in self._mapped:
                inverse = torch.linalg.pinv(self._wilson_b(xi).T, rtol=PSEUDO_INVERSE_RTOL)
                self._mapped[key] = inverse @ gi  # (d,)
            mapped.append(self._mapped[key])
        return self._pad(torch.stack(mapped))

    def observation_bases(self, positions):
        """Orthonormal bases (m, 3k, R) of the directions the features of each of
        ``positions`` (m, n, 3) move in, ``range(B)``, ``R = min(d, 3n - 6)`` columns
        (columns of zeros beyond a configuration's rank): what a gradient in the
        positions fixes of one in the features (:mod:`asebo.model.observed_directions`).
        Stored, as :meth:`feature_gradients`."""
        x = torch.as_tensor(positions, dtype=torch.float64)
        columns = min(self.n_pairs, 3 * self.n_atoms - 6)
        out = x.new_zeros(len(x), 3 * self.n_features, columns)
        for index, xi in enumerate(x):
            key = xi.numpy().tobytes()
            if key not in self._bases:
                left, values, _ = torch.linalg.svd(self._wilson_b(xi), full_matrices=False)
                rank = int((values > PSEUDO_INVERSE_RTOL * values[0]).sum())
                self._bases[key] = left[:, : min(rank, columns)]  # (d, r)
            basis = self._bases[key]
            out[index, : self.n_pairs, : basis.shape[1]] = basis
        return out

    def features_and_pullback(self, positions):
        """Features (b, k, 3) of positions (b, n, 3), and the map ``B^T`` of gradients in
        the features (b, k, 3) to gradients in the positions (b, n, 3)."""
        x = torch.as_tensor(positions, dtype=torch.float64)
        values, derivatives = self._values_and_derivatives(x)
        b = len(x)

        def pullback(*feature_gradients):
            return tuple(
                self._pullback(derivatives, g.reshape(b, -1)[:, : self.n_pairs])
                for g in feature_gradients
            )

        return self._pad(values), pullback
