"""Mutants of the d_EM-DP releases (Imola et al.: PrivEMDLinear, PrivEMDItemWise, BoundedEMDReduction, frequency
estimation and their randomizers) and of the user-level histogram (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

_R = "tests/releases/test_dem.py::"
_H = "tests/releases/test_histogram.py::"
_L = "tests/dem/test_linear.py::"
_I = "tests/dem/test_itemwise_frequency.py::"
_Z = "tests/dem/test_randomizers.py::"

MUTANTS: list[Mutant] = [
    Mutant(
        "duchi-coin-at-twice-epsilon",
        "noise-scale",
        "dem/linear.py",
        "    p = 1.0 / (1.0 + math.exp(-float(epsilon)))",
        "    p = 1.0 / (1.0 + math.exp(-2 * float(epsilon)))",
        (_L + "test_duchi_privatizer_sides_have_the_privacy_ratio_e_eps",),
        "Lemma 6.1's baseline (Duchi et al.'s privatizer) picks the side of its report at 2 eps and claims eps",
    ),
    Mutant(
        "linear-baseline-values-unclipped",
        "contribution-bound",
        "dem/linear.py",
        "    vals = vals * np.minimum(1.0, float(f_bound) / np.maximum(norms, 1e-300))",
        "    vals = vals",
        (_L + "test_baseline",),
        "the user-level baseline adds noise for the public bound f_bound but lets a value beyond it through: "
        "one user moves the release by more than its sensitivity",
    ),
    # ---- points outside the public domain (issue 34): dropped user by user, never used unchecked --------------
    Mutant(
        "dem-linear-outside-points-kept",
        "contribution-bound",
        "releases/dem.py",
        "            x = np.where(keep[:, None], x, np.nan)  # (inside points only: values of NaN are dropped)\n",
        "",
        ("tests/releases/test_linear_outside.py::test_outside_points_dropped_user_by_user",
         "tests/releases/test_linear_outside.py::test_per_user_means_skip_outside_points"),
        "PrivEMDLinear's local release uses points outside the public box unchecked: their distances exceed the "
        "query's Lipschitz bound over the domain, so a user's noisy mean can move by more than the noise covers",
    ),
    Mutant(
        "dem-linear-outside-refused-again",
        "refusal",
        "releases/dem.py",
        "    drops = isinstance(query, PointQuery) and mdl is Model.LOCAL and req.samples is None\n",
        "    drops = False\n",
        ("tests/releases/test_linear_outside.py::test_outside_points_dropped_user_by_user",),
        "a table holding one point outside the box is refused: whether the local PrivEMDLinear releases depends "
        "on the data",
    ),
    # ---- PrivEMDLinear (Algorithm 1, Lemma 4.2) and its baselines -------------------------------------------
    Mutant(
        "dem-linear-central-half-sensitivity",
        "sensitivity",
        "dem/linear.py",
        "sens = ell / n",
        "sens = ell / (2 * n)",
        (_R + "test_linear_central_release_is_knorm_noise_for_l_over_n",),
        "the central PrivEMDLinear adds noise for sensitivity l / (2n): half the noise Theorem 4.1 needs, so the "
        "release is (2 alpha d_EM)-DP while it states alpha",
        (1, 3),
    ),
    Mutant(
        "dem-linear-local-scaled-as-central",
        "sensitivity",
        "dem/linear.py",
        "sens = ell\n        target = per_user\n",
        "sens = ell / n\n        target = per_user\n",
        (_R + "test_linear_local_release_is_knorm_noise_for_l",),
        "every user's local release gets the central model's noise l / (n alpha): n times too little, a user's "
        "own noisy mean reveals their data",
        (1, 3),
    ),
    Mutant(
        "dem-linear-gaussian-curve-at-full-alpha",
        "conversion",
        "dem/linear.py",
        "return a * dist, min(float(delta), gcal.delta_at(sens * dist, a * dist))",
        "return a * dist, min(float(delta), gcal.delta_at(sens * dist, a))",
        (_R + "test_linear_gaussian_release_claims_what_its_sigma_gives_at_every_distance",),
        "the Gaussian variant's per-distance claim evaluates delta(d) at epsilon = alpha instead of alpha d: at "
        "small distances it states a delta orders of magnitude below the mechanism's true one",
        (3,),
    ),
    Mutant(
        "dem-linear-gaussian-per-coordinate-sensitivity",
        "noise-scale",
        "dem/linear.py",
        "gcal = calibrate_gaussian_metric(sens, a, delta, dim=d)",
        "gcal = calibrate_gaussian_metric(sens / math.sqrt(d), a, delta, dim=d)",
        (_L + "test_gaussian_variant_curve_is_the_release_s",),
        "the Gaussian variant calibrates each coordinate for l / sqrt(dim), as if the l2 sensitivity were split "
        "over the coordinates: sigma sqrt(dim) times too small for a query of dim > 1",
        (2, 3),
    ),
    Mutant(
        "dem-linear-central-skips-equal-sizes",
        "refusal",
        "releases/dem.py",
        "if mdl is Model.CENTRAL or req.samples is not None:",
        "if req.samples is not None:",
        (_R + "test_linear_central_refuses_unequal_sizes_before_any_noise",),
        "the central PrivEMDLinear is released on users of different sizes with the bounded sensitivity l / n, "
        "which holds only when every user holds the same public number of items",
        (1,),
    ),
    Mutant(
        "dem-linear-baseline-central-add-remove-sensitivity",
        "sensitivity",
        "dem/linear.py",
        "sens = 2 * f_bound / n",
        "sens = f_bound / n",
        (_L + "test_baseline_noise_scale",),
        "the central user-level baseline uses the add/remove sensitivity f_bound / n under replace-one-user "
        "neighbours: half the noise, (2 epsilon)-DP stated as epsilon",
        (3,),
    ),
    # ---- PrivEMDItemWise (Algorithm 2) and frequency estimation (Algorithm 4) ----------------------------
    Mutant(
        "dem-itemwise-local-amplified-by-users",
        "conversion",
        "dem/itemwise.py",
        "None if mdl is Model.LOCAL else n, numerical",
        "n, numerical",
        (_I + "test_itemwise_local_many_users_is_not_amplified",),
        "a local PrivEMDItemWise release claims the shuffle model's amplification (Theorem 4.4 with n users), "
        "though each user's randomized multiset is released on its own",
        (2, 3),
    ),
    Mutant(
        "dem-release-local-amplified-by-users",
        "conversion",
        "releases/dem.py",
        "n = sizes.users if mdl is Model.CENTRAL else None",
        "n = sizes.users",
        (_R + "test_itemwise_release_meets_its_guarantee_exactly",),
        "releases.itemwise / frequency in the local model calibrate alpha_0 and state the guarantee as if the "
        "items were shuffled among all users: alpha_0 about 3x larger than the local model allows",
        (1, 2, 3),
    ),
    Mutant(
        "dem-release-itemwise-m-minus-one",
        "contribution-bound",
        "releases/dem.py",
        "itemwise_guarantee(a0, m, req.inner_delta",
        "itemwise_guarantee(a0, m - 1, req.inner_delta",
        (_R + "test_itemwise_release_meets_its_guarantee_exactly",),
        "the guarantee of releases.itemwise / frequency is counted for m - 1 items per user while every user "
        "releases m: the stated alpha misses one item's alpha_0",
        (2, 3),
    ),
    Mutant(
        "dem-central-laplace-frequency-add-remove",
        "sensitivity",
        "dem/frequency.py",
        "return user_histogram(ds, epsilon, neighbours=Neighbours.REPLACE_USER, rng=rng)",
        "return user_histogram(ds, epsilon, neighbours=Neighbours.ADD_REMOVE_USER, rng=rng)",
        (_I + "test_central_laplace_frequency_noise_scale",),
        "the central Laplace baseline (replace one user) uses the paper's add/remove sensitivity 1/n: half the "
        "noise, (2 epsilon)-DP under replacement",
        (3,),
    ),
    # ---- BoundedEMDReduction (Algorithm 3, Theorem 5.3) and the request/delivery check ---------------------
    Mutant(
        "dem-request-inner-alpha-forgets-r",
        "conversion",
        "releases/request.py",
        "inner_alpha = reduction_alpha(a * r, r, s, projection_delta)",
        "inner_alpha = reduction_alpha(a, r, s, projection_delta)",
        (_R + "test_samples_plan_the_inner_release_from_lemma_5_2",),
        "with samples, the inner release is planned for alpha = A / c instead of A r / c: 1/r times the budget "
        "of the requested (A r, D, r)-discrete guarantee (the release then refuses itself)",
    ),
    Mutant(
        "dem-request-inner-delta-all-of-d",
        "budget-split",
        "releases/request.py",
        "inner_delta = d if c >= 1 else d - projection_delta",
        "inner_delta = d",
        (_R + "test_samples_plan_the_inner_release_from_lemma_5_2",),
        "with samples, the projection's D/2 (Lemma 5.2) is counted twice: the inner release gets all of D, so "
        "the total is D/2 + D, above the requested D",
    ),
    Mutant(
        "dem-deliver-compares-epsilon-with-alpha",
        "refusal",
        "releases/request.py",
        "realized, asked = g.epsilon, req.epsilon",
        "realized, asked = g.epsilon, req.alpha",
        (_R + "test_samples_refuse_an_inner_release_weaker_than_planned",),
        "the delivered-vs-requested check compares the discrete epsilon with alpha instead of alpha r: an inner "
        "release up to 1/r times weaker than planned is released without allow_weaker",
    ),
    Mutant(
        "dem-deliver-allows-the-papers-two-delta",
        "refusal",
        "releases/request.py",
        "if g.delta > req.delta:",
        "if g.delta > 2 * req.delta:",
        (_R + "test_samples_refuse_an_inner_release_weaker_than_planned",),
        "a delivered delta up to twice the requested one (Theorem 5.3's 2 delta) is released as if it met the request",
    ),
    Mutant(
        "dem-reduction-run-ignores-inner-delta",
        "refusal",
        "dem/itemwise.py",
        "weaker = g.alpha > self.required_alpha * (1 + REQUEST_RTOL) or g.delta > self.delta",
        "weaker = g.alpha > self.required_alpha * (1 + REQUEST_RTOL)",
        (_I + "test_bounded_emd_reduction_refuses_an_inner_delta_above_its_own",),
        "BoundedEMDReduction.run accepts an inner mechanism whose delta' exceeds the reduction's delta, without "
        "allow_weaker: a guarantee with a delta above the one asked for",
    ),
    Mutant(
        "dem-release-samples-one-short",
        "contribution-bound",
        "releases/dem.py",
        "data = eng.sample_keyed(data, req.samples, streams)",
        "data = eng.sample_keyed(data, req.samples - 1, streams)",
        (_R + "test_samples_deliver_an_exactly_audited_discrete_guarantee",),
        "the projection draws S - 1 samples while the guarantee is computed with Lemma 5.2's distance for S: "
        "the stated epsilon is too small",
        (3,),
    ),
    Mutant(
        "dem-reduction-project-one-short",
        "contribution-bound",
        "dem/itemwise.py",
        "return ds.sample(self.s, replace=True, rng=rng)",
        "return ds.sample(self.s - 1, replace=True, rng=rng)",
        (_I + "test_bounded_emd_reduction",),
        "BoundedEMDReduction.project gives every user s - 1 samples, not the s its guarantee is computed for",
    ),
    # ---- the keyed per-user streams these releases read ---------------------------------------------------
    Mutant(
        "dem-randomize-purpose-is-the-sampling-one",
        "keyed-purpose",
        "noise/keyed.py",
        'RANDOMIZE_PURPOSE = "local-model item randomization"',
        "RANDOMIZE_PURPOSE = SAMPLE_PURPOSE",
        (_R + "test_sampling_and_randomization_read_distinct_keyed_streams",),
        "a user's randomization reads the same keyed stream as their sampling: which items are kept and how they "
        "are randomized are tied, and the randomizer's noise is no longer independent of the data it hides",
        (6,),
    ),
    Mutant(
        "dem-memory-randomizes-on-the-sampling-stream",
        "keyed-purpose",
        "engines/memory.py",
        "batch = streams.batch(ds.user_ids, RANDOMIZE_PURPOSE)",
        "batch = streams.batch(ds.user_ids, SAMPLE_PURPOSE)",
        (_R + "test_sampling_and_randomization_read_distinct_keyed_streams",),
        "the in-memory engine randomizes every user's items with the user's sampling stream (the words that chose "
        "the samples choose the noise)",
        (6,),
    ),
    # ---- the item randomizers' exact laws -------------------------------------------------------------------
    Mutant(
        "dem-gkrr-kernel-skips-the-wrong-item",
        "sampler",
        "dem/randomizers.py",
        "            if j >= c:\n",
        "            if j > c:\n",
        (_Z + "test_gkrr_sampler_draws_the_papers_law",),
        "GKRR's sampler outputs the true item in place of one of its cluster's other items and never that item: "
        "an output impossible from one input only (infinite privacy loss), while the reported table is right",
        (2,),
    ),
    Mutant(
        "dem-gkrr-cluster-band-one-too-wide",
        "sampler",
        "dem/randomizers.py",
        "band_in = Ws + (t - 1) * Wi",
        "band_in = Ws + t * Wi",
        (_Z + "test_gkrr_sampler_draws_the_papers_law",),
        "GKRR's sampler gives the same-cluster band one extra slot, which lands on the next cluster's first item "
        "with the same-cluster weight: a law that is not the table the guarantee is computed from",
        (2,),
    ),
    Mutant(
        "dem-exponential-cumulative-weights-wrong-axis",
        "sampler",
        "dem/randomizers.py",
        "return W, np.cumsum(W, axis=1)",
        "return W, np.cumsum(W, axis=0)",
        (_Z + "test_exponential_sampler_draws_its_table_within_alpha0",),
        "the exponential randomizer samples from running sums down the columns: its law is not the audited "
        "table, so the realized alpha_0 it states says nothing of what it draws",
        (2,),
    ),
    Mutant(
        "dem-exponential-realized-alpha0-halved",
        "noise-scale",
        "dem/randomizers.py",
        "ratio = np.where(d > 0, loss / np.where(d > 0, d, 1), 0.0)",
        "ratio = np.where(d > 0, loss / np.where(d > 0, 2 * d, 1), 0.0)",
        (_Z + "test_exponential_sampler_draws_its_table_within_alpha0",),
        "the exponential randomizer's privacy loss is divided by 2 d (the kernel's 1/2 applied twice): its rate is "
        "tuned up until the table is 2 alpha_0-d_X-DP while it states alpha_0",
    ),
    Mutant(
        "dem-knorm-randomizer-radius-for-diameter",
        "noise-scale",
        "dem/randomizers.py",
        "calibrate_knorm(space.scale, self.alpha0",
        "calibrate_knorm(space.scale / 2, self.alpha0",
        (_Z + "test_knorm_randomizer_scale",),
        "the K-norm and planar Laplace randomizers calibrate for the radius instead of the diameter: half the "
        "noise, (2 alpha_0)-d_X-DP stated as alpha_0",
    ),
    # ---- the user-level histogram ---------------------------------------------------------------------------
    Mutant(
        "dem-histogram-replace-sensitivity-one",
        "sensitivity",
        "dem/frequency.py",
        "sens = 1.0 if nb is Neighbours.ADD_REMOVE_USER else 2.0",
        "sens = 1.0",
        (_H + "test_histogram_is_laplace_noise_on_the_normalized_sum",),
        "the histogram under replace-one-user neighbours is calibrated for sensitivity 1 (add/remove): half the "
        "noise, (2 epsilon)-DP stated as epsilon",
        (1, 3),
    ),
    Mutant(
        "dem-histogram-counts-records",
        "contribution-bound",
        "releases/histogram.py",
        "normalize=True)",
        "normalize=False)",
        (_H + "test_histogram_is_laplace_noise_on_the_normalized_sum",),
        "the histogram release sums records instead of every user's normalized histogram: a user holding 200 "
        "records moves the sum by 200, against noise calibrated for 1",
        (1,),
    ),
]
