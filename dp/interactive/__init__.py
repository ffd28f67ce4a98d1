"""Interactive geo-private range queries with per-user budgets and savings reuse (spec 002).

Every point's owner is a user who keeps a location-privacy budget and answers queries locally
(simulated here). A user's location is protected with rho_B-CGP (Gaussian geo-privacy, rho in
1/m^2) w.r.t. distances in metres, up to a small rounding allowance. Each rectangle the analyst
draws is answered on the spot:

    import dp
    data, domain = dp.load_sample("small_city_5k")
    session = dp.interactive.QuerySession(data, domain, sigma_m=100, planned_queries=10,
                                          strategy="gamma", method="pm-dist")
    res = session.ask(dp.Rect(-0.2, 51.45, -0.05, 51.55))
    res.answer, res.saving, res.n_halted           # private answer and public accounting
    res.true_count                                  # owner-only diagnostic

Submodules (spec sections in brackets); every public name is re-exported here:
- `filters` [2.1, 2.5]: `PrivacyFilter`, per-user integer ledgers that halt a user for good on
  overshoot, and the GP/CGP/zCDP conversions (`rho_from_sigma`, `cgp_epsilon_at`, ...).
- `budgeting` [2.6, 3]: the strategies none / even / gamma / linear (`allocate`), round splits
  (`split_weights`, `split_units`), `gaussian_radius` and `snap_allowance_bound`.
- `geometry` [4.1, 4.3, App A-B]: `signed_distance`, `signed_distance_rotated`, `theta_shift`.
- `elimination` [4.2, 4.4]: `LocalUsers` (the users' side), `eliminate` (Alg 4), and the range
  counts `baseline_count` (BM-pt, BM-dist) and `elimination_count` (PM-pt, PM-dist); privacy
  and exact-noise notes.
- `session` [4.5]: `QuerySession`, the multi-query loop with owner-only baseline and reference
  worlds, and `QueryResult`; notes on distances (projections) and randomness.
- `extras` [5, App C]: `kde_estimate`, `knn_query` and the central-mode `threshold_test`.
"""
from .budgeting import (MAX_ROUNDS, SPLITS, STRATEGIES, allocate, gaussian_radius,
                        snap_allowance_bound, split_units, split_weights)
from .elimination import (Elimination, LocalUsers, RangeOutcome, baseline_count, eliminate,
                          elimination_count)
from .extras import COUNT_RHO_FLOOR, kde_estimate, knn_query, threshold_test
from .filters import (UNITS, PrivacyFilter, cgp_epsilon_at, eps_from_rho, gp_to_cgp,
                      rho_from_eps_delta, rho_from_sigma, sigma_from_rho)
from .geometry import (THETA_GRID, THETA_MODES, expected_inside_mass, signed_distance,
                       signed_distance_rotated, theta_paper, theta_shift, theta_uniform_exact)
from .session import METHODS, PROJECTIONS, QueryResult, QuerySession

__all__ = [
    # filters
    "UNITS", "PrivacyFilter", "rho_from_sigma", "sigma_from_rho", "gp_to_cgp", "cgp_epsilon_at",
    "rho_from_eps_delta", "eps_from_rho",
    # budgeting
    "STRATEGIES", "SPLITS", "MAX_ROUNDS", "allocate", "split_weights", "split_units",
    "gaussian_radius", "snap_allowance_bound",
    # geometry
    "THETA_MODES", "THETA_GRID", "signed_distance", "signed_distance_rotated", "theta_paper",
    "expected_inside_mass", "theta_uniform_exact", "theta_shift",
    # elimination
    "LocalUsers", "Elimination", "eliminate", "RangeOutcome", "baseline_count",
    "elimination_count",
    # session
    "METHODS", "PROJECTIONS", "QueryResult", "QuerySession",
    # extras
    "COUNT_RHO_FLOOR", "kde_estimate", "knn_query", "threshold_test",
]
