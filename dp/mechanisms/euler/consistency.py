"""Constraints C1-C3, their violations, LinProg and Round (spec 004 sections 5, 6): the
post-processing that makes the noisy counts consistent; it reads no data and spends no budget.
scipy's sparse matrices and HiGHS are imported where they are used: `import dp` stays quick
(they took 0.6 s of it) for the many who never make an Euler histogram consistent."""
from __future__ import annotations

import functools
import time

import numpy as np

from ...errors import ParameterError


def _parts(G):
    G = np.asarray(G)
    return G[0::2, 0::2], G[0::2, 1::2], G[1::2, 0::2], G[1::2, 1::2]   # F, Ev, Eh, V


def split_components(G) -> dict:
    """faces (n, n), vertical edges (n, n-1), horizontal edges (n-1, n), vertices (n-1, n-1)
    of a doubled-grid array (copies): e.g. for drawing the exact histogram's faces."""
    F, Ev, Eh, V = _parts(G)
    return {"faces": F.copy(), "vertical_edges": Ev.copy(), "horizontal_edges": Eh.copy(),
            "vertices": V.copy()}


def violations(G, tol: float = 1e-9) -> dict:
    """Violated rows per family: C1 edge <= each incident face, C2 vertex <= each incident
    edge, C3 the 2x2 Euler count around each vertex >= 0 (section 5.1)."""
    F, Ev, Eh, V = _parts(np.asarray(G, dtype=np.float64))
    c1 = sum(int((a > tol).sum()) for a in (Ev - F[:, :-1], Ev - F[:, 1:], Eh - F[:-1], Eh - F[1:]))
    c2 = sum(int((a > tol).sum()) for a in (V - Ev[:-1], V - Ev[1:], V - Eh[:, :-1], V - Eh[:, 1:]))
    c3 = -(F[:-1, :-1] + F[:-1, 1:] + F[1:, :-1] + F[1:, 1:]) + \
        (Ev[:-1] + Ev[1:] + Eh[:, :-1] + Eh[:, 1:]) - V
    return {"C1": c1, "C2": c2, "C3": int((c3 > tol).sum())}


@functools.lru_cache(maxsize=8)
def constraint_matrix(n: int, include_c3: bool = True):
    """Sparse C with one row per constraint "C @ vec(G) <= 0" (section 5.3), and the row
    slice of each family. Do not modify the returned matrix (it is cached)."""
    import scipy.sparse as sp
    m = 2 * n - 1
    I = np.arange(m * m).reshape(m, m)
    v = I[1::2, 1::2]
    fam = {
        "C1": [(I[0::2, 1::2], I[0::2, 0:-1:2]), (I[0::2, 1::2], I[0::2, 2::2]),
               (I[1::2, 0::2], I[0:-1:2, 0::2]), (I[1::2, 0::2], I[2::2, 0::2])],
        "C2": [(v, I[2::2, 1::2]), (v, I[0:-1:2, 1::2]), (v, I[1::2, 0:-1:2]), (v, I[1::2, 2::2])],
    }
    rows, cols, vals, slices, r = [], [], [], {}, 0
    for name in ("C1", "C2"):
        r_start = r
        for a, b in fam[name]:
            a, b = a.ravel(), b.ravel()
            ri = np.arange(r, r + a.size)
            rows += [ri, ri]
            cols += [a, b]
            vals += [np.ones(a.size), -np.ones(a.size)]
            r += a.size
        slices[name] = slice(r_start, r)
    if include_c3:
        ri = np.arange(r, r + v.size)
        terms = [(I[0:-1:2, 0:-1:2], -1), (I[0:-1:2, 2::2], -1), (I[2::2, 0:-1:2], -1),
                 (I[2::2, 2::2], -1), (I[0:-1:2, 1::2], 1), (I[2::2, 1::2], 1),
                 (I[1::2, 0:-1:2], 1), (I[1::2, 2::2], 1), (v, -1)]
        for idx, s in terms:
            rows.append(ri)
            cols.append(idx.ravel())
            vals.append(np.full(v.size, float(s)))
        slices["C3"] = slice(r, r + v.size)
        r += v.size
    if not rows:   # n = 1: a single face and no constraint
        return sp.csr_matrix((0, m * m)), {"C1": slice(0, 0), "C2": slice(0, 0), "C3": slice(0, 0)}
    C = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(r, m * m))
    return C, slices


def repair(G) -> np.ndarray:
    """Lower each edge to its smaller incident face, then each vertex to its smallest incident
    edge (section 6): only decreases values, so C1 and C2 hold and C3 follows."""
    G = np.array(G, dtype=np.float64)
    F, Ev, Eh, V = _parts(G)
    G[0::2, 1::2] = np.minimum(Ev, np.minimum(F[:, :-1], F[:, 1:]))
    G[1::2, 0::2] = np.minimum(Eh, np.minimum(F[:-1], F[1:]))
    _, Ev, Eh, _ = _parts(G)
    G[1::2, 1::2] = np.minimum.reduce([V, Ev[:-1], Ev[1:], Eh[:, :-1], Eh[:, 1:]])
    return G


@functools.lru_cache(maxsize=8)
def _lad_program(m: int, include_c3: bool, norm: str):
    """(A, c) of LinProg for an m x m histogram: the variables are vec(H'') then the deviations
    (one per cell for L1, one for L-inf); rows -H'' - d <= -H', H'' - d <= H', C H'' <= 0. The
    same for every release of that size (cached, its arrays read-only)."""
    import scipy.sparse as sp
    M = m * m
    C, _ = constraint_matrix((m + 1) // 2, include_c3)
    Id = sp.identity(M, format="csr")
    if norm == "l1":
        k = M
        c = np.concatenate([np.zeros(M), np.ones(M)])
        top = sp.hstack([-Id, -Id])
        mid = sp.hstack([Id, -Id])
    elif norm == "linf":
        k = 1
        c = np.concatenate([np.zeros(M), [1.0]])
        ones = sp.csr_matrix(np.ones((M, 1)))
        top = sp.hstack([-Id, -ones])
        mid = sp.hstack([Id, -ones])
    else:
        raise ParameterError(f"norm must be 'l1' or 'linf', got {norm!r}")
    A = sp.vstack([top, mid, sp.hstack([C, sp.csr_matrix((C.shape[0], k))])], format="csr")
    for kept in (A.data, A.indices, A.indptr, c):     # shared by every later call: read-only
        kept.flags.writeable = False
    return A, c


def linprog_lad(Hp, *, include_c3: bool = True, norm: str = "l1", progress=None):
    """LinProg (Algorithm 3): min ||H'' - H'||_1 (or ||.||_inf) s.t. C1-C3 and H'' >= 0.

    One sparse HiGHS solve. The solution is polished within the solver's tolerance (negatives
    to 0, then `repair`), so the released H'' violates nothing; the largest change is in
    info["polish"]. Returns (H'', info).
    """
    from scipy.optimize import linprog
    Hp = np.asarray(Hp, dtype=np.float64)
    m = Hp.shape[0]
    M = m * m
    t0 = time.perf_counter()
    if progress:
        progress("building the linear program", 0.0)
    A, c = _lad_program(m, include_c3, norm)
    h = Hp.ravel()
    b = np.concatenate([-h, h, np.zeros(A.shape[0] - 2 * M)])
    if progress:
        progress("solving (HiGHS)", 0.1)
    res = linprog(c, A_ub=A, b_ub=b, bounds=(0, None), method="highs")
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"LinProg failed: HiGHS status {res.status} ({res.message})")
    raw = res.x[:M].reshape(m, m)
    H2 = repair(np.maximum(raw, 0.0))
    info = {"status": int(res.status), "message": str(res.message), "objective": float(res.fun),
            "seconds": time.perf_counter() - t0, "polish": float(np.abs(H2 - raw).max()),
            "rows": int(A.shape[0]), "variables": int(A.shape[1]), "norm": norm,
            "include_c3": include_c3}
    if progress:
        progress("done", 1.0)
    return H2, info


def round_consistent(H2) -> np.ndarray:
    """Round (Algorithm 4, hardened): clip at 0, snap to 6 decimals, round half up, repair,
    and refuse to return a histogram that violates any constraint."""
    x = np.round(np.maximum(np.asarray(H2, dtype=np.float64), 0.0), 6)
    H3 = repair(np.floor(x + 0.5))
    bad = violations(H3, tol=0.0)
    if any(bad.values()):
        raise RuntimeError(f"Round left constraint violations {bad}")
    return H3
