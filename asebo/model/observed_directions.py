r"""Gradient observations that fix a feature gradient only where the features move.

A GP whose kernel sees features ``p(x)`` (``d`` of them) rather than the positions
``x`` observes an energy's gradient in the positions, ``g = B^T h`` with
``B = dp/dx`` (``d x 3n``): that fixes the gradient ``h`` in the features only along
``range(B)``, the directions the features move in. Where ``d`` exceeds the ``3n - 6``
internal degrees of freedom (the inverse distances of every pair of atoms), a GP given
the whole of ``h = (B^T)^+ g`` would also be told that the gradient across those
directions is zero, a constraint the energy does not obey off the configurations
computed, and that it can only meet with a short length scale.

Here each configuration ``a`` observes its energy and ``U_a^T h_a``, with ``U_a``
(``d x R``) an orthonormal basis of ``range(B_a)``: the joint covariance of the
observations is ``T K T^T`` with ``T = diag(1, U_1^T, ..., 1, U_m^T)``, which is that of
the Cartesian gradients, ``B_a^T K_hh B_b``, in other coordinates (the chain rule of the
kernel of Koistinen, Ásgeirsson, Vehtari and Jónsson, J. Chem. Theory Comput. 15, 6738
(2019), eq. 5), with ``R + 1`` rows per configuration where the features take
``d + 1``. A configuration whose ``B`` has a rank below ``R`` (a straight molecule)
has columns of zeros in ``U``: those rows observe zero with unit variance and no
covariance, which changes neither the weights nor, up to a constant, the likelihood,
whose count of observations is each energy and the rank of each ``B_a``.
"""

import torch

from asebo.model.regression import noise_vector


class ObservedDirections:
    """The bases ``U_a`` of what each configuration's gradient observes in the features.

    Parameters
    ----------
    bases : tensor (m, D, R)
        Orthonormal columns (or columns of zeros, beyond a configuration's rank)
        spanning the directions each configuration's features move in, in the GP's
        ``D = 3k`` feature components.
    earlier : ObservedDirections, optional
        Those of an earlier fit. Where its bases are the first of ``bases``, the
        products ``U_a^T U_b`` it formed for the configurations it conditioned on are
        taken over, each for one subset of configurations this one conditions on.
    """

    def __init__(self, bases, earlier=None):
        self.bases = bases  # (m, D, R)
        self.observed = bases.norm(dim=1) > 0.5  # (m, R): the columns that are directions
        self.rows_per_configuration = bases.shape[2] + 1
        self._products = {}  # selected configurations -> _pair_products
        self._earlier = {}  # configurations -> U_a^T U_b (m', m', R, R) of an earlier fit
        if earlier is not None and _extends(bases, earlier.bases):
            self._earlier = {key: gram for key, (gram, _) in earlier._products.items()}

    def _transform(self, select):
        """``T`` of the configurations ``select`` (m',): (m', R + 1, D + 1)."""
        bases = self.bases[select]
        m, D, R = bases.shape
        transform = bases.new_zeros(m, R + 1, D + 1)
        transform[:, 0, 0] = 1.0
        transform[:, 1:, 1:] = bases.transpose(1, 2)
        return transform

    def joint_dense(self, features, values, select):
        """``T K T^T`` (m' (R+1), m' (R+1)) of the joint covariance ``K`` of a kernel
        ``k = f(|p - p'|^2)`` on the features of the configurations ``select`` (m'),
        without ``K``: with ``(k, a, c)`` its profile values (each (m', m'),
        :mod:`asebo.kernels.radial`), ``K``'s blocks are ``k``, ``a (p_a - p_b)`` and
        ``a I - c (p_a - p_b)(p_a - p_b)^T``, and ``T`` takes each to the bases.

        Parameters
        ----------
        features : tensor (m', D)
            The features of ``select``.
        values : (tensor (m', m'),) * 3
        select : tensor (m',)
        """
        k, a, c = values
        gram, projected = self._pair_products(features, select)  # (m', m', R, R), (m', m', R)
        m, R = len(select), self.bases.shape[2]
        own = torch.diagonal(projected).T  # (m', R): U_a^T p_a
        seen_from_row = own[:, None] - projected  # (m', m', R): U_a^T (p_a - p_b)
        seen_from_column = seen_from_row.transpose(0, 1)  # U_b^T (p_b - p_a)
        blocks = k.new_empty(m, R + 1, m, R + 1)
        blocks[:, 0, :, 0] = k
        blocks[:, 0, :, 1:] = -a[..., None] * seen_from_column
        blocks[:, 1:, :, 0] = (-a[..., None] * seen_from_row).permute(0, 2, 1)
        # a U_a^T U_b - c U_a^T d (U_b^T d)^T, written into the blocks in place: at a
        # thousand rows and more, temporaries of the whole covariance cost as much as
        # the products themselves
        gradients = blocks[:, 1:, :, 1:].permute(0, 2, 1, 3)  # (m', m', R, R), a view
        torch.mul(a[..., None, None], gram, out=gradients)
        outer = seen_from_row[..., :, None] * seen_from_column[..., None, :]  # (m', m', R, R)
        gradients.add_(outer.mul_(c[..., None, None]))
        return blocks.reshape(m * (R + 1), m * (R + 1))

    def _pair_products(self, features, select):
        """``U_a^T U_b`` (m', m', R, R) and ``U_a^T p_b`` (m', m', R) of ``select``,
        kept for every subset of this fit (a search over ``gamma`` asks for one again
        and again, and the next fit takes the products over)."""
        key = tuple(select.tolist())
        if key not in self._products:
            bases = self.bases[select]  # (m', D, R)
            projected = torch.einsum("adi,bd->abi", bases, features)
            self._products[key] = self._gram(key, bases), projected
        return self._products[key]

    def _gram(self, key, bases):
        """``U_a^T U_b`` (m', m', R, R) of the configurations ``key`` (m',) of
        ``bases`` (m', D, R): the pairs an earlier fit formed taken from the subset that
        shares the most configurations with ``key``, the others formed here."""
        shared = {old: set(old) & set(key) for old in self._earlier}
        if not shared or not max(map(len, shared.values())):
            return torch.einsum("adi,bdj->abij", bases, bases)
        old = max(shared, key=lambda old: len(shared[old]))
        earlier = self._earlier.pop(old)
        m, _, R = bases.shape
        gram = bases.new_empty(m, R, m, R).permute(0, 2, 1, 3)  # laid out as the blocks
        runs = _common_runs(key, old)
        for at, was, length in runs:
            for column_at, column_was, width in runs:
                gram[at : at + length, column_at : column_at + width] = earlier[
                    was : was + length, column_was : column_was + width
                ]
        new = torch.tensor(
            [at for at, configuration in enumerate(key) if configuration not in shared[old]]
        )
        if len(new):
            rows = torch.einsum("adi,bdj->abij", bases[new], bases)  # (new, m', R, R)
            gram[new] = rows
            gram[:, new] = rows.permute(1, 0, 3, 2)
        return gram

    def covariance(self, K, select):
        """``T K T^T`` (m' (R+1), m' (R+1)) of a joint covariance ``K`` (m' (D+1),
        m' (D+1)) of the configurations ``select`` (m',)."""
        transform = self._transform(select)  # (m', R + 1, D + 1)
        m, rows, columns = transform.shape
        blocks = K.reshape(m, columns, m, columns)
        blocks = torch.einsum("aij,ajbk->aibk", transform, blocks)
        blocks = torch.einsum("aibk,blk->aibl", blocks, transform)
        return blocks.reshape(m * rows, m * rows)

    def reduce(self, v, select=None):
        """``T v`` (m' (R+1), t) of ``v`` (m' (D+1), t) over ``select`` (all by default)."""
        return self._apply(v, select, to_bases=True)

    def expand(self, v, select=None):
        """``T^T v`` (m' (D+1), t) of ``v`` (m' (R+1), t) over ``select`` (all by default)."""
        return self._apply(v, select, to_bases=False)

    def _apply(self, v, select, to_bases):
        """``T v`` (``to_bases``) or ``T^T v``: each configuration's energy row kept, its
        gradient rows taken to its basis (``D`` rows to ``R``) or back."""
        bases = self._bases_of(select)  # (m', D, R)
        m, D, R = bases.shape
        if to_bases:
            rows_in, rows_out, equation = D + 1, R + 1, "adi,adt->ait"
        else:
            rows_in, rows_out, equation = R + 1, D + 1, "adi,ait->adt"
        v = v.reshape(m, rows_in, -1)
        out = v.new_empty(m, rows_out, v.shape[2])
        out[:, 0] = v[:, 0]  # the energies
        out[:, 1:] = torch.einsum(equation, bases, v[:, 1:])
        return out.reshape(m * rows_out, -1)

    def _bases_of(self, select):
        """The bases (m', D, R) of ``select``, every configuration's without a copy."""
        return self.bases if select is None else self.bases[select]

    def noise(self, select, energy_variance, gradient_variance):
        """Noise variances (m' (R+1),) of the observations of ``select``: one where a
        column of ``U`` is zero."""
        noise = torch.as_tensor(noise_vector(len(select), 0, energy_variance, 0.0)).reshape(
            -1, 1
        )  # (m', 1)
        observed = self.observed[select]  # (m', R)
        gradients = torch.where(observed, gradient_variance, 1.0).to(noise.dtype)
        return torch.cat([noise, gradients], dim=1).reshape(-1)

    def unobserved_rows(self):
        """A mask (m (R+1),) of the rows that observe nothing."""
        energy = torch.zeros(len(self.bases), 1, dtype=torch.bool)
        return torch.cat([energy, ~self.observed], dim=1).reshape(-1)

    def count(self, select):
        """Observations of ``select`` (m',) the likelihood counts: each energy and the
        rank of each gradient's ``B``."""
        return int(len(select) + self.observed[select].sum())


def _common_runs(key, old):
    """The configurations of ``key`` also in ``old`` (both sorted), as runs that are
    consecutive in both: (start in ``key``, start in ``old``, length) each."""
    place = {configuration: at for at, configuration in enumerate(old)}
    runs = []
    for at, configuration in enumerate(key):
        was = place.get(configuration)
        if was is None:
            continue
        if runs and runs[-1][0] + runs[-1][2] == at and runs[-1][1] + runs[-1][2] == was:
            runs[-1][2] += 1
        else:
            runs.append([at, was, 1])
    return runs


def _extends(bases, earlier):
    """Whether ``earlier`` (m0, D, R) are the first ``m0`` of ``bases`` (m, D, R)."""
    return (
        earlier.shape[1:] == bases.shape[1:]
        and len(earlier) <= len(bases)
        and torch.equal(earlier, bases[: len(earlier)])
    )


class ProjectedOperator:
    """``T K T^T`` of a structured joint covariance ``K`` over every configuration, for
    conjugate gradients (the interface :func:`asebo.kernels.operators.solve_joint` uses)."""

    def __init__(self, operator, directions):
        self.operator, self.directions = operator, directions
        size = len(directions.bases) * directions.rows_per_configuration
        self.shape = torch.Size([size, size])

    def _matmul(self, v):  # (N, t)
        directions = self.directions
        return directions.reduce(self.operator._matmul(directions.expand(v)))

    def __matmul__(self, v):
        return self._matmul(v[:, None])[:, 0] if v.ndim == 1 else self._matmul(v)
