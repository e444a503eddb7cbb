r"""Primitive internal coordinates and their Wilson B matrix, batched in PyTorch.

Bond lengths, bend angles, torsions and out-of-plane angles of configurations ``x``
(b, n, 3), with their derivatives with respect to the positions of the two, three or
four atoms each involves, all in closed form (Wilson, Decius and Cross, *Molecular
Vibrations*, McGraw-Hill (1955), ch. 4; dihedrals after Blondel and Karplus,
J. Comput. Chem. 17, 1132 (1996)). A torsion enters as its twist from a reference
value, wrapped to (-pi, pi] and faded to zero as one of its bends straightens or
folds, where the dihedral is undefined: smooth everywhere, where the bare dihedral's
derivative diverges.

This is the one implementation of the internal-coordinate geometry:
:class:`asebo.model.metric.InternalMetric` builds its curvilinear features from it,
and :class:`asebo.model.lindh.LindhModel` its energy and forces (on one configuration,
through NumPy arrays). At each evaluation of the GP's posterior the two take the same
torsions at the same configurations: :func:`faded_torsions` keeps those of its latest
call for the second.
"""

import math

import numpy as np
import torch
from scipy import sparse

from asebo.model.straightness import NEARLY_STRAIGHT

TORSION_FADE = (NEARLY_STRAIGHT.torsion_fade_start, NEARLY_STRAIGHT.torsion_fade_end)
"""Torsions fade out as one of their bends opens or folds: full before, none after (rad)."""


def _norm(v):
    return torch.linalg.norm(v, dim=-1)


def _dot(u, v):
    # the three products added in order: the sum's reduction kernel costs three times
    # as much on vectors of three (a seventh of the torsions' time at a hundred atoms)
    product = u * v
    return product[..., 0] + product[..., 1] + product[..., 2]


def bond_lengths(x, pairs):
    """Lengths (b, p) of atom pairs ``pairs`` (p, 2) and their derivatives (b, p, 2, 3)."""
    d = x[..., pairs[:, 0], :] - x[..., pairs[:, 1], :]  # (b, p, 3)
    length = _norm(d)
    unit = d / length[..., None]
    return length, torch.stack([unit, -unit], dim=-2)


def _angle_between(u, v):
    """Angle (...) between arms ``u`` and ``v`` (..., 3) from a middle atom, and its
    derivatives (..., 3) with respect to the ends of ``u`` and ``v`` (the middle atom
    takes minus their sum); zero at a straight angle, where the direction of bending
    is undefined."""
    lu, lv = _norm(u), _norm(v)
    eu, ev = u / lu[..., None], v / lv[..., None]
    cos = _dot(eu, ev).clamp(-1.0, 1.0)
    sin = _norm(torch.cross(eu, ev, dim=-1))
    angle = torch.atan2(sin, cos)
    scale = torch.where(sin > 1e-8, 1.0 / sin.clamp_min(1e-8), 0.0)[..., None]
    d_u = scale * (cos[..., None] * eu - ev) / lu[..., None]
    d_v = scale * (cos[..., None] * ev - eu) / lv[..., None]
    return angle, d_u, d_v


def bend_angles(x, triples):
    """Angles (b, t) at the middle atom of ``triples`` (t, 3) and their derivatives
    (b, t, 3, 3) with respect to the three atoms. At a straight angle the direction
    of bending is undefined and the derivative is set to zero."""
    u = x[..., triples[:, 0], :] - x[..., triples[:, 1], :]
    v = x[..., triples[:, 2], :] - x[..., triples[:, 1], :]
    angle, d_i, d_k = _angle_between(u, v)
    return angle, torch.stack([d_i, -d_i - d_k, d_k], dim=-2)


def _bond_vectors(x, quadruples):
    """``f = x_i - x_j``, ``g = x_j - x_k``, ``h = x_l - x_k`` (b, q, 3) of ``quadruples``."""
    f = x[..., quadruples[:, 0], :] - x[..., quadruples[:, 1], :]
    g = x[..., quadruples[:, 1], :] - x[..., quadruples[:, 2], :]
    h = x[..., quadruples[:, 3], :] - x[..., quadruples[:, 2], :]
    return f, g, h


def dihedral_angles(x, quadruples):
    """Dihedral angles (b, q) about ``j-k`` of ``quadruples`` (q, 4), in (-pi, pi], and
    their derivatives (b, q, 4, 3) with respect to the four atoms (Blondel and Karplus,
    1996). The derivative is zero where ``i-j-k`` or ``j-k-l`` is straight and the
    angle undefined."""
    return _dihedral(*_bond_vectors(x, quadruples))


def _dihedral(f, g, h):
    """:func:`dihedral_angles` from the bond vectors of :func:`_bond_vectors`."""
    a, b = torch.cross(f, g, dim=-1), torch.cross(h, g, dim=-1)  # normals of the two planes
    aa, bb, lg = _dot(a, a), _dot(b, b), _norm(g)
    angle = torch.atan2(_dot(torch.cross(b, a, dim=-1), g) / lg, _dot(a, b))
    defined = (aa > 1e-20) & (bb > 1e-20)
    inv_aa = torch.where(defined, 1.0 / torch.where(defined, aa, 1.0), 0.0)[..., None]
    inv_bb = torch.where(defined, 1.0 / torch.where(defined, bb, 1.0), 0.0)[..., None]
    fg = (_dot(f, g) / lg)[..., None]
    hg = (_dot(h, g) / lg)[..., None]
    d_i = -lg[..., None] * inv_aa * a
    d_l = lg[..., None] * inv_bb * b
    d_j = -d_i + fg * inv_aa * a - hg * inv_bb * b
    d_k = -d_l - fg * inv_aa * a + hg * inv_bb * b
    return angle, torch.stack([d_i, d_j, d_k, d_l], dim=-2)


def wrap(angle):
    """Angles wrapped to (-pi, pi]."""
    return angle - 2 * math.pi * torch.ceil((angle - math.pi) / (2 * math.pi))


def torsion_fade(angle):
    """The switch ``g`` of torsions at bend angles (...) and its derivative ``dg/dtheta``.

    A dihedral is undefined where a bend is straight (180°) or folded (0°, as between
    a bond and a 1-3 pair through the same atom): ``g`` is 1 while the bend is more
    than ``pi - TORSION_FADE[0]`` from both, 0 within ``pi - TORSION_FADE[1]`` of
    either, a quintic step (twice differentiable) between.
    """
    on, off = TORSION_FADE
    straight = angle >= 0.5 * math.pi
    folded = torch.where(straight, angle, math.pi - angle)  # angle from the nearer end
    t = ((off - folded) / (off - on)).clamp(0.0, 1.0)  # 1 = full torsion
    fade = t**3 * (10 - 15 * t + 6 * t**2)
    slope = -30 * t**2 * (1 - t) ** 2 / (off - on) * torch.where(straight, 1.0, -1.0)
    return fade, slope


def faded_torsions(x, quadruples, reference):
    """Twists and fades of torsions, with their derivatives.

    The twist ``wrap(tau - tau_ref)`` of each dihedral from its reference, and the
    fade ``g(theta_ijk) g(theta_jkl)`` of its two bends (:func:`torsion_fade`), which
    is zero where the dihedral is undefined: a torsion enters the internal coordinates
    as ``g * twist`` and the Lindh model's energy as ``k g twist^2 / 2``, both smooth.

    Parameters
    ----------
    x : tensor (b, n, 3)
    quadruples : tensor (q, 4)
        Twisting about the middle two atoms.
    reference : tensor (q,)
        ``tau_ref``, rad.

    Returns
    -------
    twist, fade : tensors (b, q)
    d_twist, d_fade : tensors (b, q, 4, 3)
        Their derivatives with respect to the four atoms.
    """
    angle, fade, d_twist, d_fade = _LATEST_TORSIONS(x, quadruples)
    return wrap(angle - reference), fade, d_twist, d_fade


def _dihedrals_and_fades(x, quadruples):
    """Dihedrals (b, q), fades (b, q) and their derivatives (b, q, 4, 3) each: the part
    of :func:`faded_torsions` that does not depend on the reference."""
    f, g, h = _bond_vectors(x, quadruples)
    angle, d_twist = _dihedral(f, g, h)
    theta_j, dj_i, dj_k = _angle_between(f, -g)  # the bend i-j-k: arms to i and to k
    theta_k, dk_j, dk_l = _angle_between(g, h)  # the bend j-k-l: arms to j and to l
    fade_j, slope_j = torsion_fade(theta_j)
    fade_k, slope_k = torsion_fade(theta_k)
    by_j = (slope_j * fade_k)[..., None]  # d fade / d theta_j, (b, q, 1)
    by_k = (fade_j * slope_k)[..., None]
    d_fade = torch.stack(
        [
            by_j * dj_i,
            by_k * dk_j - by_j * (dj_i + dj_k),
            by_j * dj_k - by_k * (dk_j + dk_l),
            by_k * dk_l,
        ],
        dim=-2,
    )
    return angle, fade_j * fade_k, d_twist, d_fade


class _LatestTorsions:
    """:func:`_dihedrals_and_fades` of the latest configurations and torsions, kept.

    The Lindh prior and the internal-coordinate metric built from it take the same
    torsions at the same configurations, one after the other, at every evaluation of
    the GP's posterior (each with its own reference dihedrals): the second takes the
    first's numbers, the same to the last bit, where computing them again costs a
    seventh of the evaluation at a hundred atoms.
    """

    def __init__(self):
        self._latest = None  # (x, quadruples, result)

    def __call__(self, x, quadruples):
        if x.requires_grad:  # differentiated through: no numbers of another graph
            return _dihedrals_and_fades(x, quadruples)
        latest = self._latest
        if (
            latest is not None
            and latest[0].dtype == x.dtype
            and latest[0].shape == x.shape
            and latest[1].shape == quadruples.shape
            and torch.equal(latest[0], x)
            and torch.equal(latest[1], quadruples)
        ):
            return latest[2]
        result = _dihedrals_and_fades(x, quadruples)
        self._latest = (x.detach().clone(), quadruples.clone(), result)
        return result


_LATEST_TORSIONS = _LatestTorsions()


def out_of_plane_angles(x, quadruples):
    """Sines (b, o) of the angle between bond ``j-l`` and the plane ``i-j-k`` of each
    quadruple ``(i, j, k, l)`` (o, 4), centre ``j``, and their derivatives (b, o, 4, 3).

    With ``u = x_i - x_j``, ``v = x_k - x_j``, ``w = x_l - x_j`` and the normal
    ``n = u x v``, the sine is ``s = n.w / (|n| |w|)``; its gradients are
    ``ds/dw = n / (|n||w|) - s w / |w|^2`` and, through ``a = ds/dn = w / (|n||w|) -
    s n / |n|^2``, ``ds/du = v x a`` and ``ds/dv = a x u``; the centre takes minus
    their sum. Zero where the plane or the bond is degenerate.
    """
    u = x[..., quadruples[:, 0], :] - x[..., quadruples[:, 1], :]  # (b, o, 3)
    v = x[..., quadruples[:, 2], :] - x[..., quadruples[:, 1], :]
    w = x[..., quadruples[:, 3], :] - x[..., quadruples[:, 1], :]
    normal = torch.cross(u, v, dim=-1)
    n_norm, w_norm = _norm(normal), _norm(w)
    defined = (n_norm > 1e-12) & (w_norm > 1e-12)
    inv_n = torch.where(defined, 1.0 / torch.where(defined, n_norm, 1.0), 0.0)[..., None]
    inv_w = torch.where(defined, 1.0 / torch.where(defined, w_norm, 1.0), 0.0)[..., None]
    sine = _dot(normal, w) * inv_n[..., 0] * inv_w[..., 0]  # (b, o)
    d_w = inv_n * inv_w * normal - sine[..., None] * inv_w**2 * w
    d_normal = inv_n * inv_w * w - sine[..., None] * inv_n**2 * normal
    d_u = torch.cross(v, d_normal, dim=-1)
    d_v = torch.cross(d_normal, u, dim=-1)
    return sine, torch.stack([d_u, -d_u - d_v - d_w, d_v, d_w], dim=-2)


class AtomScatter:
    """``sum_t w_t dq_t/dx``: position gradients (b, n, 3) of weights ``w`` (b, t) on
    primitives ``q`` of fixed ``atoms`` (t, k), from their derivatives (b, t, k, 3) with
    respect to those atoms.

    One histogram over every entry (``torch.bincount``): the scatter-add ten times
    faster than ``index_add_`` or ``np.add.at``. Where the entries of one configuration
    land is worked out once, not at every call.

    Parameters
    ----------
    atoms : array or tensor (t, k)
    n_atoms : int
    """

    def __init__(self, atoms, n_atoms):
        atoms = torch.as_tensor(atoms, dtype=torch.long)
        self.n_atoms = n_atoms
        self._where = (3 * atoms[:, :, None] + torch.arange(3)).reshape(-1)  # (t k 3,)

    def __call__(self, weights, derivatives):
        b = derivatives.shape[0]
        size = 3 * self.n_atoms
        where = self._where
        if b > 1:
            where = (where + size * torch.arange(b)[:, None]).reshape(-1)  # (b t k 3,)
        contributions = weights[..., None, None] * derivatives  # (b, t, k, 3)
        out = torch.bincount(where, weights=contributions.reshape(-1), minlength=b * size)
        return out.reshape(b, self.n_atoms, 3)


class PrimitiveInternals:
    """Stretches, bends, faded torsions and out-of-plane angles: values and Wilson B matrix.

    Parameters
    ----------
    stretches : array (p, 2)
    bends : array (t, 3)
        Middle atom second.
    torsions : array (q, 4)
        Twisting about the middle two atoms; each enters as its faded twist
        (:func:`faded_torsions`).
    out_of_planes : array (o, 4)
        Centre second; each enters as the sine of its out-of-plane angle
        (:func:`out_of_plane_angles`).
    reference : array (n, 3)
        Configuration whose dihedrals are subtracted from every other's.

    Attributes
    ----------
    atoms : tensor (d, 4)
        The atoms of each primitive (repeated for stretches and bends, whose
        derivatives there are zero).
    """

    def __init__(self, stretches, bends, torsions, out_of_planes, reference):
        self.stretches = torch.as_tensor(stretches, dtype=torch.long).reshape(-1, 2)
        self.bends = torch.as_tensor(bends, dtype=torch.long).reshape(-1, 3)
        self.torsions = torch.as_tensor(torsions, dtype=torch.long).reshape(-1, 4)
        self.out_of_planes = torch.as_tensor(out_of_planes, dtype=torch.long).reshape(-1, 4)
        reference = torch.as_tensor(reference, dtype=torch.float64)
        self.reference_dihedrals = dihedral_angles(reference, self.torsions)[0]
        self.atoms = torch.cat(
            [
                self.stretches[:, [0, 1, 1, 1]],
                self.bends[:, [0, 1, 2, 2]],
                self.torsions,
                self.out_of_planes,
            ]
        )
        self.n_atoms = reference.shape[0]
        self._scatter = AtomScatter(self.atoms, self.n_atoms)

    def __len__(self):
        return len(self.atoms)

    def values_and_derivatives(self, x):
        """Primitive values (b, d) of configurations x (b, n, 3), and their derivatives
        (b, d, 4, 3) with respect to the atoms of :attr:`atoms`."""
        x = torch.as_tensor(x, dtype=torch.float64)
        parts = [bond_lengths(x, self.stretches), bend_angles(x, self.bends)]
        if len(self.torsions):
            twist, fade, d_twist, d_fade = faded_torsions(
                x, self.torsions, self.reference_dihedrals
            )
            faded = fade[..., None, None] * d_twist + twist[..., None, None] * d_fade
            parts.append((fade * twist, faded))
        if len(self.out_of_planes):
            parts.append(out_of_plane_angles(x, self.out_of_planes))
        values, derivatives = [], []
        for value, derivative in parts:
            pad = 4 - derivative.shape[-2]
            if pad:
                derivative = torch.cat(
                    [derivative, derivative.new_zeros(*derivative.shape[:-2], pad, 3)], dim=-2
                )
            values.append(value)
            derivatives.append(derivative)
        return torch.cat(values, dim=-1), torch.cat(derivatives, dim=-3)

    def wilson_b(self, derivatives):
        """The dense B matrix (b, d, 3n) from :meth:`values_and_derivatives`'s derivatives."""
        b, d = derivatives.shape[:2]
        dense = derivatives.new_zeros(b, d, self.n_atoms, 3)
        rows = torch.arange(d)
        for slot in range(4):  # each primitive's atoms are distinct within a slot
            dense[:, rows, self.atoms[:, slot]] += derivatives[:, :, slot]
        return dense.reshape(b, d, 3 * self.n_atoms)

    def left_product(self, matrix, derivatives):
        """``M B`` (r, 3n) of a dense ``matrix`` M (r, d) and the B matrix of one
        configuration from its derivatives (1, d, 4, 3): a sparse product over the
        twelve entries of each row of B, where the dense B of a hundred atoms would
        multiply a thousandfold more zeros."""
        d = len(self.atoms)
        columns = (3 * self.atoms[:, :, None] + torch.arange(3)).reshape(-1)  # (12 d,)
        rows = np.arange(0, 12 * d + 1, 12)  # each primitive's twelve entries in a row
        wilson = sparse.csr_array(
            (derivatives[0].reshape(-1).numpy(), columns.numpy(), rows), (d, 3 * self.n_atoms)
        )
        transposed = np.asarray(wilson.T @ np.asarray(matrix).T)  # (3n, r)
        return torch.from_numpy(np.ascontiguousarray(transposed.T))

    def transpose_product(self, derivatives, weights):
        """``B^T w``: position gradients (b, n, 3) from weights (b, d) on the primitives."""
        return self._scatter(weights, derivatives)
