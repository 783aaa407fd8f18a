"""A parallel-transmit (pTx) design from arrays: synthetic B1+ maps of an
8-channel ring coil, a spiral gradient, local SAR limits (VOPs) and a peak
limit per channel, then the maps of the result.

    python examples/ptx_from_arrays.py [-o ptx.png]
"""

import argparse

import numpy as np

import persolve
import persolve.plot

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--max-iterations", type=int, default=300)
ap.add_argument("-o", "--output", default="ptx.png")
args = ap.parse_args()

gamma_bar = 4257.59                    # Hz/G
n, fov, nc, nt, dt = 24, 20.0, 8, 600, 4e-6
flip = np.deg2rad(20)

# spins: a disc of radius 8 cm on an n x n grid (cm)
xs = (np.arange(n) - n / 2 + 0.5) * fov / n
x, y = [a.ravel() for a in np.meshgrid(xs, xs, indexing="ij")]
inside = x**2 + y**2 < 8.0**2
r = np.stack([x[inside], y[inside], np.zeros(inside.sum())], axis=1)
ns = len(r)

# synthetic B1+ maps: coil c at angle phi_c on a ring of radius 15 cm,
# magnitude falling with distance, phase from the angle and the distance
phi = 2 * np.pi * np.arange(nc) / nc
coil = 15.0 * np.stack([np.cos(phi), np.sin(phi)], axis=1)
d = np.linalg.norm(r[:, None, :2] - coil[None], axis=2)        # [ns, nc], cm
b1map = (15.0 / d) / nc * np.exp(1j * (phi[None] + 2 * np.pi * d / 30.0))

# gradient: a spiral-in over the excitation's k-space (resolution 2 cm)
t = np.arange(nt) * dt
T = nt * dt
kmax, turns = 1 / (2 * 2.0), fov / (2 * 2.0) / 2
kr, th = kmax * (1 - t / T), 2 * np.pi * turns * (1 - t / T)
kx, ky = kr * np.cos(th), kr * np.sin(th)
g = np.zeros((nt, 3))
g[:, 0] = -np.gradient(kx, dt) / gamma_bar
g[:, 1] = -np.gradient(ky, dt) / gamma_bar

# two VOPs (Hermitian, positive semidefinite), W/kg per G^2
rng = np.random.default_rng(0)
a = rng.normal(size=(2, nc, nc)) + 1j * rng.normal(size=(2, nc, nc))
vop = 0.05 * (a @ a.conj().transpose(0, 2, 1)) + 0.1 * np.eye(nc)

# start: the circularly polarized mode, a constant pulse of the flip
b1 = np.exp(-1j * phi)[:, None] * np.full(nt, flip / (2 * np.pi * gamma_bar * T))

problem = persolve.Problem(
    r, np.tile([0.0, np.sin(flip), np.cos(flip)], (ns, 1)), g, dt,
    b1map=b1map, b1=b1, vop=vop, sar_max=4e-4, tr=0.01,
    b1_max=np.full(nc, 0.05), loss="mls", df=20.0 * (r[:, 0] / 8.0))
print(problem)

res = persolve.design(problem, max_iterations=args.max_iterations, progress=True)
print(res.summary())
c = res.constraints
print("peak |b1| per channel (G):", " ".join(f"{v:.4g}" for v in c["peak_b1"]),
      f"(limit {c['b1_max'][0]:g})")
print("SAR per VOP (W/kg):", " ".join(f"{v:.4g}" for v in c["sar"]),
      f"(limit {c['sar_max']:g})")
persolve.plot.save(res, args.output)
print("wrote", args.output)
