"""HTF: the Homogeneous Tree Framework (Shaham, Ghinita, Ahuja, Krumm, Shahabi, SIGSpatial 2021).

Spec 003. Points are binned into a fixed, public base grid F (row 0 = south, column 0 = west).
A binary tree is grown top-down over F. Split axes alternate with the node's height. Each split
position is the one whose two children are most homogeneous (least summed absolute deviation
from each child's mean, Eq. O). It is picked privately by a short noisy search (Algorithm 1: at
most 2T+1 noisy objective values, sensitivity 2). The tree height comes from a noisy dataset
size (H1-H4). Counts are spent top-down on a geometric schedule (Eq. G). A node whose noisy
count is small, or whose region is tiny, becomes a leaf and gets a fresh count with the rest of
its path's budget (Algorithm 3). Only the leaves are released.

Modules: plan (height rule, budget split, the checks before any draw, the ledger entries), split
(the objective and the split search), growth (the draws: noisy size, counts and pruning, splits;
`build`) and release (the release and the MechanismSpec).

Implementation notes (see the spec for the [P]/[P-fix]/[REC] tags):
- Noise is exact and integer wherever the data are integer: the dataset size and every node
  count get discrete Laplace noise (sensitivity 1). The real-valued objective values get the
  discretised Laplace mechanism (rounded to a public grid, then integer noise in grid units), so
  no low bit of any released or compared value depends on the data. The split search only
  compares those noisy values, so it is post-processing.
- The exact dataset size is never public: it is spent on (eps_height) and only its noisy value
  sets the height. Every feasibility check runs on public inputs before the first draw; after
  it nothing can fail. In paper mode the height is capped at the largest height the budget
  affords (computed from public values), instead of refusing once the size was spent on.
- Each ledger entry is charged where its noise is drawn, just before the first draw it pays
  for: the size before its draw, a height's counts before that height's first count draw (or
  before an earlier draw of a node that stops above it, which spends the heights below), a
  split level before its first noisy objective value. Levels no node reaches are charged after
  the tree is grown: the amounts are fixed, as a refund would depend on the data.
- The corrected Algorithm 1 (spec 3.3) is used: offsets fixed, each candidate gets one noisy
  value per call (memoised), and the winner's noisy value is carried forward, never redrawn.
- The tree is built lazily and level by level (spec 3.8). Only nodes that Algorithm 3 does not
  prune are split, so this is equivalent in distribution to running Algorithm 2 on the full
  tree followed by Algorithm 3. All nodes of one level are processed together with numpy: the
  count draws, the pruning rule and every step of the split search are vectorised over nodes,
  and objective values come from the non-zero cells of the active nodes (for counts c >= 0,
  sum |c - mu| = 2 * sum over c > mu of (c - mu), so empty cells never need to be visited).
- Budgets are indexed by height (root = h, partition leaves = 0). Every node at height i has
  already spent sum_{j >= i} E[j] on its path, so the path-local accumulator of Algorithm 3 is a
  function of the height alone. A pruned node's fresh draw uses sum_{j < i} E[j], so each
  leaf's path spends exactly eps_data.
- Two budget modes. "paper": eps_height = 1e-4, a fixed partition budget per level and the rest
  for counts (Sec. 5). "share" (default): the MechanismSpec split (height, partition, counts)
  scales every part with epsilon. With eps_height = 1e-4 the noisy size is off by about +-10^4
  points, so for uploads much smaller than 10^5 points the paper mode picks a meaningless height
  (spec 4, last paragraph). Share mode therefore is the default.
- Two split rules (share mode; paper mode always searches). "search" is the paper's
  Algorithm 1. "midpoint" (default) cuts every node at the middle of its axis (Algorithm 2's
  axis rule kept): it reads no data, so it spends nothing on the partition and the partition
  share goes to the counts. Why: the search is noise-dominated. At the root of the 200k-point
  sample city (1024 grid) the exact objective spans ~9,300 over all split positions (less over
  the few the search compares) while one noisy value has sd ~13,200 at ε 0.1 (1,850 at ε 1),
  and the signal shrinks with the node, so below ~1e5-1e6 points per node the cut is close to
  random and often leaves a child a quarter of the side or less. On the DPBench matrices
  midpoint had 1.7-5.5x lower error at ε 0.1 and 1 (docs/mechanisms.md, "HTF split rule").
  Even the exact (non-private) homogeneity cut at the top levels only did not beat midpoint
  there, so a rule that searches only where the noisy count says the signal exceeds the noise
  was measured and not kept: it still pays the partition budget and was worse than midpoint in
  every case.
  `root_split_snr` gives the owner the root's signal-to-noise ratio (non-private diagnostic).
- Randomness: one numpy Generator per release, passed in; nothing here seeds a generator.
"""
from .growth import HTFTree, build, count_step
from .plan import (DEFAULT_SPLIT, DEFAULT_SPLIT_RULE, PAPER_EPS_HEIGHT, SPLIT_RULES,
                   affordable_height, estimate_height, grid_h_max, height_budget, plan_budget,
                   resolve_split_rule)
from .release import HTF, SPECS, HTFRelease, infer_leaves, release_htf
from .split import (OBJECTIVE_SENSITIVITY, ROOT_PROFILE_WORK, SPLIT_GRID, _noisy_objectives,
                    baseline_split, get_split_point, objective, objective_profile, objectives,
                    root_split_snr, split_noise_scale)

__all__ = ["DEFAULT_SPLIT", "DEFAULT_SPLIT_RULE", "HTF", "HTFRelease", "HTFTree",
           "OBJECTIVE_SENSITIVITY", "PAPER_EPS_HEIGHT", "ROOT_PROFILE_WORK", "SPECS", "SPLIT_GRID",
           "SPLIT_RULES", "_noisy_objectives", "affordable_height", "baseline_split", "build",
           "count_step", "estimate_height", "get_split_point", "grid_h_max", "height_budget", "infer_leaves",
           "objective", "objective_profile", "objectives", "plan_budget", "release_htf",
           "resolve_split_rule", "root_split_snr", "split_noise_scale"]
