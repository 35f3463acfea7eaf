"""Mutants of the distinct count (Knop & Steinke), private vocabularies and per-key counts (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

_RD = "tests/releases/test_distinct.py::"
_RV = "tests/releases/test_vocabulary.py::"
_RC = "tests/releases/test_counts.py::"
_RS = "tests/vocabulary/test_sips.py::"
_RB = "tests/vocabulary/test_union_bound.py::"
_PV = "tests/plan/test_vocabulary_algorithms.py::"

MUTANTS: list[Mutant] = [
    # --- per-key counts (the review's survivors first) ---------------------------------------------------------
    Mutant(
        "counts-auto-noise-with-selection-share",
        "budget-split",
        "vocabulary/counts.py",
        "counts = laplace_mechanism(true, float(l0 * linf), eps_c, src)",
        'counts = laplace_mechanism(true, float(l0 * linf), eps_c + plan["epsilon_select"], src)',
        (_RC + "test_counts_with_auto_bounds_have_the_noise_of_the_chosen_bounds",),
        "per-key counts with bounds='auto' draw noise as if GEM's share of epsilon were the counts' too: "
        "the noise is 0.8x the stated sd and the release spends more than epsilon",
        (1,),
    ),
    Mutant(
        "counts-select-keys-before-bounding",
        "contribution-bound",
        "vocabulary/counts.py",
        "lab, sums = item_sums(cap, partial(keyed_keep, streams, cap=cap), weights)",
        "lab, sums = item_sums(1 << 30, partial(keyed_keep, streams, cap=cap), weights)",
        (_RC + "test_the_key_selection_sees_each_person_s_kept_keys_only",),
        "the keys are selected from every key a person holds, not from their max_keys kept keys: one person "
        "holding 10^6 keys gets one of them released",
        (1,),
    ),
    Mutant(
        "counts-laplace-sensitivity-linf-only",
        "sensitivity",
        "vocabulary/counts.py",
        "counts = laplace_mechanism(true, float(l0 * linf), eps_c, src)",
        "counts = laplace_mechanism(true, float(linf), eps_c, src)",
        (_RC + "test_counts_with_auto_bounds_have_the_noise_of_the_chosen_bounds",),
        "the Laplace counts are calibrated for one key's Linf records, not for a person's L0 keys of Linf "
        "records each: L0 times too little noise",
        (1,),
    ),
    Mutant(
        "counts-gaussian-sensitivity-without-sqrt-l0",
        "sensitivity",
        "vocabulary/counts.py",
        "counts = gaussian_mechanism(true, math.sqrt(l0) * linf, eps_c, delta_c, src)",
        "counts = gaussian_mechanism(true, float(linf), eps_c, delta_c, src)",
        (_RC + "test_gaussian_counts_of_selected_keys_with_auto_bounds_have_the_stated_noise",),
        "the Gaussian counts use l2 sensitivity Linf, forgetting sqrt(L0): a person moving L0 counts gets "
        "sqrt(L0) times too little noise",
        (1,),
    ),
    Mutant(
        "counts-gem-sensitivity-linf-only",
        "sensitivity",
        "vocabulary/counts.py",
        "sens = np.array([float(a * b) for a, b in grid])",
        "sens = np.array([float(b) for a, b in grid])",
        (_RC + "test_the_release_draws_the_bounds_with_gem_s_law_exactly",),
        "GEM's candidates (L0, Linf) get sensitivity Linf instead of L0 Linf: the choice of bounds is not "
        "epsilon_select-DP (its normalized scores move by more than 1)",
        (2,),
    ),
    Mutant(
        "counts-key-selection-whole-epsilon",
        "budget-split",
        "vocabulary/counts.py",
        'key_plan = plan_vocabulary(eps_keys, delta_keys, max_keys, "gaussian", False, 0.0)',
        'key_plan = plan_vocabulary(eps, delta_keys, max_keys, "gaussian", False, 0.0)',
        (_RC + "test_the_samplers_get_the_three_way_split",),
        "the key selection is calibrated with the whole epsilon while GEM and the counts spend the rest: "
        "epsilon_keys spent twice (the params still say key_fraction of it)",
        (3,),
    ),
    Mutant(
        "counts-delta-counts-whole-delta",
        "budget-split",
        "vocabulary/counts.py",
        'delta_counts = dlt - delta_keys if noise == "gaussian" else 0.0',
        'delta_counts = dlt if noise == "gaussian" else 0.0',
        (_RC + "test_the_samplers_get_the_three_way_split",),
        "Gaussian counts of selected keys get the whole delta while the key selection keeps its half: 1.5 delta spent",
        (3,),
    ),
    # --- per-key counts: max_keys="auto", chosen privately (issue 35) ----------------------------------------------
    Mutant(
        "counts-auto-max-keys-choice-at-the-whole-epsilon",
        "budget-split",
        "vocabulary/counts.py",
        'choice = choose_max_items_with(record_sums, plan["epsilon_keys"], src, noise="gaussian")',
        'choice = choose_max_items_with(record_sums, plan["epsilon"], src, noise="gaussian")',
        (_RC + "test_the_default_max_keys_is_chosen_privately_and_charged",),
        "max_keys is drawn at 2% of the release's whole epsilon while 2% of the selection's share is charged: "
        "the choice spends more than the release states",
        (1,),
    ),
    Mutant(
        "counts-auto-max-keys-choice-not-charged",
        "budget-split",
        "vocabulary/counts.py",
        'key_plan = plan_vocabulary(plan["epsilon_keys"], plan["delta_keys"], choice, "gaussian", False, 0.0)',
        'key_plan = plan_vocabulary(plan["epsilon_keys"], plan["delta_keys"], choice.value, "gaussian", False, 0.0)',
        (_RC + "test_the_default_max_keys_is_chosen_privately_and_charged",),
        "the key selection is re-planned with the chosen max_keys as a plain number: the set union runs at the "
        "whole selection share although the choice spent 2% of it (epsilon_keys + 2% spent)",
        (1,),
    ),
    Mutant(
        "counts-auto-max-keys-set-at-the-whole-epsilon",
        "budget-split",
        "vocabulary/counts.py",
        'key_plan = plan_vocabulary(plan["epsilon_keys"], plan["delta_keys"], choice, "gaussian", False, 0.0)',
        'key_plan = plan_vocabulary(plan["epsilon"], plan["delta_keys"], choice, "gaussian", False, 0.0)',
        (_RC + "test_the_default_max_keys_is_chosen_privately_and_charged",),
        "after the choice the key selection is calibrated with the release's whole epsilon: epsilon_keys spent "
        "twice",
        (1,),
    ),
    Mutant(
        "counts-auto-max-keys-share-unstated",
        "budget-split",
        "vocabulary/counts.py",
        'max_keys, eps_max_keys = int(cal.max_items), float(key_plan["epsilon_bound"])',
        "max_keys, eps_max_keys = int(cal.max_items), 0.0",
        (_RC + "test_the_default_max_keys_is_chosen_privately_and_charged",),
        "the release spends the choice's share but its params and composed_of leave it out: the parts stated "
        "add up to less than what was spent",
        (3,),
    ),
    Mutant(
        "counts-auto-max-keys-bounds-by-twice-the-choice",
        "contribution-bound",
        "vocabulary/counts.py",
        "cap = int(cal.max_items)",
        "cap = 2 * int(cal.max_items)",
        (
            _RC + "test_the_key_selection_sees_each_person_s_kept_keys_only",
            _RC + "test_the_default_max_keys_is_chosen_privately_and_charged",
        ),
        "persons keep twice the keys the selection's threshold was calibrated for: a person's new keys pass "
        "more often than delta allows",
        (1,),
    ),
    Mutant(
        "counts-default-max-keys-fixed",
        "contribution-bound",
        "releases/counts.py",
        'max_keys: int | str = "auto",',
        "max_keys: int | str = 100,",
        (_RC + "test_the_default_max_keys_is_chosen_privately_and_charged",),
        "the release's default goes back to a fixed 100 keys per person, whatever the data hold",
        (1,),
    ),
    Mutant(
        "counts-bad-max-keys-with-public-keys-accepted",
        "refusal",
        "vocabulary/counts.py",
        "and 1 <= max_keys <= 10_000)):",
        "and 0 <= max_keys)) and False:",
        (_RC + "test_bad_max_keys_are_refused_before_the_data_are_read",),
        "a bad max_keys with public keys is silently accepted: the same call refused without keys is released "
        "with them",
    ),
    # --- userdp plan vocabulary --algorithm weighted|policy|sips (issue 35) ----------------------------------------
    Mutant(
        "plan-sips-single-round-threshold",
        "threshold",
        "plan/counts.py",
        "return SelectionModel(pl, tuple(cal.rounds), None,",
        'return SelectionModel(pl, (__import__("userdp.vocabulary", fromlist=["x"]).calibrate_union(pl["epsilon_set"], '
        'pl["delta_set"], pl["max_items"]),), None,',
        (_PV + "test_sips_plan_matches_the_release_rate_of_dp_sips",),
        "the DP-SIPS plan uses the one-round union's threshold and noise at the set's share: it promises items "
        "of 27 persons at 0.75 that DP-SIPS releases at 0.47",
        (2,),
    ),
    Mutant(
        "plan-sips-last-round-only",
        "threshold",
        "plan/counts.py",
        "missed *= 1.0 - _release_probability(cal, h)",
        "missed = 1.0 - _release_probability(cal, h)",
        (_PV + "test_sips_plan_matches_the_release_rate_of_dp_sips",),
        "the DP-SIPS plan counts the last round's chance only: with equal rounds it predicts 0.2 where the "
        "release gives 0.5",
        (2,),
    ),
    Mutant(
        "plan-sips-schedule-ignored",
        "budget-split",
        "plan/counts.py",
        "pl = plan_sips_vocabulary(epsilon, delta, max_items, noise, count_fraction, **sched)",
        "pl = plan_sips_vocabulary(epsilon, delta, max_items, noise, count_fraction)",
        (
            _PV + "test_sips_plan_matches_the_release_rate_of_dp_sips",
            _PV + "test_each_algorithm_plans_from_its_own_calibration",
        ),
        "the DP-SIPS plan ignores --rounds and --ratio: it plans the default schedule's budget split",
        (2,),
    ),
    Mutant(
        "plan-policy-without-its-cutoff",
        "threshold",
        "plan/counts.py",
        "return SelectionModel(pl, (cal,), int(cal.cutoff),",
        "return SelectionModel(pl, (cal,), None,",
        (_PV + "test_policy_plan_matches_the_release_rate_and_its_cutoff",),
        "the policy plan lets an item's weight grow past the cutoff: it promises release with probability 1 "
        "to items the policy releases at 0.975",
        (2,),
    ),
    Mutant(
        "plan-policy-weighted-calibration",
        "threshold",
        "plan/counts.py",
        "pl = plan_vocabulary(epsilon, delta, max_items, noise, True, count_fraction)",
        "pl = plan_vocabulary(epsilon, delta, max_items, noise, False, count_fraction)",
        (_PV + "test_policy_plan_matches_the_release_rate_and_its_cutoff",),
        "the policy plan uses the weighted union's calibration (no cutoff, floor shares): not the policy's figures",
        (2,),
    ),
    Mutant(
        "plan-greedy-without-its-cutoff",
        "threshold",
        "plan/counts.py",
        "greedy_cap = int(cal.cutoff)",
        "greedy_cap = None",
        (_PV + "test_greedy_plan_matches_the_release_rate_and_its_threshold",),
        "the greedy plan lets an item's weight grow past the cutoff: it promises more than the release gives",
        (2,),
    ),
    Mutant(
        "plan-greedy-policy-calibration",
        "threshold",
        "plan/counts.py",
        "pl = plan_vocabulary(epsilon, delta, max_items, noise, False, count_fraction, greedy=True)  # as the release",
        "pl = plan_vocabulary(epsilon, delta, max_items, noise, True, count_fraction)  # as the release",
        (_PV + "test_greedy_plan_matches_the_release_rate_and_its_threshold",),
        "the greedy plan uses the policy Laplace's calibration (water-filling's new-item bound): a lower threshold "
        "than the release's",
        (2,),
    ),
    # --- the distinct count (Knop & Steinke, Algorithm 1) -------------------------------------------------------
    Mutant(
        "distinct-gem-half-sensitivity",
        "sensitivity",
        "distinct/release.py",
        "idx = select(plan.scores, 1.0, plan.epsilon_select, src)",
        "idx = select(plan.scores, 0.5, plan.epsilon_select, src)",
        (_RD + "test_the_release_draws_l_with_gem_s_law_exactly",),
        "the distinct count's choice of l is made with half GEM's sensitivity: 2 epsilon_select spent",
        (2,),
    ),
    Mutant(
        "distinct-permute-and-flip-monotone",
        "noise-scale",
        "distinct/release.py",
        'select = exponential_mechanism if selection == "exponential" else permute_and_flip',
        'select = exponential_mechanism if selection == "exponential" else (lambda *a: permute_and_flip(*a, '
        "monotone=True))",
        (
            "tests/distinct/test_selection.py::test_permute_and_flip_draws_the_bound_by_its_law_and_a_doubled_epsilon"
            "_is_rejected",
        ),
        "GEM's permute-and-flip draw uses the monotone rule exp(eps s / Delta) on scores that are not monotone: "
        "2 epsilon_select spent",
        (2,),
    ),
    Mutant(
        "distinct-count-share-whole-epsilon",
        "budget-split",
        "distinct/release.py",
        "e_cnt = epsilon - e_sel",
        "e_cnt = epsilon",
        (_RD + "test_the_count_at_a_fixed_bound_has_the_paper_s_scale_and_shift",),
        "the shifted Laplace count is calibrated with the whole epsilon although GEM spent half of it: "
        "1.5 epsilon spent, half the noise",
        (2, 3),
    ),
    Mutant(
        "distinct-gem-threshold-without-factor-2",
        "threshold",
        "distinct/release.py",
        "return 2 * math.log(m / beta) / epsilon",
        "return math.log(m / beta) / epsilon",
        (_RD + "test_the_release_draws_l_with_gem_s_law_exactly",),
        "GEM's margin t = ln(l_max / beta) / eps_select, half the paper's: the chosen l is too large too often "
        "(Theorem 3.4's utility bound, and the count bounds of issue 19, no longer hold)",
        (2,),
    ),
    Mutant(
        "distinct-gem-unit-sensitivities",
        "sensitivity",
        "distinct/release.py",
        "scores = gem_scores(q, ls, gem_threshold(l_max, beta, e_sel))",
        "scores = gem_scores(q, np.ones_like(ls), gem_threshold(l_max, beta, e_sel))",
        (_RD + "test_the_release_draws_l_with_gem_s_law_exactly",),
        "GEM normalizes q_l as if every DC(D; l) had sensitivity 1 (it has l): the scores move by up to l_max, "
        "the choice of l is not epsilon_select-DP",
        (2,),
    ),
    Mutant(
        "distinct-count-noise-sensitivity-one",
        "noise-scale",
        "distinct/release.py",
        "terms = [_lower_bound_terms(float(c), float(l), e_cnt, beta) for c, l in zip(counts, ls, strict=True)]",
        "terms = [_lower_bound_terms(float(c), 1.0, e_cnt, beta) for c, l in zip(counts, ls, strict=True)]",
        (_RD + "test_the_count_at_a_fixed_bound_has_the_paper_s_scale_and_shift",),
        "the count DC(D; l_hat) gets Laplace noise for sensitivity 1, not l_hat: l_hat times too little noise",
        (2,),
    ),
    Mutant(
        "distinct-shift-at-1-minus-2beta",
        "threshold",
        "distinct/release.py",
        "x = math.ceil(-t * math.log(beta * (1 + math.exp(-1.0 / t)))) - 1",
        "x = math.ceil(-t * math.log(2 * beta * (1 + math.exp(-1.0 / t)))) - 1",
        (_RD + "test_the_count_at_a_fixed_bound_has_the_paper_s_scale_and_shift",),
        "the shift is the noise's (1 - 2 beta)-quantile: the release exceeds the true count with probability "
        "2 beta, not beta",
        (2,),
    ),
    Mutant(
        "distinct-q-term-one-over-beta",
        "threshold",
        "distinct/release.py",
        "q = counts - ls / e_cnt * math.log(1 / (2 * beta))",
        "q = counts - ls / e_cnt * math.log(1 / beta)",
        (_RD + "test_the_release_draws_l_with_gem_s_law_exactly",),
        "GEM ranks l by q_l with (l / eps_count) ln(1 / beta) rather than the shift the count subtracts, "
        "(l / eps_count) ln(1 / (2 beta)): not Algorithm 1's choice, so Theorem 1.1 and the plan's predicted "
        "error no longer describe the release",
        (2,),
    ),
    Mutant(
        "distinct-bucketed-every-unit-in-every-bucket",
        "contribution-bound",
        "distinct/counting.py",
        "out += bucket_count(person[e], graph.adj[e], unit_person[u], unit_level[u], l_max)",
        "out += bucket_count(person[e], graph.adj[e], unit_person, unit_level, l_max)",
        ("tests/distinct/test_distinct.py::test_bucketed_count_is_below_the_exact_count_and_moves_by_at_most_l",),
        "every bucket counts a person with all of their l units instead of the bucket's share: sum_b DC_b(l) "
        "has sensitivity up to n_buckets l and exceeds DC(D; l)",
    ),
    # --- the set union (Gopi et al.) and the vocabulary release ------------------------------------------------
    Mutant(
        "vocabulary-release-twice-max-items",
        "contribution-bound",
        "releases/vocabulary.py",
        "data, cap, partial(keyed_keep, streams, cap=cap),",
        "data, 2 * cap, partial(keyed_keep, streams, cap=2 * cap),",
        (_RV + "test_a_person_counts_toward_at_most_max_items_items",),
        "the vocabulary release lets each person count toward 2 max_items items: twice the sensitivity the "
        "threshold and noise were calibrated for",
        (4,),
    ),
    Mutant(
        "union-new-item-bound-without-k",
        "threshold",
        "vocabulary/union.py",
        "worst = float(np.max(np.log(ks) + tail(threshold - new_item_weight(ks, noise, unit, policy), scale)))",
        "worst = float(np.max(tail(threshold - new_item_weight(ks, noise, unit, policy), scale)))",
        ("tests/vocabulary/test_union.py::test_threshold_is_the_smallest_that_bounds_a_new_item_by_the_real_tails",),
        "the threshold bounds each of a person's k new items by delta, not all k together: an item only one "
        "person holds is released with probability up to max_items delta",
    ),
    Mutant(
        "union-gaussian-threshold-whole-delta",
        "budget-split",
        "vocabulary/union.py",
        "target = (dlt - delta_g) * (1 - _MARGIN)",
        "target = dlt * (1 - _MARGIN)",
        ("tests/vocabulary/test_union.py::test_threshold_is_the_smallest_that_bounds_a_new_item_by_the_real_tails",),
        "the Gaussian union's threshold takes the whole delta although its noisy histogram spends half: "
        "1.5 delta spent",
        (3,),
    ),
    Mutant(
        "vocabulary-release-l2-weights-for-laplace",
        "sensitivity",
        "vocabulary/union.py",
        "return np.column_stack([person_weights(k, noise), np.ones(k.size, dtype=np.int64)])",
        'return np.column_stack([person_weights(k, "gaussian"), np.ones(k.size, dtype=np.int64)])',
        (_RV + "test_a_person_counts_toward_at_most_max_items_items",),
        "the release layer's weights are l2-normalized whatever the noise: a Laplace union's person has l1 "
        "norm sqrt(k), not 1",
        (1,),
    ),
    Mutant(
        "vocabulary-policy-histogram-before-bounding",
        "contribution-bound",
        "vocabulary/union.py",
        "hist, held_any = _histogram(off, its, labels.size, cal, src, cnt)",
        "hist, held_any = _histogram(offsets, items, labels.size, cal, src, cnt)",
        (_RV + "test_the_policy_release_bounds_each_person_before_the_histogram_and_the_counts",),
        "the policy histogram visits every item of every person, not their max_items kept ones: the threshold "
        "bounds a new item's weight for at most max_items items",
        (1,),
    ),
    Mutant(
        "vocabulary-holders-before-bounding",
        "contribution-bound",
        "vocabulary/union.py",
        "holders = np.bincount(its, minlength=labels.size)",
        "holders = np.bincount(np.asarray(items, dtype=np.int64), minlength=labels.size)",
        (_RV + "test_the_policy_release_bounds_each_person_before_the_histogram_and_the_counts",),
        "the counts count every item a person holds, not their max_items kept ones: the counts' sensitivity is "
        "unbounded",
        (1,),
    ),
    Mutant(
        "vocabulary-laplace-count-sensitivity-sqrt",
        "sensitivity",
        "vocabulary/union.py",
        "counts = laplace_mechanism(held, float(max_items), eps_count, src) if held.size else held",
        "counts = laplace_mechanism(held, math.sqrt(max_items), eps_count, src) if held.size else held",
        (_RV + "test_the_release_s_counts_have_the_noise_their_sensitivity_calls_for",),
        "the Laplace counts use the l2 sensitivity sqrt(max_items) for l1 noise: sqrt(max_items) times too "
        "little noise",
        (3,),
    ),
    Mutant(
        "vocabulary-gaussian-count-sensitivity-one",
        "sensitivity",
        "vocabulary/union.py",
        "sens = math.sqrt(max_items)",
        "sens = 1.0",
        (_RV + "test_the_release_s_counts_have_the_noise_their_sensitivity_calls_for",),
        "the Gaussian counts are calibrated for one count changing by 1, not max_items counts: sqrt(max_items) "
        "times too little noise (and the stated sd agrees with it)",
        (3,),
    ),
    Mutant(
        "vocabulary-set-keeps-whole-delta",
        "budget-split",
        "vocabulary/union.py",
        "delta_set = dlt - delta_count",
        "delta_set = dlt",
        (_RV + "test_the_samplers_get_the_budget_split",),
        "the Gaussian vocabulary's set step keeps the whole delta while the counts take half: 1.5 delta spent",
        (3,),
    ),
    Mutant(
        "policy-cutoff-without-threshold",
        "threshold",
        "vocabulary/union.py",
        "cutoff = int(t_hi) + math.ceil(margin * scale) if policy else 0",
        "cutoff = math.ceil(margin * scale) if policy else 0",
        (_RV + "test_the_policy_release_passes_saturated_items_at_the_cutoff_s_rate",),
        "the policy cutoff is alpha t, not T + alpha t (Gopi et al.'s rho + alpha / epsilon without rho): "
        "persons stop below the threshold and no item is ever released",
        (2,),
    ),
    Mutant(
        "policy-new-item-weight-rounded-down",
        "threshold",
        "vocabulary/union.py",
        "return -(-unit // k)",
        "return unit // k",
        ("tests/vocabulary/test_policy.py::test_a_new_item_gets_at_most_its_share_rounded_up",),
        "the policy threshold bounds a new item's weight by floor(unit / k), but water-filling gives up to "
        "ceil(unit / k): the new-item bound is computed for less weight than a person can give",
    ),
    Mutant(
        "counts-lookup-reused-for-another-key-list",
        "contribution-bound",
        "vocabulary/counts.py",
        "if last is not None and last[0] is labels and last[1] is counted and np.array_equal(last[4], counted):",
        "if last is not None and last[0] is labels:",
        (
            "tests/vocabulary/test_counts.py::test_a_batch_restricted_to_the_counted_keys_in_text_order_for_any_key_list",
            "tests/vocabulary/test_counts.py::test_the_batch_lookup_sees_a_key_list_changed_in_place_and_is_not_kept_after_a_release",
        ),
        "a batch's persons are restricted with the lookup of the previous key list: their records are counted "
        "on the keys of another release (or the selection's keys counted as public ones)",
    ),
    Mutant(
        "counts-lookup-blind-to-in-place-change",
        "contribution-bound",
        "vocabulary/counts.py",
        " and np.array_equal(last[4], counted):",
        ":",
        (
            "tests/vocabulary/test_counts.py::test_the_batch_lookup_sees_a_key_list_changed_in_place_and_is_not_kept_after_a_release",
        ),
        "a key list changed in place is restricted with its old lookup: records counted on keys not asked for",
    ),
    # --- DP-SIPS (vocabulary/sips.py) -------------------------------------------------------------------------
    Mutant(
        "sips-width-times-sqrt-fraction",
        "noise-scale",
        "vocabulary/sips.py",
        "return [max(1, math.ceil(c / math.sqrt(f))) for f in fr]",
        "return [max(1, math.ceil(c * math.sqrt(f))) for f in fr]",
        (
            _RS + "test_the_rounds_compose_to_half_of_delta_in_zcdp_and_split_the_rest",
            _RS + "test_the_sampler_path_has_the_stated_noise_in_every_round",
        ),
        "each round's width shrinks with its share of the budget instead of growing: the rounds get less noise "
        "than their rho allows",
    ),
    Mutant(
        "sips-rho-not-summed-over-rounds",
        "budget-split",
        "vocabulary/sips.py",
        "return math.fsum(uu / (2.0 * w * w) for w in ws)",
        "return max(uu / (2.0 * w * w) for w in ws)",
        (
            _RS + "test_the_rounds_compose_to_half_of_delta_in_zcdp_and_split_the_rest",
            _RS + "test_exact_audit_refutes_rounds_each_calibrated_for_the_whole_rho",
        ),
        "the rounds' zCDP parameters are not added up (the largest one stands for all): the composed release "
        "spends up to r times the rho its delta was calibrated for",
    ),
    Mutant(
        "sips-gaussian-takes-whole-delta",
        "budget-split",
        "vocabulary/sips.py",
        "goal = delta_g * (1 - _MARGIN)",
        "goal = dlt * (1 - _MARGIN)",
        (_RS + "test_the_rounds_compose_to_half_of_delta_in_zcdp_and_split_the_rest",),
        "the rounds' Gaussians are calibrated for the whole delta while the thresholds take the other half "
        "too: delta is spent twice",
    ),
    Mutant(
        "sips-threshold-share-not-split",
        "threshold",
        "vocabulary/sips.py",
        't = _threshold("gaussian", w, max_items, unit, f * delta_n * (1 - _MARGIN))',
        't = _threshold("gaussian", w, max_items, unit, delta_n * (1 - _MARGIN))',
        (
            _RS + "test_the_rounds_compose_to_half_of_delta_in_zcdp_and_split_the_rest",
            _RS + "test_exact_audit_of_the_rounds_with_broken_schedules_caught",
        ),
        "every round's threshold takes the whole new-item share of delta: a person's own item is released "
        "with probability up to r times the stated bound",
    ),
    Mutant(
        "sips-stated-new-item-bound-scaled-down",
        "threshold",
        "vocabulary/sips.py",
        'd_new = _delta_new(t, "gaussian", w, max_items, unit)',
        'd_new = _delta_new(t, "gaussian", w, max_items, unit) * f',
        (_RS + "test_the_rounds_compose_to_half_of_delta_in_zcdp_and_split_the_rest",),
        "the stated new-item bound of each round is scaled down by its share: the release states a smaller "
        "delta_N than it has",
    ),
    Mutant(
        "sips-released-items-not-removed",
        "contribution-bound",
        "vocabulary/sips.py",
        "left = ~released[items]",
        "left = np.ones(items.size, dtype=bool)",
        (_RS + "test_each_round_removes_the_items_released_before_bounding",),
        "the rounds do not remove the items already released: DP-SIPS degenerates to repeated one-round unions "
        "(no privacy loss, but the adaptive gain the algorithm exists for is gone)",
    ),
    Mutant(
        "sips-round-not-bounded",
        "contribution-bound",
        "vocabulary/sips.py",
        "off, its = bound_contributions(off, items[left], cal.max_items, src)",
        "its = items[left]",
        (_RS + "test_each_round_bounds_each_person_to_max_items_of_what_is_left",),
        "a round weights every item a person has left, not max_items of them: a person holding 1,000 items "
        "moves the histogram by far more than one unit",
    ),
    Mutant(
        "sips-every-round-with-the-last-calibration",
        "noise-scale",
        "vocabulary/sips.py",
        "chosen, noisy = _select(hist, rc, src)",
        "chosen, noisy = _select(hist, cal.rounds[-1], src)",
        (_RS + "test_the_sampler_path_has_the_stated_noise_in_every_round",),
        "every round draws the last round's (smallest) noise and threshold: the early rounds spend more than "
        "their share",
    ),
    Mutant(
        "sips-counts-of-all-items",
        "contribution-bound",
        "vocabulary/sips.py",
        "holders = np.bincount(first_kept, minlength=labels.size)  # at most max_items per person",
        "holders = np.bincount(its, minlength=labels.size)",
        (_RS + "test_private_vocabulary_with_sips_counts_the_first_round_s_kept_items",),
        "DP-SIPS's counts count every item a person holds, not their max_items kept ones: the counts' "
        "sensitivity is exceeded",
    ),
    Mutant(
        "sips-rounds-validator-accepts-zero",
        "refusal",
        "vocabulary/sips.py",
        "not 1 <= rounds <= 10:",
        "not 0 <= rounds <= 10:",
        (_RS + "test_refusals",),
        "a schedule of zero rounds is accepted (and fails later with an arithmetic error, not a refusal)",
    ),
    Mutant(
        "sips-ratio-validator-accepts-anything",
        "refusal",
        "vocabulary/sips.py",
        "if not (math.isfinite(q) and 0.1 <= q <= 10.0):",
        "if False:",
        (_RS + "test_refusals",),
        "a NaN or extreme schedule ratio is accepted: NaN fractions make the widths and thresholds undefined",
    ),
    Mutant(
        "sips-with-laplace-noise-accepted",
        "refusal",
        "vocabulary/sips.py",
        'if noise != "gaussian":',
        "if False:",
        (_RS + "test_refusals", "tests/cli/test_vocabulary.py::test_vocabulary_refusals_write_and_charge_nothing"),
        "DP-SIPS with --noise laplace runs Gaussian rounds but Laplace counts calibrated as if the whole "
        "release were Laplace: the parameters stated do not describe the release",
    ),
    Mutant(
        "sips-auto-choice-at-the-whole-epsilon",
        "budget-split",
        "vocabulary/sips.py",
        'choice = choose_max_items(persons_within(np.diff(off)), plan["epsilon_bound"], rng=src)',
        "choice = choose_max_items(persons_within(np.diff(off)), float(epsilon), rng=src)",
        (_RS + "test_the_default_bound_is_chosen_first_and_every_round_uses_it",),
        "DP-SIPS under max_items='auto' draws the bound at the release's whole epsilon while only 2% of it is charged",
        (1,),
    ),
    Mutant(
        "sips-auto-drops-the-choice",
        "budget-split",
        "vocabulary/sips.py",
        'plan = plan_sips_vocabulary(epsilon, delta, choice, noise, count_fraction, plan["rounds"], plan["ratio"])',
        'plan = plan_sips_vocabulary(epsilon, delta, choice.value, noise, count_fraction, plan["rounds"], '
        'plan["ratio"])',
        (_RS + "test_the_default_bound_is_chosen_first_and_every_round_uses_it",),
        "DP-SIPS re-plans with the chosen bound as a plain number: the rounds are calibrated for the whole "
        "epsilon although the choice spent its share",
        (1,),
    ),
    # --- DP-SIPS where the data are: each round's sums from the engine (releases/vocabulary.py, sips.py) ----------
    Mutant(
        "sips-release-every-round-with-round-one-s-purpose",
        "keyed-purpose",
        "releases/vocabulary.py",
        "KeyedKeep(streams, cap, purpose=sips_round_purpose(round_))",
        "KeyedKeep(streams, cap, purpose=sips_round_purpose(1))",
        (_RS + "test_the_release_s_rounds_keep_fresh_uniform_subsets",),
        "the release's rounds all bound each person with round 1's keyed words: a person keeps the same items "
        "in every round instead of a fresh random subset of what is left",
        (6,),
    ),
    Mutant(
        "sips-sums-released-items-not-removed",
        "contribution-bound",
        "vocabulary/sips.py",
        "labels, sums = item_sums(i + 1, cal.max_items, released)",
        "labels, sums = item_sums(i + 1, cal.max_items, released[:0])",
        (
            _RS + "test_the_release_s_rounds_remove_the_items_released_before_bounding",
            "tests/releases/test_engines_agree.py::test_memory_and_chunked_releases_are_identical_and_their_"
            "aggregates_right[vocabulary, DP-SIPS]",
        ),
        "the engine's rounds are not told the items released so far: every round bounds and weights the whole "
        "sets again (repeated one-round unions; the adaptive gain the algorithm exists for is gone)",
    ),
    Mutant(
        "sips-sums-round-not-bounded",
        "contribution-bound",
        "vocabulary/sips.py",
        "labels, sums = item_sums(i + 1, cal.max_items, released)",
        "labels, sums = item_sums(i + 1, 1 << 20, released)",
        (
            _RS + "test_the_default_bound_is_chosen_first_and_every_round_uses_it",
            "tests/releases/test_engines_agree.py::test_memory_and_chunked_releases_are_identical_and_their_"
            "aggregates_right[vocabulary, DP-SIPS]",
        ),
        "the release's rounds ask the engine to bound each person by a huge cap, not max_items: a person "
        "holding 1,000 items moves the histogram by far more than one unit",
    ),
    Mutant(
        "sips-sums-every-round-with-the-last-calibration",
        "noise-scale",
        "vocabulary/sips.py",
        "chosen, noisy = _select(sums[:, 0], rc, src)",
        "chosen, noisy = _select(sums[:, 0], cal.rounds[-1], src)",
        (_RS + "test_the_release_path_has_the_stated_noise_in_every_round",),
        "the release's rounds all draw the last round's (smallest) noise and threshold: the early rounds spend "
        "more than their share",
    ),
    Mutant(
        "sips-sums-counts-of-the-weights",
        "sensitivity",
        "vocabulary/sips.py",
        "first_labels, first_holders = labels, sums[:, 1]",
        "first_labels, first_holders = labels, sums[:, 0]",
        (_RS + "test_the_release_counts_the_first_round_s_kept_items",),
        "the release counts each item's weight (U / sqrt(k) per person), not its holders: the counts are "
        "a million times the persons and their noise is calibrated for a count",
    ),
    Mutant(
        "bounded-items-exclusion-ignored",
        "contribution-bound",
        "engines/base.py",
        "left = ~gone[items]",
        "left = np.ones(items.size, dtype=bool)",
        (
            "tests/engines/test_memory_engine.py::test_bounded_item_sums_equal_the_definition",
            "tests/releases/test_engines_agree.py::test_memory_and_chunked_releases_are_identical_and_their_"
            "aggregates_right[vocabulary, DP-SIPS]",
        ),
        "the engine leaves the excluded labels in every person's set: DP-SIPS's later rounds bound and weight "
        "items already released",
        (4,),
    ),
    Mutant(
        "duckdb-exclusion-ignored",
        "contribution-bound",
        "engines/duckdb.py",
        "WHERE i NOT IN (SELECT i FROM {gone})",
        "WHERE i IS NOT NULL",
        ("tests/engines/test_duckdb_engine.py::test_every_aggregate_equals_the_memory_engine_and_the_definition",),
        "DuckDB leaves the excluded labels in every person's set: DP-SIPS's later rounds bound and weight items "
        "already released (and the engines' releases differ)",
    ),
    Mutant(
        "spark-exclusion-not-broadcast",
        "contribution-bound",
        "engines/spark.py",
        "out = None if gone is None else gone.value",
        "out = None",
        ("tests/engines/test_spark_engine.py::test_bounded_item_sums_on_spark_equal_the_definition",),
        "the executors never see the excluded labels: on Spark DP-SIPS's later rounds bound and weight items "
        "already released",
    ),
    # --- max_items="auto": the bound chosen privately (issue 35) --------------------------------------------------
    Mutant(
        "vocabulary-auto-engine-choice-at-the-whole-epsilon",
        "budget-split",
        "vocabulary/union.py",
        "return choose_max_items(within, auto_bound_epsilon(epsilon), quantile=q, rng=rng)",
        "return choose_max_items(within, epsilon, quantile=q, rng=rng)",
        (_RB + "test_the_default_chooses_the_bound_and_charges_its_share",),
        "the engines' path draws the bound at the release's whole epsilon while only 2% of it is charged "
        "(the eps_rest = eps - eps_bound line cannot be mutated alone: the split's guard then never ends)",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-memory-choice-at-the-whole-epsilon",
        "budget-split",
        "vocabulary/union.py",
        'choice = choose_max_items(persons_within(k), plan["epsilon_bound"], quantile=auto_quantile(noise), rng=src)',
        "choice = choose_max_items(persons_within(k), float(epsilon), quantile=auto_quantile(noise), rng=src)",
        (_RB + "test_the_default_chooses_the_bound_and_charges_its_share",),
        "the in-memory (and policy) path draws the bound at the release's whole epsilon while only 2% of it is charged",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-laplace-at-the-gaussian-quantile",
        "contribution-bound",
        "vocabulary/union.py",
        'AUTO_QUANTILES = {"gaussian": 0.9, "laplace": 0.1}',
        'AUTO_QUANTILES = {"gaussian": 0.9, "laplace": 0.9}',
        (_RB + "test_the_laplace_unions_default_chooses_the_laplace_quantile",),
        "every Laplace union's default bound is the Gaussian unions' 90% quantile: fewer items released than at "
        "the measured Laplace quantile (expected, epsilon 1: IMDB 452 against 487, Reddit 27.9 against 39.6)",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-memory-choice-ignores-the-noise",
        "contribution-bound",
        "vocabulary/union.py",
        'choice = choose_max_items(persons_within(k), plan["epsilon_bound"], quantile=auto_quantile(noise), rng=src)',
        'choice = choose_max_items(persons_within(k), plan["epsilon_bound"], rng=src)',
        (_RB + "test_the_laplace_unions_default_chooses_the_laplace_quantile",),
        "the in-memory path (weighted and policy Laplace, policy greedy) chooses at the Gaussian quantile while "
        "its release states the Laplace one: the bound is not the one the docs promise",
        (1,),
    ),
    Mutant(
        "vocabulary-release-auto-choice-without-the-noise",
        "contribution-bound",
        "releases/vocabulary.py",
        "max_items = choose_max_items_with(partial(eng.key_record_sums, data), epsilon, src, noise=noise)",
        "max_items = choose_max_items_with(partial(eng.key_record_sums, data), epsilon, src)",
        (_RB + "test_the_laplace_unions_default_chooses_the_laplace_quantile",),
        "the release layer's weighted Laplace union (memory, DuckDB, Spark) chooses its bound at the Gaussian "
        "quantile",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-engine-choice-ignores-the-noise",
        "contribution-bound",
        "vocabulary/union.py",
        "q = auto_quantile(noise)  # (checked before the data are read)",
        "q = AUTO_QUANTILE  # (checked before the data are read)",
        (_RB + "test_the_engines_choice_follows_the_noise",),
        "the engines' path (the weighted union, on Spark too) chooses the Laplace union's bound at the Gaussian "
        "quantile",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-states-the-wrong-quantile",
        "contribution-bound",
        "vocabulary/union.py",
        '"max_items_quantile": plan["choice"].quantile if plan["choice"] is not None else None,',
        '"max_items_quantile": AUTO_QUANTILE if plan["choice"] is not None else None,',
        (_RB + "test_the_laplace_unions_default_chooses_the_laplace_quantile",),
        "a Laplace release states the Gaussian quantile it was not chosen with",
        (3,),
    ),
    Mutant(
        "counts-auto-max-keys-at-the-counts-noise-quantile",
        "contribution-bound",
        "vocabulary/counts.py",
        'choice = choose_max_items_with(record_sums, plan["epsilon_keys"], src, noise="gaussian")',
        'choice = choose_max_items_with(record_sums, plan["epsilon_keys"], src, noise=noise)',
        (_RB + "test_the_counts_key_selection_keeps_the_gaussian_quantile",),
        "per-key counts with Laplace counts choose max_keys at the Laplace quantile although the keys are "
        "selected by the Gaussian union",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-release-drops-the-choice",
        "budget-split",
        "releases/vocabulary.py",
        "cap = max_items.value if isinstance(max_items, BoundChoice) else int(max_items)",
        "max_items = cap = max_items.value if isinstance(max_items, BoundChoice) else int(max_items)",
        (_RB + "test_the_default_chooses_the_bound_and_charges_its_share",),
        "the release layer passes the chosen bound on as a plain number: the set is calibrated with the whole "
        "epsilon although the choice spent its share",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-memory-drops-the-choice",
        "budget-split",
        "vocabulary/union.py",
        "plan = plan_vocabulary(epsilon, delta, choice, noise, policy, count_fraction, cutoff_margin, greedy)",
        "plan = plan_vocabulary(epsilon, delta, choice.value, noise, policy, count_fraction, cutoff_margin, greedy)",
        (_RB + "test_the_default_chooses_the_bound_and_charges_its_share",),
        "the in-memory (and policy) release re-plans with the chosen bound as a plain number: the choice's "
        "share of epsilon is spent twice",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-choice-sensitivity-half",
        "sensitivity",
        "vocabulary/union.py",
        "i = exponential_mechanism(s, 1.0, epsilon_select, rng)",
        "i = exponential_mechanism(s, 0.5, epsilon_select, rng)",
        (
            _RB + "test_the_choice_is_the_exponential_mechanism_of_the_rank_scores",
            _RB + "test_the_default_chooses_the_bound_and_charges_its_share",
        ),
        "the choice's exponential mechanism assumes rank scores of sensitivity 1/2: it spends twice its share",
    ),
    Mutant(
        "vocabulary-auto-scores-sensitivity-two",
        "sensitivity",
        "vocabulary/union.py",
        "return -np.abs(within[:-1] - quantile * within[-1])",
        "return -2 * np.abs(within[:-1] - quantile * within[-1])",
        (
            _RB + "test_exact_audit_of_the_choice_and_broken_variants_caught",
            _RB + "test_the_choice_is_the_exponential_mechanism_of_the_rank_scores",
        ),
        "the rank scores are doubled (sensitivity 2) while the mechanism draws for sensitivity 1: twice the "
        "choice's epsilon spent",
    ),
    Mutant(
        "vocabulary-auto-calibrated-for-the-smallest-candidate",
        "contribution-bound",
        "vocabulary/union.py",
        "return max_items.value, max_items.epsilon, max_items",
        "return min(MAX_ITEMS_GRID), max_items.epsilon, max_items",
        (_RB + "test_the_default_chooses_the_bound_and_charges_its_share", _RB + "test_auto_plans_every_candidate"),
        "the set's threshold and counts are calibrated for one item per person while each person keeps up to "
        "the chosen bound: a person's new items are released far more often than delta allows",
        (1,),
    ),
    Mutant(
        "vocabulary-auto-grid-counts-persons-below-the-bound",
        "contribution-bound",
        "vocabulary/union.py",
        'within = np.searchsorted(np.sort(k), np.asarray(grid, dtype=np.int64), side="right")',
        'within = np.searchsorted(np.sort(k), np.asarray(grid, dtype=np.int64), side="left")',
        (_RB + "test_persons_within_counts_the_persons_each_bound_keeps_whole",),
        "the grid counts the persons holding fewer items than each candidate, not at most as many: the bound "
        "lands one grid step above the quantile asked for",
    ),
    Mutant(
        "vocabulary-auto-plan-checks-the-smallest-candidate",
        "refusal",
        "vocabulary/union.py",
        "return max(MAX_ITEMS_GRID), auto_bound_epsilon(eps), None",
        "return min(MAX_ITEMS_GRID), auto_bound_epsilon(eps), None",
        (_RB + "test_auto_plans_every_candidate",),
        "'auto' checks the calibrations for one item per person only: a bound the data choose later could be "
        "refused after the data were read",
    ),
]

_RG = "tests/vocabulary/test_policy_greedy.py::"

MUTANTS += [
    # --- the policy greedy union (Carvalho, Wang & Gondara 2022) -----------------------------------------------
    Mutant(
        "greedy-raises-past-the-cutoff",
        "sensitivity",
        "vocabulary/greedy.py",
        "step = gap if gap < left else left",
        "step = left",
        (_RG + "test_the_update_is_l1_non_expansive_on_small_lattices_exhaustively",),
        "a person raises an item below the cutoff by the whole budget left, past the cutoff: one step more on an "
        "item at the cutoff moves the update by up to 2 units, and the histogram's sensitivity is not 1 unit",
    ),
    Mutant(
        "greedy-orders-by-the-histogram",
        "sensitivity",
        "vocabulary/greedy.py",
        'rank = by_priority[np.argsort(-counts[lo:hi][by_priority], kind="mergesort")]',
        'rank = by_priority[np.argsort(-hist[mine][by_priority], kind="mergesort")]',
        (_RG + "test_the_update_is_l1_non_expansive_on_small_lattices_exhaustively",),
        "the items nearest the cutoff are filled first (Gopi et al.'s greedy of the current histogram): the order "
        "depends on the other persons, the update is not contractive, and adding one person moves the final "
        "histogram by more than one unit",
    ),
    Mutant(
        "greedy-spends-two-units",
        "sensitivity",
        "vocabulary/greedy.py",
        "left = unit",
        "left = 2 * unit",
        (_RG + "test_the_update_fills_items_to_the_cutoff_most_held_first",
         _RG + "test_exact_audit_of_the_greedy_output_law"),  # fmt: skip
        "each person spends two units of weight while the noise is calibrated for one: epsilon doubles",
    ),
    Mutant(
        "greedy-new-items-bounded-as-water-filling",
        "threshold",
        "vocabulary/union.py",
        "    if greedy:\n        return greedy_delta_new(threshold, scale, max_items, unit)",
        "    if False:\n        return greedy_delta_new(threshold, scale, max_items, unit)",
        (_RG + "test_the_threshold_bounds_one_new_item_at_the_unit_and_the_others_at_zero",
         _RG + "test_exact_audit_of_the_greedy_output_law"),  # fmt: skip
        "the greedy threshold bounds a person's k new items by ceil(unit / k) each, as water-filling gives, but "
        "greedy puts the whole unit on one of them: an item only one person holds is released with more than delta",
        (2,),
    ),
    Mutant(
        "greedy-new-items-at-zero-not-counted",
        "threshold",
        "vocabulary/union.py",
        "return float(np.max(one + (ks - 1) * rest)) * (1 + _MARGIN)",
        "return float(np.max(one + 0 * (ks - 1) * rest)) * (1 + _MARGIN)",
        (_RG + "test_the_threshold_bounds_one_new_item_at_the_unit_and_the_others_at_zero",),
        "the new items greedy leaves at weight 0 are not counted, though every kept item is a candidate: with "
        "large max_items the release of a new item at 0 weight alone exceeds delta",
    ),
    Mutant(
        "greedy-new-item-half-unit",
        "threshold",
        "vocabulary/union.py",
        "one = np.exp(_log_tail_laplace(np.array([threshold - unit]), scale))[0]",
        "one = np.exp(_log_tail_laplace(np.array([threshold - (unit + 1) // 2]), scale))[0]",
        (_RG + "test_the_threshold_bounds_one_new_item_at_the_unit_and_the_others_at_zero",
         _RG + "test_exact_audit_of_the_greedy_output_law"),  # fmt: skip
        "the greedy threshold bounds the new item's weight by half a unit: the threshold is too low",
    ),
    Mutant(
        "greedy-not-a-policy",
        "threshold",
        "vocabulary/union.py",
        "policy = bool(policy or greedy)",
        "policy = bool(policy)",
        (_RG + "test_the_threshold_bounds_one_new_item_at_the_unit_and_the_others_at_zero",
         _RG + "test_greedy_refusals_before_the_data"),  # fmt: skip
        "the greedy calibration has no cutoff (persons stop at 0: nothing is released) and Gaussian noise is "
        "not refused, though the contraction's guarantee is an l1 one",
    ),
    Mutant(
        "greedy-histogram-before-bounding",
        "contribution-bound",
        "vocabulary/union.py",
        "        off, its = bound_contributions(off_d, its_d, cal.max_items, rng)\n",
        "        off, its = off_d, its_d\n",
        (_RG + "test_the_greedy_release_bounds_each_person_before_the_histogram",),
        "the greedy histogram sees every item of every person, not their max_items kept ones: a person's new "
        "items outnumber the k <= max_items the threshold was calibrated for",
    ),
    Mutant(
        "greedy-release-plans-as-weighted",
        "refusal",
        "releases/vocabulary.py",
        'count_fraction, greedy=algo == "policy-greedy"',
        "count_fraction",
        (_RG + "test_greedy_refusals_before_the_data",),
        "the release checks the greedy union's parameters only after reading the data (Gaussian noise is "
        "refused later, from inside the selection)",
    ),
]

# --- the baselines of Knop & Steinke's Table 2: R2T and the shifted inverse mechanism (issue 36) ------------------
_DB = "tests/distinct/test_baselines.py::"
_R2T_SCALE = _DB + "test_r2t_noise_has_scale_j_tau_over_epsilon_and_a_30_percent_error_is_rejected"
_SI_LAW = _DB + "test_the_shifted_inverse_draws_follow_the_exact_law"
_SI_DEFAULT = _DB + "test_the_default_path_draws_follow_the_exact_law"
_SI_LP = _DB + "test_the_lp_removals_match_brute_force_on_the_tiny_instance"

MUTANTS += [
    Mutant(
        "r2t-budget-not-split",
        "budget-split",
        "distinct/baselines.py",
        "cal = calibrate_laplace(float(tau), eps / n)",
        "cal = calibrate_laplace(float(tau), eps)",
        (_R2T_SCALE,),
        "every R2T threshold spends the whole epsilon: J thresholds spend J epsilon",
    ),
    Mutant(
        "r2t-sensitivity-one",
        "sensitivity",
        "distinct/baselines.py",
        "cal = calibrate_laplace(float(tau), eps / n)",
        "cal = calibrate_laplace(1.0, eps / n)",
        (_R2T_SCALE,),
        "DC(D; tau) is noised for sensitivity 1, not tau: tau times too little noise",
    ),
    Mutant(
        "r2t-shift-without-union-bound",
        "threshold",
        "distinct/baselines.py",
        "shift = cal.scale * math.log(n / beta)",
        "shift = cal.scale * math.log(1 / beta)",
        (_DB + "test_r2t_noisy_values_exceed_their_truncated_count_with_probability_beta_over_2j",),
        "R2T's downward shift forgets the union bound over the J thresholds: the release overshoots more often "
        "than beta allows",
    ),
    Mutant(
        "r2t-max-without-zero",
        "threshold",
        "distinct/baselines.py",
        "value = max(max(noisy), 0.0)",
        "value = max(noisy)",
        (_DB + "test_r2t_release_is_the_max_of_its_noisy_values_and_zero",),
        "R2T's release may be negative (the paper takes the max with Q(I, 0) = 0)",
    ),
    Mutant(
        "si-score-sensitivity-half",
        "sensitivity",
        "distinct/baselines.py",
        "r = exponential_mechanism(-losses.astype(np.float64), 1.0, eps, src, multiplicities=lengths)",
        "r = exponential_mechanism(-losses.astype(np.float64), 0.5, eps, src, multiplicities=lengths)",
        (_SI_LAW,),
        "the shifted inverse's score is treated as sensitivity 1/2: the release spends 2 epsilon",
    ),
    Mutant(
        "si-tau-halved",
        "threshold",
        "distinct/baselines.py",
        "tau = math.ceil(2 / eps * math.log((m + 1) / beta))",
        "tau = math.ceil(1 / eps * math.log((m + 1) / beta))",
        (_SI_LAW,),
        "the shift tau is half the paper's: the release overshoots DC(D) with more than beta probability",
    ),
    Mutant(
        "si-unclipped-inverse",
        "sensitivity",
        "distinct/baselines.py",
        "        losses.append(tau + 1)",
        "        losses.append(2 * tau)",
        (_SI_LAW,),
        "grid points below F_{2 tau} get a loss that jumps from tau to 2 tau: the inverse's sensitivity is no "
        "longer 1",
    ),
    Mutant(
        "si-lp-budget-off-by-one",
        "sensitivity",
        "distinct/baselines.py",
        "b = np.r_[np.zeros(nnz), float(k)]",
        "b = np.r_[np.zeros(nnz), float(k + 1)]",
        (_SI_LP, _SI_DEFAULT),
        "F_k removes k + 1 persons: the inverse is off by one and the law is not the paper's",
    ),
    Mutant(
        "em-multiplicities-ignored",
        "sampler",
        "noise/selection.py",
        "a, b = lo_ctx.multiply(a, Decimal(k)), hi_ctx.multiply(b, Decimal(k))",
        "a, b = lo_ctx.multiply(a, Decimal(1)), hi_ctx.multiply(b, Decimal(1))",
        (_DB + "test_exponential_mechanism_multiplicities_are_exact", _SI_LAW),
        "the exponential mechanism with multiplicities draws a run of tied candidates as if it were one",
    ),
]
