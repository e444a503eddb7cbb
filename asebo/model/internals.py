r"""Primitive internal coordinates and their Wilson B matrix, batched in PyTorch.

Bond lengths, bend angles, torsions and out-of-plane angles of configurations ``x``
(b, n, 3), with their derivatives with respect to the positions of the two, three or
four atoms each involves (Wilson, Decius and Cross, *Molecular Vibrations*,
McGraw-Hill (1955), ch. 4): the first two in closed form, the four-atom terms by
automatic differentiation of each quadruple. A torsion enters as its twist from a
reference value, wrapped to (-pi, pi] and faded to zero as one of its bends
straightens or folds, where the dihedral is undefined (the switch of
:class:`asebo.model.lindh.LindhModel`): smooth everywhere, where the bare dihedral's
derivative diverges.
:class:`asebo.model.metric.InternalMetric` builds its curvilinear features from them.
"""

import torch

from asebo.model.lindh import TORSION_FADE


def _norm(v):
    return torch.linalg.norm(v, dim=-1)


def _dot(u, v):
    return (u * v).sum(dim=-1)


def bond_lengths(x, pairs):
    """Lengths (b, p) of atom pairs ``pairs`` (p, 2) and their derivatives (b, p, 2, 3)."""
    d = x[..., pairs[:, 0], :] - x[..., pairs[:, 1], :]  # (b, p, 3)
    length = _norm(d)
    unit = d / length[..., None]
    return length, torch.stack([unit, -unit], dim=-2)


def bend_angles(x, triples):
    """Angles (b, t) at the middle atom of ``triples`` (t, 3) and their derivatives
    (b, t, 3, 3) with respect to the three atoms. At a straight angle the direction
    of bending is undefined and the derivative is set to zero."""
    u = x[..., triples[:, 0], :] - x[..., triples[:, 1], :]
    v = x[..., triples[:, 2], :] - x[..., triples[:, 1], :]
    lu, lv = _norm(u), _norm(v)
    eu, ev = u / lu[..., None], v / lv[..., None]
    cos = _dot(eu, ev).clamp(-1.0, 1.0)
    sin = _norm(torch.cross(eu, ev, dim=-1))
    angle = torch.atan2(sin, cos)
    scale = torch.where(sin > 1e-8, 1.0 / sin.clamp_min(1e-8), 0.0)[..., None]
    d_i = scale * (cos[..., None] * eu - ev) / lu[..., None]
    d_k = scale * (cos[..., None] * ev - eu) / lv[..., None]
    return angle, torch.stack([d_i, -d_i - d_k, d_k], dim=-2)


def _dihedral(f, g, h):
    """Dihedral angle (...) of the bond vectors ``f = x_i - x_j``, ``g = x_j - x_k`` and
    ``h = x_l - x_k`` (..., 3), in (-pi, pi]."""
    a, b = torch.cross(f, g, dim=-1), torch.cross(h, g, dim=-1)
    return torch.atan2(_dot(torch.cross(b, a, dim=-1), g) / _norm(g), _dot(a, b))


def dihedral_angles(x, quadruples):
    """Dihedral angles (b, q) about ``j-k`` of ``quadruples`` (q, 4), in (-pi, pi]."""
    f = x[..., quadruples[:, 0], :] - x[..., quadruples[:, 1], :]
    g = x[..., quadruples[:, 1], :] - x[..., quadruples[:, 2], :]
    h = x[..., quadruples[:, 3], :] - x[..., quadruples[:, 2], :]
    return _dihedral(f, g, h)


def _fade(angle):
    """The switch ``g`` of :func:`asebo.model.lindh.LindhModel`'s torsions at a bend angle: 1
    away from 0° and 180°, 0 close to either, a quintic step between (torch)."""
    on, off = TORSION_FADE
    folded = torch.where(angle >= 0.5 * torch.pi, angle, torch.pi - angle)
    t = ((off - folded) / (off - on)).clamp(0.0, 1.0)
    return t**3 * (10 - 15 * t + 6 * t**2)


def _angle(u, v):
    return torch.atan2(_norm(torch.cross(u, v, dim=-1)), _dot(u, v))


def faded_twist(points, reference):
    """``g(theta_ijk) g(theta_jkl) wrap(tau - tau_ref)`` of one quadruple ``points`` (4, 3).

    The dihedral ``tau`` is undefined where one of its bends is straight or folded;
    faded by the same switch as the Lindh model's torsion energy it is smooth
    everywhere, and zero where the dihedral is undefined.
    """
    f, g, h = points[0] - points[1], points[1] - points[2], points[3] - points[2]
    tau = _dihedral(f, g, h) - reference
    twist = torch.atan2(torch.sin(tau), torch.cos(tau))
    return _fade(_angle(f, -g)) * _fade(_angle(g, h)) * twist


def out_of_plane(points):
    """Sine of the angle between bond ``j-l`` and the plane ``i-j-k`` of one quadruple
    ``points`` (4, 3) with ``j`` the centre (Wilson, Decius and Cross, sec. 4-1)."""
    u, v, w = points[0] - points[1], points[2] - points[1], points[3] - points[1]
    normal = torch.cross(u, v, dim=-1)
    return _dot(normal, w) / (_norm(normal) * _norm(w))


def _local(function, x, quadruples, *extra):
    """Values (b, q) of ``function`` of the four atoms of each quadruple, and their
    derivatives (b, q, 4, 3) by automatic differentiation of the one quadruple."""
    points = x[..., quadruples, :]  # (b, q, 4, 3)
    b, q = points.shape[:2]
    flat = points.reshape(b * q, 4, 3)
    extra = [e.expand(b, q).reshape(-1) for e in extra]
    grad_and_value = torch.func.vmap(torch.func.grad_and_value(function))
    derivative, value = grad_and_value(flat, *extra)
    return value.reshape(b, q), derivative.reshape(b, q, 4, 3)


class PrimitiveInternals:
    """Stretches, bends, faded torsions and out-of-plane angles: values and Wilson B matrix.

    Parameters
    ----------
    stretches : array (p, 2)
    bends : array (t, 3)
        Middle atom second.
    torsions : array (q, 4)
        Twisting about the middle two atoms; each enters as :func:`faded_twist`.
    out_of_planes : array (o, 4)
        Centre second; each enters as :func:`out_of_plane`.
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
        self.reference_dihedrals = dihedral_angles(reference, self.torsions)
        self.atoms = torch.cat(
            [
                self.stretches[:, [0, 1, 1, 1]],
                self.bends[:, [0, 1, 2, 2]],
                self.torsions,
                self.out_of_planes,
            ]
        )
        self.n_atoms = reference.shape[0]

    def __len__(self):
        return len(self.atoms)

    def values_and_derivatives(self, x):
        """Primitive values (b, d) of configurations x (b, n, 3), and their derivatives
        (b, d, 4, 3) with respect to the atoms of :attr:`atoms`."""
        x = torch.as_tensor(x, dtype=torch.float64)
        parts = [bond_lengths(x, self.stretches), bend_angles(x, self.bends)]
        if len(self.torsions):
            parts.append(_local(faded_twist, x, self.torsions, self.reference_dihedrals))
        if len(self.out_of_planes):
            parts.append(_local(out_of_plane, x, self.out_of_planes))
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

    def transpose_product(self, derivatives, weights):
        """``B^T w``: position gradients (b, n, 3) from weights (b, d) on the primitives."""
        b = derivatives.shape[0]
        contributions = weights[..., None, None] * derivatives  # (b, d, 4, 3)
        out = derivatives.new_zeros(b, self.n_atoms, 3)
        out.index_add_(1, self.atoms.reshape(-1), contributions.reshape(b, -1, 3))
        return out
