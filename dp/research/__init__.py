"""Research reproductions of the papers' other algorithms, kept with their tests.

Not used by the app and not part of the stable API: names here may change without notice.

- `delta_neighbourhood`: differential privacy under δ-neighbourhood (spec 001, Fang & Chang
  2014): sensitivities and strategies, sorted points, the smooth-sensitivity median and
  sustainable time-series budgets.
"""
