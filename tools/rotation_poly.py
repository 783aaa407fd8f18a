#!/usr/bin/env python3
"""The float32 polynomials of the rotation coefficients for 1/4 <= q < 4
(src/model/bloch_math_tmpl.h, PS_MID_*): how they are made, and their check.

    tools/rotation_poly.py            fit them, print the C macros (minutes)
    tools/rotation_poly.py --check    check the header's macros against
                                      float64 at every float32 q, in the
                                      GPU's arithmetic (fused multiply-adds)
                                      and the CPU's (separate roundings)

With q = phi^2 the step's rotation takes c = cos(phi), A = sin(phi)/phi,
B = (1 - cos(phi))/q and, for its Jacobian, C = (phi - sin(phi))/phi^3;
the quaternion composite takes cos(phi/2) and sin(phi/2)/phi. Each is a
polynomial in q - q0, fitted by weighted (relative) least squares on
[1/4, 4] with its coefficients rounded to float32 one at a time, the
later ones refitted after each rounding. The centre q0 is a float where
the constant terms are floats within 0.012 ulp (A and B for the step,
cos(phi/2) and sin(phi/2)/phi for the half angle), chosen among those
candidates for the smallest bias, over 30 stretches of q, of the step's
norm c^2 + q A^2 - 1 (of the half angle's rotation angle): a constant
term off by its rounding would move every step near q0 the same way.
The float32 evaluation is emulated here with fused multiply-adds (a
product of two floats is exact in float64; the sum is then rounded once
to float64 and once to float32), as the GPU computes PS_FMA, or with the
product and the sum each rounded to float32, as the CPU does (plain
a * b + c, no contraction).
"""
import argparse
import re
import sys

try:
    import numpy as np
except ImportError:  # the meson test of --check is skipped without numpy
    print("rotation_poly.py: numpy is not installed", file=sys.stderr)
    sys.exit(77)

F32 = np.float32
LO, HI = 0.25, 4.0
FIT_Q = np.linspace(LO, HI, 20001)
BINS = 30


def fun(name, q):
    p = np.sqrt(q)
    return {
        "A": lambda: np.sin(p) / p,
        "B": lambda: (1 - np.cos(p)) / q,
        "C": lambda: (p - np.sin(p)) / (q * p),
        "QC": lambda: np.cos(p / 2),
        "QH": lambda: np.sin(p / 2) / p,
    }[name]()


def fma32(x, y, z):
    return (x.astype(np.float64) * y.astype(np.float64) + z.astype(np.float64)).astype(F32)


def muladd32(x, y, z):
    return ((x.astype(np.float64) * y.astype(np.float64)).astype(F32) + z).astype(F32)


def horner32(cs, t, op=fma32):
    acc = np.full_like(t, F32(cs[-1]))
    for c in reversed(cs[:-1]):
        acc = op(acc, t, np.full_like(t, F32(c)))
    return acc


def fit(name, deg, q0):
    """Coefficients in q - q0, rounded to float32 one at a time."""
    t = FIT_Q - q0
    y = fun(name, FIT_Q)
    w = 1 / np.abs(y)
    fixed = []
    for k in range(deg + 1):
        r = y - sum(c * t**j for j, c in enumerate(fixed))
        V = np.stack([t**j for j in range(k, deg + 1)], 1)
        sol = np.linalg.lstsq(V * w[:, None], r * w, rcond=None)[0]
        fixed.append(float(F32(sol[0])))
    return fixed


def near_float(x):
    """Distance of x to the nearest float32, in ulps."""
    xf = x.astype(F32)
    ulp = np.nextafter(xf, F32(np.inf)).astype(np.float64) - xf.astype(np.float64)
    d = (x - xf.astype(np.float64)) / ulp
    return np.abs(d - np.round(d))


def centres(f, g):
    """Floats q0 in [2, 2.125] where f(q0) and g(q0) are floats within 0.012 ulp."""
    lo = np.array([2.0], F32).view(np.uint32)[0]
    hi = np.array([2.125], F32).view(np.uint32)[0]
    q0 = np.arange(lo, hi, dtype=np.uint32).view(F32).astype(np.float64)
    ok = (near_float(fun(f, q0)) < 0.012) & (near_float(fun(g, q0)) < 0.012)
    return q0[ok]


def binned_max(q, x):
    b = np.clip(((q - LO) / (HI - LO) * BINS).astype(int), 0, BINS - 1)
    return np.max(np.abs(np.bincount(b, x, BINS) / np.bincount(b, None, BINS)))


SAMPLE = np.linspace(LO, HI, 400001).astype(F32)


def step_bias(q0, ca, cb):
    q, qd = SAMPLE, SAMPLE.astype(np.float64)
    t = (q - F32(q0)).astype(F32)
    a = horner32(ca, t).astype(np.float64)
    c = fma32(-q, horner32(cb, t), np.ones_like(q)).astype(np.float64)
    return binned_max(qd, c**2 + qd * a**2 - 1)


def half_bias(q0, cc, ch):
    q, qd = SAMPLE, SAMPLE.astype(np.float64)
    t = (q - F32(q0)).astype(F32)
    p = np.sqrt(qd)
    ang = 2 * np.arctan2(p * horner32(ch, t).astype(np.float64), horner32(cc, t).astype(np.float64))
    return binned_max(qd, (ang - p) / p)


def macro(name, cs):
    s = "(PS_REAL)(%r)" % cs[-1]
    for c in reversed(cs[:-1]):
        s = "PS_FMA(t, %s, (PS_REAL)(%r))" % (s, c)
    return "#define %s(t) (%s)" % (name, s)


def make():
    best = min(((step_bias(q0, fit("A", 5, q0), fit("B", 5, q0)), q0)
                for q0 in map(float, centres("A", "B"))))
    t0 = best[1]
    half = min(((half_bias(q0, fit("QC", 4, q0), fit("QH", 4, q0)), q0)
                for q0 in map(float, centres("QC", "QH"))))
    h0 = half[1]
    print("/* step norm bias %.2g (max over %d stretches of q), half-angle bias %.2g */"
          % (best[0], BINS, half[0]))
    print("#define PS_MID_T0 %r" % t0)
    print("#define PS_MID_H0 %r" % h0)
    for name, deg, q0 in (("A", 5, t0), ("B", 5, t0), ("C", 4, t0), ("QC", 4, h0), ("QH", 4, h0)):
        print(macro("PS_MID_" + name, fit(name, deg, q0)))


def parse_header(path):
    """PS_MID_T0, PS_MID_H0 and the coefficients of each PS_MID_* macro."""
    text = open(path).read()
    t0 = float(re.search(r"#define PS_MID_T0 (\S+)", text).group(1))
    h0 = float(re.search(r"#define PS_MID_H0 (\S+)", text).group(1))
    co = {}
    for name in ("A", "B", "C", "QC", "QH"):
        line = re.search(r"#define PS_MID_%s\(t\) (.*)" % name, text).group(1)
        co[name] = [float(v) for v in re.findall(r"\(PS_REAL\)\(([^)]+)\)", line)][::-1]
    return t0, h0, co


# the limits of --check, per arithmetic: worst error of A, B, C, cos(phi/2)
# and sin(phi/2)/phi (relative) and of c (absolute), in units of 2^-24;
# the largest mean over the 30 stretches of q of the step's norm
# c^2 + q A^2 - 1 and of the half angle's relative rotation-angle error
LIMITS = {"fused": (1.6, 1.6, 1e-9, 1e-9), "unfused": (2.0, 2.6, 1e-9, 1e-9)}


def check(path):
    """Every float32 q in [1/4, 4), both arithmetics, against float64."""
    t0, h0, co = parse_header(path)
    lo = np.array([LO], F32).view(np.uint32)[0]
    hi = np.array([HI], F32).view(np.uint32)[0]
    ok = True
    for arith, op in (("fused", fma32), ("unfused", muladd32)):
        worst = {}
        nsum = nsq = n = 0.0
        sums = {"norm": np.zeros(BINS), "half": np.zeros(BINS)}
        cnt = np.zeros(BINS)
        for start in range(int(lo), int(hi), 1 << 22):
            q = np.arange(start, min(int(hi), start + (1 << 22)), dtype=np.uint32).view(F32)
            qd = q.astype(np.float64)
            p = np.sqrt(qd)
            t = (q - F32(t0)).astype(F32)
            th = (q - F32(h0)).astype(F32)
            got = {k: horner32(co[k], th if k in ("QC", "QH") else t, op) for k in co}
            got["c"] = op(-q, got["B"], np.ones_like(q))
            for k, v in got.items():
                exact = np.cos(p) if k == "c" else fun(k, qd)
                e = np.abs(v.astype(np.float64) - exact)
                worst[k] = max(worst.get(k, 0.0), np.max(e if k == "c" else e / np.abs(exact)))
            d = got["c"].astype(np.float64) ** 2 + qd * got["A"].astype(np.float64) ** 2 - 1
            nsum += d.sum()
            nsq += (d * d).sum()
            n += d.size
            ang = 2 * np.arctan2(p * got["QH"].astype(np.float64), got["QC"].astype(np.float64))
            b = np.clip(((qd - LO) / (HI - LO) * BINS).astype(int), 0, BINS - 1)
            sums["norm"] += np.bincount(b, d, BINS)
            sums["half"] += np.bincount(b, (ang - p) / p, BINS)
            cnt += np.bincount(b, None, BINS)
        rel_max, c_max, norm_max, half_max = LIMITS[arith]
        print("%s multiply-adds:" % arith)
        for k, v in worst.items():
            units = v / 2.0**-24
            print("  %-2s worst %s error %.3g (%.2f units of 2^-24)"
                  % (k, "absolute" if k == "c" else "relative", v, units))
            ok &= units <= (c_max if k == "c" else rel_max)
        norm = np.max(np.abs(sums["norm"] / cnt))
        half = np.max(np.abs(sums["half"] / cnt))
        print("  c^2 + q A^2 - 1: mean %.2g, rms %.2g, largest mean over %d stretches %.2g"
              % (nsum / n, np.sqrt(nsq / n), BINS, norm))
        print("  half angle's rotation, relative error: largest mean over %d stretches %.2g"
              % (BINS, half))
        ok &= norm <= norm_max and half <= half_max
    print("within the limits" if ok else "NOT within the limits")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", metavar="HEADER", nargs="?", const="src/model/bloch_math_tmpl.h",
                    help="check the macros of HEADER (default %(const)s) instead of fitting")
    a = ap.parse_args()
    if a.check:
        sys.exit(0 if check(a.check) else 1)
    make()


if __name__ == "__main__":
    main()
