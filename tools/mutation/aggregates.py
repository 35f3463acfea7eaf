"""Mutants of the per-key aggregates (:mod:`userdp.vocabulary.aggregates`, :mod:`userdp.releases.aggregate`):
each sensitivity, noise scale, budget split, clip and contribution bound (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

_RA = "tests/releases/test_aggregate.py::"
_VA = "tests/vocabulary/test_aggregates.py::"
_LOSS = _RA + "test_the_statistics_exact_privacy_loss_is_within_their_shares"
_RANGE = _RA + "test_the_range_choice_exact_privacy_loss_is_within_its_share"
_SCALE = _RA + "test_the_noise_has_the_scale_the_sensitivities_and_the_split_call_for"
_REL = "releases/aggregate.py"
_MECH = "vocabulary/aggregates.py"
_AUDIT = "tests/test_audit.py::test_the_aggregates_audit_passes_every_step_of_the_default_path"
_GRID = _VA + "test_the_resolution_finds_the_grid_the_values_lie_on"

MUTANTS: list[Mutant] = [
    Mutant(
        "agg-records-sensitivity-linf-only",
        "sensitivity",
        _REL,
        'sens = {"N": l0 * linf,',
        'sens = {"N": linf,',
        (_LOSS,),
        "the records per key are calibrated to one key's worth (Linf), but a person adds Linf records to each "
        "of L0 keys: L0 times the stated epsilon",
        (1,),
    ),
    Mutant(
        "agg-users-sensitivity-one",
        "sensitivity",
        _REL,
        '"U": l0,',
        '"U": 1,',
        (_LOSS,),
        "distinct persons per key calibrated as if a person counted on one key only: L0 times the stated epsilon",
    ),
    Mutant(
        "agg-sum-sensitivity-half-width",
        "sensitivity",
        _REL,
        '"S1": l0 * linf * w,',
        '"S1": l0 * linf * w // 2,',
        (_LOSS, _SCALE),
        "the centred sum calibrated to half the distance a value can move it (W half steps): twice the epsilon",
    ),
    Mutant(
        "agg-squares-sensitivity-width",
        "sensitivity",
        _REL,
        '"S2": l0 * linf * w * w}',
        '"S2": l0 * linf * w}',
        (_LOSS,),
        "the sum of squares calibrated to W instead of W^2: the variance leaks W times the stated epsilon",
    ),
    Mutant(
        "agg-noise-double-epsilon",
        "noise-scale",
        _REL,
        "integer_laplace(sums[:, column[q]], sens[q], eps_q, src)",
        "integer_laplace(sums[:, column[q]], sens[q], 2 * eps_q, src)",
        (_LOSS, _SCALE),
        "every noisy quantity draws half the noise its share calls for",
        (2,),
    ),
    Mutant(
        "agg-noise-halved-on-the-lattice",
        "noise-scale",
        _MECH,
        "out[i] = math.ldexp(float(lat + dz), e)",
        "out[i] = math.ldexp(float(lat + dz // 2), e)",
        (_VA + "test_integer_laplace_has_the_stated_scale_and_stays_on_its_lattice", _SCALE),
        "the integer-lattice Laplace adds half the drawn noise: the stated sd is twice the real one",
        (2,),
    ),
    Mutant(
        "agg-split-bounds-not-deducted",
        "budget-split",
        _MECH,
        'rest = base["epsilon_counts"]',
        'rest = base["epsilon_counts"] + base["epsilon_select"]',
        (_LOSS, _SCALE),
        "the statistics and the range spend the bounds' share again: the release spends more than epsilon",
        (1,),
    ),
    Mutant(
        "agg-split-range-share",
        "budget-split",
        _MECH,
        "eps_range = rest * rf if not fixed else 0.0",
        "eps_range = rest * rf / 2 if not fixed else 0.0",
        (_VA + "test_every_refusal_comes_from_the_parameters_alone", _SCALE),
        "the range gets half the share the documentation states (range_fraction of what is left)",
    ),
    Mutant(
        "agg-range-each-end-full-share",
        "budget-split",
        _MECH,
        "e = float(epsilon) / 2",
        "e = float(epsilon)",
        (_RANGE,),
        "each end of the range spends the range's whole share: twice its epsilon",
        (1,),
    ),
    Mutant(
        "agg-range-sensitivity-half",
        "sensitivity",
        _MECH,
        "i = exponential_mechanism(s_lo, float(sensitivity), e, src)",
        "i = exponential_mechanism(s_lo, float(sensitivity) / 2, e, src)",
        (_RANGE,),
        "the low end's exponential mechanism is handed half the sensitivity L0 Linf its scores have",
        (1,),
    ),
    Mutant(
        "agg-range-ranks-unbounded-records",
        "contribution-bound",
        _MECH,
        "    _, _, values = _kept(batch, counted, l0, linf)\n    grid = np.asarray(grid, dtype=np.float64)",
        "    _, _, values = _restricted_rows(batch, counted)\n    grid = np.asarray(grid, dtype=np.float64)",
        (_RANGE, _VA + "test_the_range_scores_move_by_at_most_l0_linf_and_an_unbounded_variant_is_caught"),
        "the range ranks every record of the counted keys, not the L0 Linf each person keeps: one person moves "
        "the counts by more than the sensitivity L0 Linf the mechanism is handed",
        (1,),
    ),
    Mutant(
        "agg-values-unclipped",
        "contribution-bound",
        _MECH,
        "return np.clip(np.floor(x / r + 0.5), klo, khi).astype(np.int64)\n",
        "return np.floor(np.asarray(values, dtype=np.float64) / r + 0.5).astype(np.int64)\n",
        (_LOSS, _VA + "test_the_lattice_keeps_rounded_values_in_the_range"),
        "values are not clipped to the range: one person's outlier moves the sums without bound",
        (1,),
    ),
    Mutant(
        "agg-bound-l0-plus-one",
        "contribution-bound",
        _MECH,
        "kept_groups = np.flatnonzero(rank < int(l0))",
        "kept_groups = np.flatnonzero(rank < int(l0) + 1)",
        (_LOSS, _VA + "test_bounding_keeps_each_person_s_l0_keys_of_most_records_and_spread_order_statistics"),
        "each person keeps one key more than the L0 the noise is calibrated to",
        (1,),
    ),
    Mutant(
        "agg-bound-linf-applied-loosely",
        "contribution-bound",
        _REL,
        "partial(stat_sums_part, counted=counted, l0=l0, linf=linf, lo=lo, hi=hi)",
        "partial(stat_sums_part, counted=counted, l0=l0, linf=linf + 1, lo=lo, hi=hi)",
        (_LOSS,),
        "the sums keep Linf + 1 records per key while the noise is calibrated to Linf",
        (1,),
    ),
    Mutant(
        "agg-users-counts-records",
        "sensitivity",
        _MECH,
        "np.add.at(out[:, 1], code[new], 1)",
        "np.add.at(out[:, 1], code, 1)",
        (_LOSS,),
        "'users' counts a person's records, not the person: up to Linf per key for a sensitivity of 1 per key",
        (1,),
    ),
    Mutant(
        "agg-quantile-epsilon-per-key",
        "budget-split",
        _REL,
        'exponential_mechanism(scores, float(linf), plan["epsilon_quantile"] / l0, src)',
        'exponential_mechanism(scores, float(linf), plan["epsilon_quantile"], src)',
        (_LOSS,),
        "each key's quantile spends the whole share, but a person touches L0 keys: L0 times the epsilon",
        (1,),
    ),
    Mutant(
        "agg-quantile-sensitivity-one",
        "sensitivity",
        _REL,
        'exponential_mechanism(scores, float(linf), plan["epsilon_quantile"] / l0, src)',
        'exponential_mechanism(scores, 1.0, plan["epsilon_quantile"] / l0, src)',
        (_LOSS,),
        "the quantile's rank scores are handed sensitivity 1, but a person holds up to Linf of a key's values",
        (1,),
    ),
    Mutant(
        "agg-lattice-span-unchecked",
        "refusal",
        _MECH,
        "LATTICE_SPAN = 2.0**40",
        "LATTICE_SPAN = 2.0**48",
        (_RA + "test_a_range_whose_lattice_would_not_fit_is_refused_before_the_data_are_read",),
        "a public range far from 0 for its width passes the plan: its lattice coordinates overflow int64 after "
        "the data are read (a traceback after the key selection ran, or wrapped sums past their sensitivity)",
    ),
    Mutant(
        "agg-lattice-width-unchecked",
        "refusal",
        _MECH,
        "LATTICE_MIN_WIDTH = 2.0**-900",
        "LATTICE_MIN_WIDTH = 0.0",
        (_RA + "test_a_range_whose_lattice_would_not_fit_is_refused_before_the_data_are_read",),
        "a public range a few subnormals wide passes the plan: its lattice step underflows to 0 and the release "
        "divides by it after the data are read",
    ),
    Mutant(
        "agg-resolution-sensitivity-half",
        "sensitivity",
        _MECH,
        "i = exponential_mechanism(scores, 1.0, float(epsilon), rng)\n    return int(levels[i])",
        "i = exponential_mechanism(scores, 0.5, float(epsilon), rng)\n    return int(levels[i])",
        (_AUDIT,),
        "the quantiles' grid is drawn as if its rank scores moved by 1/2, but one person moves them by up to "
        "max(q, 1 - q): twice the stated epsilon",
        (1,),
    ),
    Mutant(
        "agg-resolution-counts-per-record",
        "sensitivity",
        _MECH,
        "vp = np.clip(np.minimum.reduceat(v, start), int(levels[0]), top)\n        row[0] = start.size",
        "vp = np.clip(v, int(levels[0]), top)\n        row[0] = vp.size",
        (_VA + "test_the_resolution_counts_move_by_at_most_one_per_person",),
        "the grid's rank counts count records, not persons: a person moves them by up to L0 Linf, and the "
        "sensitivity-1 draw leaks L0 Linf times its epsilon",
        (1,),
    ),
    Mutant(
        "agg-resolution-score-not-tie-aware",
        "sampler",
        _MECH,
        "lt = np.r_[0, le[:-1]]  # v_p < j",
        "lt = le  # v_p < j",
        (_GRID,),
        "the grid's score loses its ties (-|#{v_p <= j} - q n|): on ratings every person sits on the integer grid, "
        "which then scores -(1 - q) n, and a finer grid is chosen: the gaps between ratings come back",
    ),
    Mutant(
        "agg-quantile-grid-every-lattice-point",
        "sampler",
        _MECH,
        "step = 1 << int(resolution_levels(lo, hi)[0] if level is None else level)",
        "step = 1",
        (_GRID, _RA + "test_tied_ratings_get_their_exact_quantiles"),
        "every lattice point a candidate whatever grid was chosen: up to 4,097 per key, most standing for the empty "
        "gaps between tied values, and the medians of ratings land between them",
    ),
    Mutant(
        "agg-quantile-resolution-share-unstated",
        "budget-split",
        _REL,
        'parts["quantile_resolution"] = PureDP(plan["epsilon_resolution"], user)',
        'parts["quantile_resolution_"] = PureDP(0.0, user)',
        (_AUDIT,),
        "the grid's draw is not stated among the release's parts: the guarantee's breakdown (and a ledger reading "
        "it) misses a tenth of the quantiles' spend",
    ),
    Mutant(
        "agg-quantile-level-spends-the-grid-share",
        "budget-split",
        _REL,
        'exponential_mechanism(scores, float(linf), plan["epsilon_quantile"] / l0, src)',
        'exponential_mechanism(scores, float(linf), plan["epsilon_quantity"] / l0, src)',
        (_AUDIT,),
        "each level's per-key draws spend the level's whole share although the grid took a tenth of it: the "
        "quantiles spend 1.11 times their share, the release more than its epsilon",
        (1,),
    ),
]

# The plan (userdp plan aggregate): each noise the plan predicts, checked against the release's measured error.
_PLAN = "plan/aggregate.py"
_PA = "tests/plan/test_aggregate.py::"
_PMEAS = _PA + "test_the_predicted_noise_of_every_statistic_matches_the_measured_error"

MUTANTS += [
    Mutant(
        "agg-plan-count-sensitivity-linf-only",
        "sensitivity",
        _PLAN,
        'sens = {"N": l0 * linf, "U": l0, "S1": l0 * linf * w, "S2": l0 * linf * w * w}',
        'sens = {"N": linf, "U": l0, "S1": l0 * linf * w, "S2": l0 * linf * w * w}',
        (_PMEAS,),
        "the plan predicts the count's noise at one key's sensitivity (Linf), L0 times below what the release adds",
    ),
    Mutant(
        "agg-plan-whole-budget-per-quantity",
        "budget-split",
        _PLAN,
        'eps_q = plan["epsilon_quantity"]',
        'eps_q = plan["epsilon_counts"]',
        (_PMEAS,),
        "the plan predicts every noisy quantity at the statistics' whole share, not its split: noise promised "
        "several times smaller than the release adds",
    ),
    Mutant(
        "agg-plan-laplace-variance-halved",
        "noise-scale",
        _PLAN,
        "return cal.granularity**2 * 2.0 * q / one_minus_q**2",
        "return cal.granularity**2 * q / one_minus_q**2",
        (_PMEAS,),
        "the discrete Laplace's variance without its factor 2: every predicted sd sqrt(2) too small",
    ),
    Mutant(
        "agg-plan-mean-count-term-dropped",
        "noise-scale",
        _PLAN,
        'sd = math.sqrt(half**2 * var["S1"] + (mu - mid) ** 2 * var["N"]) / n',
        'sd = math.sqrt(half**2 * var["S1"]) / n',
        (_PMEAS,),
        "the mean's delta method without the count's noise: a mean away from the range's midpoint gets a "
        "promised error too small",
    ),
    Mutant(
        "agg-plan-sum-midpoint-term-dropped",
        "noise-scale",
        _PLAN,
        'sd = math.sqrt(mid**2 * var["N"] + half**2 * var["S1"])',
        'sd = math.sqrt(half**2 * var["S1"])',
        (_PMEAS,),
        "the normalized sum's noise without mid N~'s: the sum's promised error too small away from 0",
    ),
    Mutant(
        "agg-plan-variance-count-term-dropped",
        "noise-scale",
        _PLAN,
        '(2 * m1**2 - m2) ** 2 * var["N"]',
        '0.0 * var["N"]',
        (_PA + "test_the_delta_method_agrees_with_the_exact_noise_law_through_the_release_s_estimators",),
        "the variance's delta method without the count's noise",
    ),
    Mutant(
        "agg-plan-delta-method-limit",
        "threshold",
        _PLAN,
        "DELTA_METHOD_LIMIT = 0.2",
        "DELTA_METHOD_LIMIT = 2.0",
        (_PA + "test_the_delta_method_is_stated_valid_only_while_the_count_s_noise_is_small",),
        "the plan calls the delta method valid while the count's noise is as large as the count itself",
    ),
    Mutant(
        "agg-range-target-tau-large",
        "threshold",
        _MECH,
        "RANGE_TAU = 0.5  #",
        "RANGE_TAU = 50.0  #",
        (_RA + "test_the_default_grid_needs_no_domain_and_says_how_the_range_was_chosen",),
        "the range's target a hundred times the noise-balancing count of values beyond each end: the range closes "
        "inside the data and clips what the noise would not have cost",
    ),
    Mutant(
        "agg-range-resolution-dropped",
        "threshold",
        _MECH,
        "m = min(max(float(threshold), range_resolution(sensitivity, e, g)), float(row[0]) / 2)",
        "m = min(float(threshold), float(row[0]) / 2)",
        (_RA + "test_tied_values_put_the_range_on_their_grid_points_without_a_domain",),
        "the range's target without the mechanism's resolution: with few keys the target is below what the "
        "exponential mechanism can place, and the ends drift to the base measure",
    ),
    Mutant(
        "agg-mean-count-floor-dropped",
        "noise-scale",
        _MECH,
        "n = np.maximum(noisy[\"N\"], max(1.0, MEAN_COUNT_FLOOR * float(count_sd)))",
        "n = np.maximum(noisy[\"N\"], 1.0)",
        (_RA + "test_the_mean_divides_by_at_least_two_sds_of_the_count_noise",),
        "the mean divides by a count within noise of nothing: small keys' means thrown to an end of the range",
    ),
    Mutant(
        "agg-mean-count-floor-not-passed",
        "noise-scale",
        _REL,
        "est = aggregate_estimates(noisy, lo, hi, sds.get(\"N\", 0.0))",
        "est = aggregate_estimates(noisy, lo, hi)",
        (_RA + "test_the_mean_divides_by_at_least_two_sds_of_the_count_noise",),
        "the release does not hand the count's noise sd to the estimators: no floor",
    ),
    Mutant(
        "agg-count-spends-on-a-range",
        "budget-split",
        _MECH,
        "unused = not fixed and all(n in (\"count\", \"users\") for n, _ in parsed)",
        "unused = False",
        (_RA + "test_count_and_users_choose_no_range_and_spend_nothing_on_one",),
        "count and users spend a quarter of what is left on a value range they never read",
    ),
]
