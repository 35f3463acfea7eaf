"""Mutants of the heatmaps area (see :mod:`mutation`): DP heatmaps (Ghazi et al.'s sparse EMD aggregation and
appendix D), userdp's default auto heatmap, PrivTree and PrivTree-EMD, adaptive grids, Hay et al.'s hierarchy, the
Laplace baseline, the per-user normalization of the grid sum and the release layer.

Their tests read what the release really draws (``tests/heatmaps/spies.py``: a spy on the lattice Laplace
sampler) and compare it with the papers' parameters computed in the test, so a wrong split, sensitivity or
threshold cannot hide behind a ``params`` entry that reports it."""

from __future__ import annotations

from . import Mutant

_HM = "tests/heatmaps/test_heatmaps.py"
_AUTO = "tests/heatmaps/test_auto.py"
_BASE = "tests/heatmaps/test_published_baselines.py"
_REL = "tests/releases/test_heatmap.py"
_PLAN = "tests/plan/test_heatmap.py"
_SH = "tests/heatmaps/test_shuffle.py"
_SH_SHARES = f"{_SH}::test_party_noise_shares_add_up_to_the_discrete_laplace_30_percent_off_rejected"
_SH_LAW = f"{_SH}::test_the_default_protocol_draws_the_exact_law_and_a_30_percent_off_scale_is_rejected"
_SH_AGG = f"{_SH}::test_the_aggregate_simulation_draws_the_same_law"
_SH_MSG = f"{_SH}::test_messages_are_r_shares_per_coordinate_that_sum_to_the_noisy_value"
_SH_COMM = f"{_SH}::test_communication_on_the_papers_setup"
_POLYA = f"{_SH}::test_polya_draws_follow_the_law_and_a_30_percent_off_scale_is_rejected"
_SH_LEMMA = f"{_SH}::test_split_mix_lemma_holds_on_the_exact_law_of_the_view"
_SH_DELTA = f"{_SH}::test_the_plans_shares_meet_the_stated_delta_by_the_lemma"

_SPARSE_LAWS = f"{_HM}::test_sparse_release_draws_every_level_from_the_papers_law_and_keeps_the_noisy_top_w"
_AUTO_LAWS = f"{_AUTO}::test_default_auto_draws_its_count_and_map_from_the_stated_laws"
_PRIVTREE = f"{_BASE}::test_privtree_decisions_and_leaf_counts_follow_the_paper"
_AG_LEVELS = f"{_BASE}::test_adaptive_grid_levels_follow_the_paper_and_read_only_released_counts"
_HIER = f"{_BASE}::test_hierarchy_draws_every_node_with_eps_over_h_and_releases_the_least_squares_tree"

MUTANTS: list[Mutant] = [
    # -- DPSparseEMDAgg (Algorithms 1-2): the per-level budget, sensitivity, selection ---------------------
    Mutant(
        "sparse-level-budgets-not-normalized",
        "budget-split",
        "heatmaps/sparse.py",
        "return q, {i: eps * v / Z for i, v in weights.items()}",
        "return q, {i: eps * v for i, v in weights.items()}",
        (_SPARSE_LAWS,),
        "every measured level spends up to eps (the weights are not divided by Z): the release is about "
        "3.4 eps-DP at L = 6 while claiming eps",
        (2, 3),
    ),
    Mutant(
        "sparse-q-rounded-up",
        "budget-split",
        "heatmaps/sparse.py",
        "q = min(int(math.floor(math.log2(math.sqrt(w)))), L)",
        "q = min(int(math.ceil(math.log2(math.sqrt(w)))), L)",
        (_SPARSE_LAWS,),
        "the first measured level is one too deep (64 cells for w = 20): the paper's level weights and error "
        "bound no longer hold",
        (2,),
    ),
    Mutant(
        "sparse-level-sensitivity-of-the-scaled-row",
        "sensitivity",
        "heatmaps/sparse.py",
        "add_laplace(sums, calibrate_laplace(1.0, budgets[i], dim=4**i), rng)",
        "add_laplace(sums, calibrate_laplace(2.0**-i, budgets[i], dim=4**i), rng)",
        (_SPARSE_LAWS,),
        "level i's noise calibrated for the scaled row's sensitivity 2^-i instead of the cell sums' 1: deep "
        "levels get 2^i times too little noise",
        (3,),
    ),
    Mutant(
        "sparse-top-w-on-true-sums",
        "threshold",
        "heatmaps/sparse.py",
        "keep = np.argpartition(-noisy, w - 1)[:w]",
        "keep = np.argpartition(-sums, w - 1)[:w]",
        (_SPARSE_LAWS,),
        "the w cells kept at each level are chosen on the true sums: which cells are refined reveals the data "
        "without any noise",
        (2,),
    ),
    # -- the Laplace baseline ------------------------------------------------------------------------------
    Mutant(
        "laplace-heatmap-half-sensitivity",
        "sensitivity",
        "heatmaps/baselines.py",
        "noisy = laplace_mechanism(s.reshape(-1), 1.0, epsilon, rng).reshape(s.shape)",
        "noisy = laplace_mechanism(s.reshape(-1), 0.5, epsilon, rng).reshape(s.shape)",
        (f"{_HM}::test_laplace_heatmap_draws_lap_one_over_epsilon_on_every_cell",),
        "half the noise a user's distribution (l1 norm 1) needs: the baseline is 2 eps-DP",
        (3,),
    ),
    Mutant(
        "laplace-heatmap-claims-replace-one-user",
        "conversion",
        "heatmaps/baselines.py",
        """        _normalize(out),
        PureDP(epsilon, neighbours=Neighbours.ADD_REMOVE_USER),
        name,""",
        """        _normalize(out),
        PureDP(epsilon, neighbours=Neighbours.REPLACE_USER),
        name,""",
        (f"{_HM}::test_release_distribution_and_privacy_claim",),
        "the baseline claims eps for replacing a user, which moves the sum by l1 2 and needs twice the noise: "
        "a ledger converting the claim would under-charge",
    ),
    Mutant(
        "dense-coarse-noise-from-a-doubled-epsilon",
        "noise-scale",
        "heatmaps/baselines.py",
        "noisy = laplace_mechanism(coarse.reshape(-1), 1.0, epsilon, rng).reshape(coarse.shape)",
        "noisy = laplace_mechanism(coarse.reshape(-1), 1.0, 2 * epsilon, rng).reshape(coarse.shape)",
        (f"{_HM}::test_dense_release_draws_lap_one_over_epsilon_on_its_default_coarse_grid",),
        "appendix D's coarse counts get half the noise their sensitivity needs: the dense release is 2 eps-DP",
        (3,),
    ),
    # -- the default auto heatmap: its count, its switch, its map ------------------------------------------
    Mutant(
        "auto-count-share-not-deducted",
        "budget-split",
        "heatmaps/auto.py",
        "return eps_total, epsilon - eps_total",
        "return eps_total, epsilon",
        (_AUTO_LAWS,),
        "the noisy count's 5% is not deducted from the map: the default release spends 1.05 eps",
        (3,),
    ),
    Mutant(
        "auto-count-half-sensitivity",
        "sensitivity",
        "heatmaps/baselines.py",
        "return float(laplace_mechanism(np.array([float(np.sum(s))]), 1.0, epsilon_total, rng)[0])",
        "return float(laplace_mechanism(np.array([float(np.sum(s))]), 0.5, epsilon_total, rng)[0])",
        (f"{_AUTO}::test_noisy_count_has_the_stated_scale",),
        "the user count (auto's and adaptive grids') gets half the noise a user of mass 1 needs: its 5% share "
        "is spent twice over",
        (3,),
    ),
    Mutant(
        "auto-grid-at-the-whole-epsilon",
        "budget-split",
        "heatmaps/auto.py",
        "inner = dense_emd_heatmap(s, eps_map, side, rng=src)",
        "inner = dense_emd_heatmap(s, eps, side, rng=src)",
        (_AUTO_LAWS,),
        "the coarse grid is run at the whole epsilon after the count spent 5% of it (a share counted twice)",
        (3,),
    ),
    Mutant(
        "auto-tree-at-the-whole-epsilon",
        "budget-split",
        "heatmaps/auto.py",
        "inner = privtree_emd_heatmap(s, eps_map, rng=src)",
        "inner = privtree_emd_heatmap(s, eps, rng=src)",
        (_AUTO_LAWS,),
        "the tree is run at the whole epsilon after the count spent 5% of it (a share counted twice)",
        (3,),
    ),
    Mutant(
        "auto-switch-on-the-true-count",
        "threshold",
        "heatmaps/auto.py",
        "if switch_f == math.inf or eps_map * max(n_hat, 0.0) < switch_f:",
        "if switch_f == math.inf or eps_map * float(s.sum()) < switch_f:",
        (_AUTO_LAWS,),
        "the branch (grid or tree) is chosen on the true number of users: which map is released reveals "
        "whether the dataset holds more than 40 / eps users, without noise",
        (1, 2),
    ),
    Mutant(
        "auto-coarse-side-from-the-true-count",
        "threshold",
        "heatmaps/auto.py",
        "side = dense_resolution(eps_map, max(1.0, n_hat), 2 ** padded_levels(s.shape))",
        "side = dense_resolution(eps_map, max(1.0, float(s.sum())), 2 ** padded_levels(s.shape))",
        (_AUTO_LAWS,),
        "the coarse grid is sized on the true number of users: its resolution reveals it without noise",
        (1, 2),
    ),
    Mutant(
        "auto-tree-restarts-the-seeded-stream",
        "keyed-purpose",
        "heatmaps/auto.py",
        "inner = privtree_emd_heatmap(s, eps_map, rng=src)",
        "inner = privtree_emd_heatmap(s, eps_map, rng=rng)",
        (f"{_AUTO}::test_the_count_and_the_map_read_distinct_parts_of_a_seeded_stream[100-privtree-emd]",),
        "with an integer seed the tree restarts the stream the count already read: its noise is a function of "
        "the count's, so a seeded audit or experiment measures a different mechanism than the one released",
        (6,),
    ),
    Mutant(
        "auto-grid-restarts-the-seeded-stream",
        "keyed-purpose",
        "heatmaps/auto.py",
        "inner = dense_emd_heatmap(s, eps_map, side, rng=src)",
        "inner = dense_emd_heatmap(s, eps_map, side, rng=rng)",
        (f"{_AUTO}::test_the_count_and_the_map_read_distinct_parts_of_a_seeded_stream[10-dense]",),
        "with an integer seed the coarse grid restarts the stream the count already read: its noise is a "
        "function of the count's (correlated draws where independent ones are assumed)",
        (6,),
    ),
    Mutant(
        "auto-claims-the-map-epsilon",
        "ledger-charge",
        "heatmaps/auto.py",
        """        inner.value,
        PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),""",
        """        inner.value,
        PureDP(eps_map, neighbours=Neighbours.ADD_REMOVE_USER),""",
        (f"{_AUTO}::test_shapes_mass_and_claim",),
        "the default heatmap claims only the map's 95% of epsilon: a ledger charges 5% less than was spent",
    ),
    # -- PrivTree and PrivTree-EMD: lambda, theta, delta, the depth bias, the split ------------------------
    Mutant(
        "privtree-lambda-from-the-whole-epsilon",
        "noise-scale",
        "heatmaps/privtree.py",
        "lam = privtree_lambda(eps_tree, beta_f)",
        "lam = privtree_lambda(eps, beta_f)",
        (_PRIVTREE,),
        "the split decisions' lambda (and delta) for the whole epsilon while they are given eps_tree: the "
        "decomposition spends 2x (PrivTree) or 3.3x (PrivTree-EMD) its share",
        (3,),
    ),
    Mutant(
        "privtree-delta-of-a-binary-tree",
        "threshold",
        "heatmaps/privtree.py",
        "delta = lam * math.log(beta_f)",
        "delta = lam * math.log(2.0)",
        (_PRIVTREE,),
        "the bias delta = lambda ln 2 (a binary tree's) in a quadtree: the path sum behind the proof is no "
        "longer bounded by lambda eps_tree",
        (3,),
    ),
    Mutant(
        "privtree-depth-bias-once",
        "threshold",
        "heatmaps/privtree.py",
        "counts[d][act_r[splittable], act_c[splittable]] - d * delta)",
        "counts[d][act_r[splittable], act_c[splittable]] - delta)",
        (_PRIVTREE,),
        "the bias is subtracted once instead of depth x delta: a user on a deep path changes unboundedly "
        "many split decisions (PrivTree's proof needs the count to drop by delta per level)",
        (2,),
    ),
    Mutant(
        "privtree-threshold-at-the-floor",
        "threshold",
        "heatmaps/privtree.py",
        "split[splittable] = add_laplace(b, tree_cal, src) > theta",
        "split[splittable] = add_laplace(b, tree_cal, src) > theta - delta",
        (_PRIVTREE,),
        "a node splits when its noisy biased count exceeds theta - delta, the floor itself: empty nodes split "
        "half the time and the path sum behind the proof grows past lambda eps_tree",
        (2,),
    ),
    Mutant(
        "privtree-decisions-unit-sensitivity",
        "noise-scale",
        "heatmaps/privtree.py",
        "return calibrate_laplace(lam * epsilon_tree, epsilon_tree, dim=n_cells)",
        "return calibrate_laplace(1.0, epsilon_tree, dim=n_cells)",
        (_PRIVTREE,),
        "the split decisions get Lap(1 / eps_tree), a count's noise, instead of Lap(lambda) (7/3 times more): "
        "the decomposition is not eps_tree-DP",
        (3,),
    ),
    Mutant(
        "privtree-leaf-counts-at-the-whole-epsilon",
        "budget-split",
        "heatmaps/privtree.py",
        "count_cal = calibrate_laplace(1.0, eps_counts, dim=n_cells)",
        "count_cal = calibrate_laplace(1.0, eps, dim=n_cells)",
        (_PRIVTREE,),
        "the leaf counts are noised for the whole epsilon although the tree already spent its share; params "
        "still report eps_counts, so only the draws show it",
        (3,),
    ),
    # -- adaptive grids: the alpha split, the levels' sizes from released counts only ----------------------
    Mutant(
        "adaptive-grid-second-level-gets-the-rest",
        "budget-split",
        "heatmaps/adaptive_grid.py",
        "return eps_total, eps1, rest - eps1",
        "return eps_total, eps1, rest",
        (_AG_LEVELS,),
        "the second level spends the whole grid budget after the first spent alpha of it: 1.5 eps in all",
        (3,),
    ),
    Mutant(
        "adaptive-grid-first-level-at-the-grid-budget",
        "budget-split",
        "heatmaps/adaptive_grid.py",
        "cal1 = calibrate_laplace(1.0, eps1, dim=first.size)",
        "cal1 = calibrate_laplace(1.0, eps_grid, dim=first.size)",
        (_AG_LEVELS,),
        "the first level is noised for the whole grid budget (alpha forgotten): 1.5 eps in all",
        (3,),
    ),
    Mutant(
        "adaptive-grid-second-level-sized-on-true-counts",
        "threshold",
        "heatmaps/adaptive_grid.py",
        "m2 = np.ceil(np.sqrt(np.maximum(v, 0.0) * eps2 / (c / 2)))",
        "m2 = np.ceil(np.sqrt(np.maximum(first, 0.0) * eps2 / (c / 2)))",
        (_AG_LEVELS,),
        "each first-level cell is split by its TRUE count: the released partition reveals the counts without noise",
        (2,),
    ),
    Mutant(
        "adaptive-grid-first-level-sized-on-the-true-count",
        "threshold",
        "heatmaps/adaptive_grid.py",
        "m1 = ag_first_level_size(n_hat, eps_grid, c)",
        "m1 = ag_first_level_size(float(np.sum(s)), eps_grid, c)",
        (f"{_BASE}::test_adaptive_grid_sizes_its_first_level_from_the_noisy_count_only",),
        "the first level is sized on the true number of users: its size reveals it without noise",
        (2,),
    ),
    # -- Hay et al.'s hierarchy: the per-level budget; consistency is post-processing ----------------------
    Mutant(
        "hierarchy-levels-counted-without-the-root",
        "budget-split",
        "heatmaps/hierarchy.py",
        "return epsilon / levels",
        "return epsilon / (levels - 1)",
        (_HIER,),
        "each of the h levels gets eps / (h - 1): the tree spends h / (h - 1) eps",
        (3,),
    ),
    Mutant(
        "hierarchy-consistency-on-the-true-tree",
        "noise-scale",
        "heatmaps/hierarchy.py",
        "leaves = hay_consistency(noisy)[-1][:H, :W]",
        "leaves = hay_consistency(levels)[-1][:H, :W]",
        (_HIER,),
        "the consistency step reads the true tree instead of the noisy one: the map is the exact data, with "
        "the noise drawn and thrown away",
        (2,),
    ),
    # -- the grid sum (per-user normalization) and the release layer ---------------------------------------
    Mutant(
        "grid-rows-unnormalized",
        "contribution-bound",
        "engines/memory.py",
        """        cells, users = cells[inside], users[inside]
    size = np.bincount(users, minlength=ds.n_users)
    return cells, size[users]""",
        """        cells, users = cells[inside], users[inside]
    size = np.bincount(users, minlength=ds.n_users)
    return cells, np.ones_like(users)""",
        (f"{_REL}::test_each_user_is_one_unit_of_mass_and_a_user_with_no_point_inside_adds_nothing",),
        "on the chunked and Spark engines each point weighs 1 instead of 1 / (the user's points): a user with "
        "k points moves the sum by k, and every mechanism's sensitivity 1 is wrong (memory's engine is right: "
        "the test checks each engine against the definition, not against each other)",
        (4,),
    ),
    Mutant(
        "release-refuses-points-outside",
        "refusal",
        "releases/heatmap.py",
        "s = eng.grid_sum(data, grid_box, shape, drop_outside=True)",
        "s = eng.grid_sum(data, grid_box, shape, drop_outside=False)",
        (f"{_REL}::test_points_outside_the_box_are_dropped_by_default_and_the_release_says_so",),
        "a table with a point outside the box is refused: one added person with one such point turns a release "
        "into a refusal, a data-dependent output with unbounded privacy loss",
        (1,),
    ),
    Mutant(
        "plan-synthetic-users-unnormalized",
        "contribution-bound",
        "plan/heatmap.py",
        "s = np.bincount(cells, weights=1.0 / pts[owner], minlength=prob.size)",
        "s = np.bincount(cells, minlength=prob.size).astype(np.float64)",
        (f"{_PLAN}::test_synthetic_users_are_distributions_of_mass_one",),
        "the plan simulates users weighing their number of points: it predicts errors about 37 times too small "
        "on the Foursquare sizes",
    ),
    # -- the shuffle-model protocol (appendix F) ------------------------------------------------------------
    Mutant(
        "shuffle-one-polya-share-per-party",
        "noise-scale",
        "heatmaps/shuffle.py",
        "out[o : o + k] = x - y",
        "out[o : o + k] = x",
        (_SH_SHARES, _SH_LAW),
        "the appendix's literal reading: one Polya(1/n) share per party adds up to a one-sided geometric, never "
        "below the true sum, and the privacy loss is unbounded (about 40 eps on the tiny audit)",
        (2,),
    ),
    Mutant(
        "shuffle-polya-shape-one",
        "noise-scale",
        "heatmaps/shuffle.py",
        "x = polya(1, plan.parties, plan.taus[i], k, src, step=STEP)",
        "x = polya(1, 1, plan.taus[i], k, src, step=STEP)",
        (_SH_SHARES, _SH_LAW),
        "each party's positive share has shape 1 instead of 1/n: the summed noise is no longer the discrete "
        "Laplace (n times the geometric part), and its law is not the one the guarantee was computed for",
        (2,),
    ),
    Mutant(
        "shuffle-ratio-without-scaling",
        "noise-scale",
        "heatmaps/shuffle.py",
        "taus = {i: math.ceil(B * STEP / e) for i, e in budgets.items()}",
        "taus = {i: math.ceil(STEP / e) for i, e in budgets.items()}",
        (_SH_SHARES, _SH_LAW, _SH_MSG),
        "the appendix's Polya(1/n, e^{-eps_i}): the coordinates are scaled by B, so the noise is B times too "
        "small and the protocol is B eps-DP",
        (2,),
    ),
    Mutant(
        "shuffle-rounds-up",
        "sensitivity",
        "heatmaps/shuffle.py",
        "return np.floor(plan.scaling * y).astype(np.int64)",
        "return np.ceil(plan.scaling * y).astype(np.int64)",
        (_SH_LAW,),
        "ceil(B y) sums to more than B on a spread-out user (up to B + the number of cells), so one user moves "
        "a level by more than the sensitivity the noise is calibrated for",
        (2,),
    ),
    Mutant(
        "shuffle-last-share-without-noise",
        "noise-scale",
        "heatmaps/shuffle.py",
        "z = scaled_round(user_pyramid(p, plan), plan) + noise_shares(plan, src)",
        "z = scaled_round(user_pyramid(p, plan), plan)",
        (_SH_LAW,),
        "the appendix's w^r = z^j - w^1 - ... (without the noise): the analyzer recovers the exact sums",
        (2,),
    ),
    Mutant(
        "shuffle-aggregate-one-sided",
        "noise-scale",
        "heatmaps/shuffle.py",
        "noise[o : o + k] = polya(1, 1, t, k, rng, step=STEP) - polya(1, 1, t, k, rng, step=STEP)",
        "noise[o : o + k] = polya(1, 1, t, k, rng, step=STEP)",
        (_SH_AGG,),
        "the aggregate simulation draws one geometric instead of the difference of two: it no longer has the "
        "protocol's law, and the experiments would report a different mechanism",
        (2,),
    ),
    Mutant(
        "shuffle-modulus-without-headroom",
        "threshold",
        "heatmaps/shuffle.py",
        "q = B * n + 2 * h + 1",
        "q = B * n",
        (_SH_MSG, _SH_LAW),
        "the appendix's q = B n: a sum of B n wraps to 0 and an empty cell with negative noise decodes to about "
        "B n, the largest count, which the top-w selection then keeps",
        (2,),
    ),
    Mutant(
        "shuffle-decode-never-negative",
        "threshold",
        "heatmaps/shuffle.py",
        "return np.where(v >= plan.modulus - plan.headroom, v - plan.modulus, v)",
        "return np.where(v >= plan.modulus, v - plan.modulus, v)",
        (_SH_LAW,),
        "negative noisy sums decode to about q: every empty cell with negative noise looks like the densest",
        (2,),
    ),
    Mutant(
        "shuffle-too-few-shares",
        "threshold",
        "heatmaps/shuffle.py",
        "return math.ceil((2 * lse + 2 * math.log(m / delta) + math.log(q)) / math.log(n) + 1)",
        "return math.ceil((2 * lse + math.log(m / delta) + math.log(q)) / math.log(n) + 1)",
        (_SH_MSG, _SH_COMM),
        "fewer shares per coordinate than appendix F's r: the summation's delta is no longer the one stated",
        (2,),
    ),
    Mutant(
        "shuffle-delta-one-coordinate",
        "threshold",
        "heatmaps/shuffle.py",
        "eta = m * math.sqrt(split_mix_chi2_bound(n, r, q)) / 2",
        "eta = math.sqrt(split_mix_chi2_bound(n, r, q)) / 2",
        (_SH_DELTA,),
        "the summation's delta counts one coordinate instead of the m a user sends: the view's distance to the "
        "noisy sums is up to m times the stated delta (m = 102,406 at 320 x 240)",
        (2,),
    ),
    Mutant(
        "shuffle-delta-without-e-eps",
        "threshold",
        "heatmaps/shuffle.py",
        "return min(1.0, (1 + math.exp(min(epsilon, 700.0))) * eta)",
        "return min(1.0, eta)",
        (_SH_DELTA,),
        "delta taken as the view's total variation distance, without the (1 + e^eps) of the DP argument: at "
        "eps = 5 the stated delta is 149 times too small",
        (2,),
    ),
    Mutant(
        "shuffle-lemma-bound-one-closed-set",
        "threshold",
        "heatmaps/shuffle.py",
        "logf[k] = logsumexp(logi[:k] + logh[:k] + logf[k - 1 :: -1][:k]) - math.log(k)",
        "logf[k] = logh[k - 1]",
        (_SH_LEMMA, _SH_DELTA),
        "the lemma's bound keeps only families of one closed set (j = 1), dropping the (q - 1)^j / j! terms: "
        "it no longer bounds chi^2 and r may fall below what the stated delta needs",
        (2,),
    ),
    Mutant(
        "polya-urn-increment",
        "sampler",
        "noise/kernels.py",
        "if _below(words, st, d * (k + 1)) < a + d * x:",
        "if _below(words, st, d * (k + 1)) < a + x:",
        (_POLYA,),
        "the urn grows by 1 instead of d per ball: the draws are not Polya(a/d) and n parties' shares no longer "
        "add up to the discrete Laplace",
        (2,),
    ),
]
