"""Learning curve: which GP model predicts the next EMT energies and forces of a relaxation.

Each seed rattles a start (0.1 Å, and a 2 % strain under the filter), relaxes it with
ASE's BFGS (maxstep 0.1 Å) and records the path; a model fitted to the first ``m``
points predicts the next three: energy MAE (meV) and force RMSE over the free
coordinates (eV/Å). ``springs alone`` is the prior without a GP (shifted by the mean
residual).

    python docs/notes/periodic_learning_curve.py --system adatom --seeds 2 --sizes 3,6,10
"""

import argparse

import numpy as np
from ase.build import add_adsorbate, bulk, fcc111
from ase.calculators.emt import EMT
from ase.constraints import FixAtoms
from ase.filters import FrechetCellFilter

from asebo.model.cell_coordinates import GeneralizedCoordinates
from asebo.model.gp import EnergyForceGP
from asebo.model.periodic import PeriodicMetric, calculator_prior
from asebo.model.springs import ExpSprings


def system(name):
    if name == "adatom":
        atoms = fcc111("Cu", (3, 3, 3), vacuum=6.0)
        add_adsorbate(atoms, "Cu", 2.0, "fcc")
        atoms.set_constraint(FixAtoms(mask=atoms.positions[:, 2] < atoms.positions[:, 2].min() + 3))
        atoms.pbc = (True, True, False)
        atoms.calc = EMT()
        return atoms, atoms
    if name == "bulk":
        atoms = bulk("Cu", cubic=True) * (2, 2, 2)
        del atoms[0]  # a vacancy
        atoms.calc = EMT()
        return atoms, atoms
    atoms = bulk("Cu", cubic=True) * (2, 1, 1)
    atoms.calc = EMT()
    return atoms, FrechetCellFilter(atoms)


def sample(opt, reference, rng, scale, cell_scale):
    """Generalized positions near ``reference``: free atoms rattled, cell rows strained."""
    coordinates = GeneralizedCoordinates.from_optimizable(opt)
    q = reference + 0.0
    free = np.setdiff1d(np.arange(coordinates.n_atoms), coordinates.fixed)
    q[free] += rng.normal(scale=scale, size=(len(free), 3))
    if coordinates.has_cell:
        strain = rng.normal(scale=cell_scale, size=(3, 3))
        q[coordinates.n_atoms :] += coordinates.strain_scale * (strain + strain.T) / 2
    return q


AHEAD = 3  # the model predicts this many next points of the relaxation


def trajectory(opt, start, steps):
    """(q, E, F) of the first ``steps`` configurations of a BFGS relaxation from ``start``."""
    from ase.optimize import BFGS

    opt.set_positions(start)
    path = []
    optimizer = BFGS(opt, logfile=None, maxstep=0.1)
    optimizer.attach(lambda: path.append((opt.get_positions().copy(), *evaluate_here(opt))))
    optimizer.run(fmax=1e-4, steps=steps - 1)
    return path[:steps]


def evaluate_here(opt):
    return opt.get_potential_energy(), opt.get_forces().copy()


def evaluate(opt, q):
    opt.set_positions(q)
    return opt.get_potential_energy(), opt.get_forces()  # constrained forces


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", default="adatom")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--sizes", default="3,5,10")
    parser.add_argument("--taus", default="0,1")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    atoms, opt = system(args.system)
    reference = opt.get_positions().copy()
    coordinates = GeneralizedCoordinates.from_optimizable(opt)
    free = np.setdiff1d(np.arange(coordinates.n_atoms), coordinates.fixed)
    rows = np.concatenate([free, np.arange(coordinates.n_atoms, coordinates.rows)])
    results = {}
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        start = sample(opt, reference, rng, args.scale, 0.02)  # a rattled start
        path = trajectory(opt, start, max(sizes) + AHEAD)
        train = [p[0] for p in path]
        data = [(p[1], p[2]) for p in path]
        centre = coordinates.configuration(train[0])
        models = {}
        for tau in [float(t) for t in args.taus.split(",")]:
            springs = ExpSprings(centre, transverse=tau)
            metric = PeriodicMetric.from_model(springs, coordinates, train[0])
            prior = calculator_prior(springs, opt)
            models["cartesian+max"] = dict(prior="max")
            models[f"metric(tau={tau:g})+max"] = dict(prior="max", metric=metric)
            models[f"cartesian+springs(tau={tau:g})"] = dict(prior=prior)
            models[f"metric+springs(tau={tau:g})"] = dict(prior=prior, metric=metric)
            models[f"metric+springs+trend(tau={tau:g})"] = dict(
                prior=prior, metric=metric, trend=30.0
            )
            models[f"springs alone(tau={tau:g})"] = "prior-only", prior
        for name, options in models.items():
            for m in sizes:
                test = train[m : m + AHEAD]
                truth = data[m : m + AHEAD]
                P = np.array(train[:m])
                E = np.array([d[0] for d in data[:m]])
                F = np.array([d[1] for d in data[:m]])
                Et = np.array([t[0] for t in truth])
                Ft = np.array([t[1] for t in truth])
                if isinstance(options, tuple):
                    prior = options[1]
                    pe = np.array([prior.energy_and_forces(q)[0] for q in test])
                    pf = np.array([prior.energy_and_forces(q)[1] for q in test])
                    pe += np.mean(E - np.array([prior.energy_and_forces(q)[0] for q in P]))
                    mean, grad = pe, -pf
                else:
                    gp = EnergyForceGP(kernel="cartesian", **options).fit(P, E, F)
                    mean, grad = gp.predict(np.array(test), return_gradient=True)
                e_err = np.abs(mean - Et).mean()
                f_err = np.sqrt(((-grad - Ft)[:, rows] ** 2).mean())
                results.setdefault((name, m), []).append((e_err, f_err))
    print(f"system={args.system} scale={args.scale} seeds={args.seeds}")
    print(f"{'model':34s}" + "".join(f"  m={m:<2d} E_MAE  F_RMSE" for m in sizes))
    for name in models:
        line = f"{name:34s}"
        for m in sizes:
            e, f = np.mean(results[(name, m)], axis=0)
            line += f"   {1000 * e:8.1f} {f:7.3f}"
        print(line)


if __name__ == "__main__":
    main()
