"""Mutants of the noise and privacy-accounting area: the lattice calibrations, the exact samplers, selection,
keyed per-user streams, conversions between guarantees, the shuffling and reduction accountant, composition
and the auditor (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

_NOISE = "tests/test_noise.py"
_LATTICE = "tests/test_noise_lattice.py"
_KEYED = "tests/test_keyed_streams.py"
_ACCOUNTING = "tests/privacy/test_accounting.py"
_GUARANTEES = "tests/privacy/test_guarantees.py"
_COMPOSITION = "tests/privacy/test_composition.py"
_PARAMS = "tests/privacy/test_params.py"

MUTANTS: list[Mutant] = [
    # ------------------------------------------------------------------ lattice Laplace calibration
    Mutant(
        "laplace-rounding-term-dropped",
        "noise-scale",
        "noise/mechanisms.py",
        "t = math.ceil((sens / g + dim) / eps)",
        "t = math.ceil((sens / g) / eps)",
        (
            f"{_NOISE}::test_laplace_mechanism_exact_law_on_a_coarse_lattice",
            f"{_LATTICE}::test_lattice_laplace_exact_audit_at_real_parameters",
        ),
        "the Laplace calibration forgets that rounding to the lattice moves each coordinate by up to half a "
        "step: inputs straddling rounding boundaries are (sens/g + dim)/t apart, more than epsilon",
        (1, 2),
    ),
    Mutant(
        "laplace-sensitivity-not-in-lattice-steps",
        "sensitivity",
        "noise/mechanisms.py",
        "t = math.ceil((sens / g + dim) / eps)",
        "t = math.ceil((1 / g + dim) / eps)",
        (
            f"{_NOISE}::test_laplace_mechanism_exact_law_on_a_coarse_lattice",
            f"{_NOISE}::test_laplace_mechanism_is_lattice_valued_and_has_calibrated_scale",
        ),
        "the Laplace noise is calibrated for sensitivity 1 whatever the sensitivity: a release of l1 "
        "sensitivity 2 spends 2 epsilon",
        (1,),
    ),
    Mutant(
        "laplace-lattice-differs-from-calibration",
        "noise-scale",
        "noise/mechanisms.py",
        "return LaplaceCalibration(eps, sens, int(dim), g, int(t))",
        "return LaplaceCalibration(eps, sens, int(dim), g / 2, int(t))",
        (
            f"{_NOISE}::test_laplace_mechanism_exact_law_on_a_coarse_lattice",
            f"{_NOISE}::test_laplace_mechanism_is_lattice_valued_and_has_calibrated_scale",
        ),
        "the values are released on a lattice half the one t was computed for: the noise is half its scale "
        "and the release spends 2 epsilon",
        (2, 3),
    ),
    # ------------------------------------------------------------------ Gaussian calibration and accounting
    Mutant(
        "gaussian-rounding-term-dropped",
        "noise-scale",
        "noise/mechanisms.py",
        "sens_eff = sens + g * math.sqrt(dim)",
        "sens_eff = sens",
        (
            f"{_NOISE}::test_gaussian_mechanism_exact_law_and_delta_on_a_coarse_lattice",
            f"{_LATTICE}::test_gaussian_lattice_delta_at_tiny_distances",
        ),
        "the Gaussian calibration ignores the rounding to the lattice: two inputs at distance sens can be "
        "released sens + g sqrt(dim) apart, beyond the delta claimed",
        (1, 2),
    ),
    Mutant(
        "gaussian-sigma-passed-as-variance",
        "sampler",
        "noise/mechanisms.py",
        "z = discrete_gaussian(calibration.w**2, v.shape, rng)",
        "z = discrete_gaussian(calibration.w, v.shape, rng)",
        (f"{_NOISE}::test_gaussian_mechanism_calibration",),
        "the sampler is given the width where it wants the variance: sigma becomes sqrt(sigma) lattice steps",
        (3,),
    ),
    Mutant(
        "zcdp-delta-rho-halved",
        "conversion",
        "noise/mechanisms.py",
        "return (a - 1) * (a * rho - eps) + (a - 1) * math.log1p(-1 / a) - math.log(a)",
        "return (a - 1) * (a * rho / 2 - eps) + (a - 1) * math.log1p(-1 / a) - math.log(a)",
        (
            f"{_NOISE}::test_zcdp_delta_is_the_renyi_conversion",
            f"{_NOISE}::test_gaussian_mechanism_calibration",
        ),
        "the zCDP-to-DP conversion halves rho (the 1/2 of D^2 / (2 sigma^2) counted twice): every per-distance "
        "delta (delta_at) is under-stated and the calibration falls to the continuous Gaussian's sigma, which "
        "the discrete Gaussian's accounting does not cover",
        (2, 3),
    ),
    Mutant(
        "zcdp-delta-renyi-factor",
        "conversion",
        "noise/mechanisms.py",
        "return (a - 1) * (a * rho - eps) + (a - 1) * math.log1p(-1 / a) - math.log(a)",
        "return (a - 1) * (a * rho - eps) + a * math.log1p(-1 / a) - math.log(a)",
        (f"{_NOISE}::test_zcdp_delta_is_the_renyi_conversion",),
        "the (a-1)^(a-1) / a^a term of the conversion is taken as (1 - 1/a)^a / a: a delta below the true "
        "bound, so Gaussian releases are under-noised",
        (3,),
    ),
    Mutant(
        "gaussian-delta-margin-wrong-side",
        "threshold",
        "noise/mechanisms.py",
        "goal = target * (1 - _DELTA_MARGIN)",
        "goal = target * (1 + _DELTA_MARGIN)",
        (f"{_NOISE}::test_gaussian_mechanism_calibration",),
        "the Gaussian calibration aims just above the requested delta instead of just below: its accounted "
        "delta exceeds the request (only the calibration's final check, which then refuses every release, "
        "stands between it and a false claim)",
    ),
    Mutant(
        "gaussian-truncation-term-without-exp",
        "threshold",
        "noise/mechanisms.py",
        "return dim * (1 + math.exp(min(float(epsilon), _GAUSS_MAX_EPSILON))) * _TRUNCATION_DELTA",
        "return dim * 2 * _TRUNCATION_DELTA",
        (f"{_LATTICE}::test_gaussian_refuses_what_its_accounting_cannot_certify",),
        "the delta term of the sampler's truncation at 32 sigma forgets its e^epsilon factor: at large "
        "epsilon the truncation is no longer covered",
    ),
    # ------------------------------------------------------------------ exact samplers
    Mutant(
        "discrete-laplace-scale-off-by-one",
        "sampler",
        "noise/samplers.py",
        "src._fill(_dlap_batch, out.reshape(-1), _DLAP_WORDS, np.int64(t))",
        "src._fill(_dlap_batch, out.reshape(-1), _DLAP_WORDS, np.int64(t - 1))",
        (f"{_NOISE}::test_discrete_laplace_matches_pmf_and_rejects_wrong_scale",),
        "the discrete Laplace sampler draws at scale t - 1: every Laplace release, the distinct count and the "
        "set union get less noise than calibrated (at small t, e.g. t = 3, a third less)",
    ),
    Mutant(
        "randomized-round-exponent-off-by-one",
        "sampler",
        "noise/samplers.py",
        "E = np.ascontiguousarray((53 - e).astype(np.int64))",
        "E = np.ascontiguousarray((54 - e).astype(np.int64))",
        (f"{_LATTICE}::test_randomized_round_is_exact_and_unbiased",),
        "randomized rounding goes up with probability frac(x) / 2: the rounding is biased and the metric "
        "guarantee's interpolation argument fails",
    ),
    Mutant(
        "knorm-nearest-rounding",
        "sampler",
        "noise/knorm.py",
        "k = randomized_round(m / calibration.granularity, src)",
        "k = np.rint(m / calibration.granularity).astype(np.int64)",
        (
            f"{_LATTICE}::test_knorm_mechanism_exact_l1_law_on_a_coarse_lattice",
            f"{_LATTICE}::test_knorm_mechanism_end_to_end_law",
        ),
        "the K-norm release rounds to the nearest lattice point: two inputs 1e-9 apart across a rounding "
        "boundary are a whole step apart, a loss of 1/t however small the distance (metric DP lost)",
        (1,),
    ),
    Mutant(
        "knorm-l1-sensitivity-forgotten",
        "sensitivity",
        "noise/knorm.py",
        "t = math.ceil(1 / math.log1p(g * eps / (sens * (1 + _SAFETY)))) + 1",
        "t = math.ceil(1 / math.log1p(g * eps / (1 + _SAFETY))) + 1",
        (f"{_LATTICE}::test_knorm_calibration_realizes_the_request",),
        "the l1 K-norm calibration ignores the sensitivity (takes it as 1): a release of sensitivity below 1 "
        "gets too little noise",
    ),
    Mutant(
        "knorm-l2-kappa-forgotten",
        "noise-scale",
        "noise/knorm.py",
        "T = math.ceil(probe.kappa() * b / g) + 1",
        "T = math.ceil(b / g) + 1",
        (f"{_LATTICE}::test_knorm_calibration_realizes_the_request",),
        "the l2 K-norm calibration uses the ideal K-norm scale, without the lattice law's factor kappa: "
        "its loss exceeds epsilon",
        (3,),
    ),
    # ------------------------------------------------------------------ selection
    Mutant(
        "exponential-mechanism-monotone-swapped",
        "sensitivity",
        "noise/selection.py",
        "c = ratio if monotone else ratio / 2\n    smax = max(fr)\n    gammas",
        "c = ratio / 2 if monotone else ratio\n    smax = max(fr)\n    gammas",
        (f"{_NOISE}::test_exponential_mechanism_exact_law",),
        "the exponential mechanism uses exp(eps s / Delta) for scores that are not monotone: it spends 2 epsilon",
        (2,),
    ),
    Mutant(
        "exponential-mechanism-score-sign",
        "sampler",
        "noise/selection.py",
        "gammas = [c * (smax - s) for s in fr]",
        "gammas = [c * (s - smax) for s in fr]",
        (f"{_NOISE}::test_exponential_mechanism_exact_law",),
        "the CDF inversion weighs candidates by exp(-eps s / (2 Delta)): the worst candidate is the likeliest",
        (2,),
    ),
    Mutant(
        "exponential-mechanism-uniform-one-bit-short",
        "sampler",
        "noise/selection.py",
        "ubits, u = 256, src.randbelow(1 << 256)",
        "ubits, u = 256, src.randbelow(1 << 255)",
        (f"{_NOISE}::test_exponential_mechanism_distribution",),
        "the uniform the CDF is inverted against lies in [0, 1/2): the mechanism's law is not the "
        "exponential mechanism's",
    ),
    Mutant(
        "permute-and-flip-forgets-half",
        "sensitivity",
        "noise/selection.py",
        "c = ratio if monotone else ratio / 2\n    smax = max(fr)\n    for i",
        "c = ratio\n    smax = max(fr)\n    for i",
        (f"{_NOISE}::test_permute_and_flip_exact_law", f"{_NOISE}::test_selection_mechanisms_exact_privacy_loss"),
        "permute-and-flip keeps candidates with exp(eps (s - s_max) / Delta) for scores that are not monotone: "
        "it spends 2 epsilon",
        (2,),
    ),
    Mutant(
        "bernoulli-exp-k-off-by-one",
        "sampler",
        "noise/selection.py",
        "if src.randbelow(k) != 0:",
        "if src.randbelow(k + 1) != 0:",
        (f"{_NOISE}::test_bernoulli_exp_exact_law",),
        "Bernoulli(exp(-gamma)) draws Bernoulli(gamma / (k + 1)) at step k: its law is no longer exp(-gamma), "
        "and permute-and-flip's acceptance with it",
    ),
    Mutant(
        "bernoulli-exp-whole-part-off-by-one",
        "sampler",
        "noise/selection.py",
        "for _ in range(whole):",
        "for _ in range(whole - 1):",
        (f"{_NOISE}::test_bernoulli_exp_exact_law",),
        "Bernoulli(exp(-gamma)) skips one factor exp(-1) for gamma >= 1: permute-and-flip accepts poor "
        "candidates e times too often",
    ),
    # ------------------------------------------------------------------ keyed per-user streams
    Mutant(
        "keyed-bound-purpose-reused",
        "keyed-purpose",
        "noise/keyed.py",
        'BOUND_PURPOSE = "set union: contribution bounding"',
        'BOUND_PURPOSE = "local-model item randomization"',
        (f"{_KEYED}::test_every_keyed_draw_reads_its_own_purpose",),
        "the items a person keeps are chosen with the same keyed words that randomize their items: two "
        "draws meant to be independent share one stream",
        (6,),
    ),
    Mutant(
        "keyed-sips-round-purpose-ignores-the-round",
        "keyed-purpose",
        "noise/keyed.py",
        'return f"{SIPS_BOUND_PURPOSE} {int(round_)}"',
        "return SIPS_BOUND_PURPOSE",
        (
            f"{_KEYED}::test_dp_sips_rounds_each_read_their_own_bounding_purpose",
            "tests/vocabulary/test_sips.py::test_the_release_s_rounds_keep_fresh_uniform_subsets",
        ),
        "every DP-SIPS round reads the same keyed words: a person keeps the same items round after round (of "
        "what is left) instead of a fresh random subset, so the rounds are not the algorithm's",
        (6,),
    ),
    Mutant(
        "keyed-sips-purpose-is-the-union-s",
        "keyed-purpose",
        "noise/keyed.py",
        'SIPS_BOUND_PURPOSE = "DP-SIPS: contribution bounding, round"',
        'SIPS_BOUND_PURPOSE = "set union: contribution bounding"',
        (f"{_KEYED}::test_every_keyed_draw_reads_its_own_purpose",),
        "DP-SIPS's rounds and the weighted union's bounding derive their purposes from one string: two "
        "draws meant to be independent are not kept apart by their purposes",
        (6,),
    ),
    Mutant(
        "keyed-keep-many-keeps-one-more",
        "contribution-bound",
        "noise/keyed.py",
        "for j in range(min(cap, sizes[i])):",
        "for j in range(min(cap + 1, sizes[i])):",
        (
            f"{_KEYED}::test_keyed_keep_for_many_users_is_the_per_user_choice",
            "tests/releases/test_engines_agree.py::test_memory_and_chunked_releases_are_identical_and_their_"
            "aggregates_right[vocabulary, DP-SIPS]",
        ),
        "the engines' batch bounding keeps cap + 1 items of a person: DP-SIPS's rounds exceed the "
        "contribution bound their noise is calibrated for",
        (4,),
    ),
    Mutant(
        "keyed-purpose-not-in-key-derivation",
        "keyed-purpose",
        "noise/keyed.py",
        'tail = len(p).to_bytes(4, "big") + p',
        'tail = b""',
        (f"{_KEYED}::test_every_keyed_draw_reads_its_own_purpose",),
        "the purpose is left out of the key derivation: every purpose reads the same per-user stream, so the "
        "rows sampled, the items randomized and the items kept are decided by the same words",
        (6,),
    ),
    Mutant(
        "keyed-int-key-encodes-as-string",
        "keyed-purpose",
        "noise/keyed.py",
        'return b"int\\x00" + str(int(user_key)).encode("ascii")',
        'return b"str\\x00" + str(int(user_key)).encode("ascii")',
        (f"{_KEYED}::test_key_encoding_is_canonical_and_type_tagged",),
        "the user key 1 and the user key '1' encode alike: two different users read one stream",
        (6,),
    ),
    Mutant(
        "keyed-iv-key-is-the-aes-key",
        "keyed-purpose",
        "noise/keyed.py",
        'hmac.new(master, _KEYED_STREAM_LABEL + b"iv\\x00" + tail, hashlib.sha256).digest(),',
        'hmac.new(master, _KEYED_STREAM_LABEL + b"aes\\x00" + tail, hashlib.sha256).digest(),',
        (
            f"{_KEYED}::test_purpose_keys_and_counter_blocks_are_distinct",
            f"{_KEYED}::test_stream_is_aes256_ctr_under_a_purpose_key_from_a_keyed_user_counter_block",
        ),
        "the counter-block key equals the AES key: one key serves two roles that the construction keeps apart",
        (6,),
    ),
    Mutant(
        "keyed-int-block-untagged",
        "keyed-purpose",
        "noise/keyed.py",
        "    blocks[:, 0] = _INT_TAG\n",
        "    blocks[:, 0] = 0\n",
        (f"{_KEYED}::test_stream_is_aes256_ctr_under_a_purpose_key_from_a_keyed_user_counter_block",),
        "an integer key's counter block is AES of the bare integer, not of its tagged block: the construction "
        "the documentation states is not the one run",
    ),
    Mutant(
        "keyed-one-int-key-off-by-one",
        "keyed-purpose",
        "noise/keyed.py",
        'int(user_keys[0]).to_bytes(8, "big", signed=True)',
        '(int(user_keys[0]) + 1).to_bytes(8, "big", signed=True)',
        (f"{_KEYED}::test_batches_of_many_users_read_each_users_own_stream",
         f"{_KEYED}::test_stream_is_aes256_ctr_under_a_purpose_key_from_a_keyed_user_counter_block"),
        "one person's stream (source(), the Spark executors' path) is person u + 1's stream in a batch: two "
        "persons read one stream, and the engines disagree",
        (4, 6),
    ),
    Mutant(
        "keyed-int-key-is-the-iv-key",
        "keyed-purpose",
        "noise/keyed.py",
        'hmac.new(master, _KEYED_STREAM_LABEL + b"int\\x00" + tail, hashlib.sha256).digest(),',
        'hmac.new(master, _KEYED_STREAM_LABEL + b"iv\\x00" + tail, hashlib.sha256).digest(),',
        (
            f"{_KEYED}::test_purpose_keys_and_counter_blocks_are_distinct",
            f"{_KEYED}::test_stream_is_aes256_ctr_under_a_purpose_key_from_a_keyed_user_counter_block",
        ),
        "the integer counter-block key equals the BLAKE2b counter-block key: one key serves two roles",
        (6,),
    ),
    Mutant(
        "keyed-int-range-takes-2-to-the-63",
        "keyed-purpose",
        "noise/keyed.py",
        "-(2**63) <= int(k) < 2**63",
        "-(2**63) <= int(k) <= 2**63",
        (f"{_KEYED}::test_stream_is_aes256_ctr_under_a_purpose_key_from_a_keyed_user_counter_block",
         f"{_KEYED}::test_purpose_keys_and_counter_blocks_are_distinct"),
        "the user key 2^63 takes the int64 block and wraps to -2^63: two users read one stream",
        (6,),
    ),
    Mutant(
        "keyed-uint64-array-all-int64",
        "keyed-purpose",
        "noise/keyed.py",
        '(arr.dtype.kind == "u" and (not arr.size or arr.max() < 2**63))',
        '(arr.dtype.kind == "u")',
        (f"{_KEYED}::test_batches_of_many_users_read_each_users_own_stream",),
        "a uint64 array's keys past 2^63 wrap into int64: the user 2^64 - 1 reads the stream of the user -1, and "
        "another stream than one at a time (the Spark executors)",
        (4, 6),
    ),
    Mutant(
        "keyed-string-array-encoding-untagged",
        "keyed-purpose",
        "noise/keyed.py",
        'return [b"str\\x00" + v.encode("utf-8", "surrogatepass") for v in arr.tolist()]',
        'return [v.encode("utf-8", "surrogatepass") for v in arr.tolist()]',
        (f"{_KEYED}::test_batches_of_many_users_read_each_users_own_stream",),
        "an array of string user keys (the in-memory and chunked engines) is encoded without its type tag: "
        "those users read other streams than the same users one at a time (the Spark executors)",
        (4, 6),
    ),
    Mutant(
        "keyed-keep-one-item-too-many",
        "contribution-bound",
        "noise/keyed.py",
        'return np.sort(np.argsort(words, kind="stable")[: int(cap)])',
        'return np.sort(np.argsort(words, kind="stable")[: int(cap) + 1])',
        (f"{_KEYED}::test_keyed_keep_keeps_a_uniform_subset_of_exactly_cap",),
        "a person holding more than max_items items keeps max_items + 1 of them: the set union's sensitivity "
        "is exceeded",
        (1,),
    ),
    Mutant(
        "keyed-sample-never-the-last-item",
        "sampler",
        "noise/keyed.py",
        "return streams.source(user_key, SAMPLE_PURPOSE).integers(int(size), size=int(s))",
        "return streams.source(user_key, SAMPLE_PURPOSE).integers(max(1, int(size) - 1), size=int(s))",
        (f"{_KEYED}::test_keyed_sample_indices_sample_uniformly_with_replacement",),
        "BoundedEMDReduction never samples a user's last item: the sample is not uniform, and Lemma 5.2 does not apply",
    ),
    # ------------------------------------------------------------------ conversions between guarantees
    Mutant(
        "group-privacy-linear-delta",
        "conversion",
        "privacy/guarantees.py",
        "d = delta * math.expm1(k * e) / math.expm1(e)",
        "d = delta * k",
        (
            f"{_GUARANTEES}::test_group_privacy_formula_and_paper_fact_5_1",
            f"{_GUARANTEES}::test_discrete_emd_at_distance",
        ),
        "group privacy over k steps charges k delta instead of delta (e^(k eps) - 1) / (e^eps - 1): every "
        "discrete d_EM-DP and add/remove-to-replace conversion under-states its delta",
        (3,),
    ),
    Mutant(
        "add-remove-to-replace-one-step",
        "conversion",
        "privacy/guarantees.py",
        "eps, delta = group_privacy(ul.epsilon, ul.delta, 2)",
        "eps, delta = group_privacy(ul.epsilon, ul.delta, 1)",
        (f"{_GUARANTEES}::test_add_remove_release_costs_group_privacy_for_two_steps_under_replace_and_it_is_tight",),
        "an add/remove-one-user release is charged its own epsilon under a replace-one-user budget, though "
        "replacing a user is two add/remove steps: half the true cost",
    ),
    Mutant(
        "discrete-emd-floor-steps",
        "conversion",
        "privacy/guarantees.py",
        "k = max(1, math.ceil(d / self.r - 1e-12))",
        "k = max(1, math.floor(d / self.r))",
        (f"{_GUARANTEES}::test_discrete_emd_at_distance",),
        "Fact 5.1 counts floor(d / r) steps of group privacy: datasets between two multiples of r are "
        "charged one step too few",
    ),
    Mutant(
        "composed-delta-max-not-sum",
        "conversion",
        "privacy/guarantees.py",
        "total = a.delta + b.delta",
        "total = max(a.delta, b.delta)",
        (f"{_GUARANTEES}::test_composition_adds",),
        "basic composition keeps the larger delta instead of adding them",
    ),
    # ------------------------------------------------------------------ the shuffling and reduction accountant
    Mutant(
        "theorem-4-4-alpha-halved",
        "conversion",
        "privacy/accounting.py",
        "return 0.5 * m * np.asarray(alpha0) * shuffle_constant(alpha0, m, M, delta)",
        "return 0.25 * m * np.asarray(alpha0) * shuffle_constant(alpha0, m, M, delta)",
        (f"{_ACCOUNTING}::test_theorem_4_4_is_the_papers_closed_form",),
        "Theorem 4.4's alpha = h'(0) counts the tanh(x / 2) ~ x / 2 halving twice: PrivEMDItemWise claims half "
        "its alpha (the exact checks see it on few configurations: the theorem is 10-80x loose on most)",
        (3,),
    ),
    Mutant(
        "theorem-4-4-delta-prime-without-exp",
        "conversion",
        "privacy/accounting.py",
        "return min(delta * math.exp(min(h1, 700.0)), 1.0)",
        "return min(delta, 1.0)",
        (f"{_ACCOUNTING}::test_theorem_4_4_is_the_papers_closed_form",),
        "Theorem 4.4's delta' = delta e^{h(M; m, m)} is reported as the inner delta: a delta' many orders of "
        "magnitude below the true one",
        (3,),
    ),
    Mutant(
        "shuffle-constant-log-without-4",
        "conversion",
        "privacy/accounting.py",
        "L = np.log(4.0 * np.asarray(x0, dtype=np.float64)) - np.log(np.asarray(delta, dtype=np.float64))",
        "L = np.log(np.asarray(x0, dtype=np.float64)) - np.log(np.asarray(delta, dtype=np.float64))",
        (f"{_ACCOUNTING}::test_theorem_4_4_is_the_papers_closed_form",),
        "Theorem 4.3's C uses ln(x0 / delta) instead of ln(4 x0 / delta): every shuffle bound is too small",
        (3,),
    ),
    Mutant(
        "calibration-theorem-4-4-accepts-twice-the-target",
        "budget-split",
        "privacy/accounting.py",
        "if float(_alpha_44(a0, m, M, delta)) > alpha:",
        "if float(_alpha_44(a0, m, M, delta)) > 2 * alpha:",
        (f"{_ACCOUNTING}::test_calibration_meets_target_every_route",),
        "the Theorem 4.4 calibration accepts an alpha_0 whose alpha is up to twice the target: "
        "PrivEMDItemWise calibrated to (alpha, delta') spends up to 2 alpha",
        (3,),
    ),
    Mutant(
        "numerical-bound-per-step-delta",
        "conversion",
        "privacy/accounting.py",
        "delta_s = delta / m",
        "delta_s = delta",
        (f"{_ACCOUNTING}::test_numerical_bound_holds_exactly_and_beats_theorem_4_4",),
        "the numerical bound gives each of the m hybrid steps the whole delta: its delta' is m times too small",
    ),
    Mutant(
        "reduction-lemma-5-2-misprint",
        "conversion",
        "privacy/accounting.py",
        "return (1 + math.sqrt(2)) * r + 3.0 / s * math.log(1 / delta)",
        "return (1 + math.sqrt(2)) * r + 3.0 / 8 * math.log(1 / delta)",
        (f"{_ACCOUNTING}::test_theorem_5_3_and_1_3",),
        "Lemma 5.2's distance uses the paper's misprinted 3/8 ln(1/delta) instead of (3/s) ln(1/delta)",
    ),
    Mutant(
        "reduction-projection-delta-dropped",
        "conversion",
        "privacy/accounting.py",
        "total = inner.delta + (delta if c < 1 else 0.0)",
        "total = inner.delta",
        (f"{_ACCOUNTING}::test_reduction_guarantee_of_an_inner_release",),
        "BoundedEMDReduction's guarantee omits the delta of Lemma 5.2's event: the projection's failure "
        "probability is never charged",
    ),
    # ------------------------------------------------------------------ composition
    Mutant(
        "tight-epsilon-below-the-parts-delta",
        "conversion",
        "privacy/composition.py",
        "    if delta >= basic_delta:  # basic composition holds too: report the better of the two\n",
        "    if True:  # basic composition holds too: report the better of the two\n",
        (f"{_COMPOSITION}::test_basic_composition_bounds_it_and_deltas_below_the_parts_are_infinite",),
        "tight_epsilon reports basic composition's epsilon for a delta below the parts' own deltas, where no "
        "epsilon holds",
    ),
    Mutant(
        "gaussian-loss-sigma-as-variance",
        "conversion",
        "privacy/composition.py",
        "a = sensitivity / (2 * sigma)",
        "a = sensitivity / (2 * sigma**2)",
        (f"{_COMPOSITION}::test_gaussian_and_laplace_losses_charge_their_exact_parameters",),
        "a stated Gaussian loss is charged the delta of a Gaussian whose sigma is its variance: far too small "
        "for sigma > 1",
    ),
    # ------------------------------------------------------------------ the auditor
    Mutant(
        "audit-hockey-stick-one-direction",
        "refusal",
        "audit/exact.py",
        "return float(max(np.maximum(P - e * Q, 0).sum(), np.maximum(Q - e * P, 0).sum()))",
        "return float(np.maximum(P - e * Q, 0).sum())",
        ("tests/test_audit.py::test_hockey_stick_is_the_larger_of_both_directions",),
        "the exact audits measure only D(P || Q): a leak only the reverse direction shows passes every audit",
    ),
    Mutant(
        "bounded-central-read-as-any-replacement",
        "conversion",
        "privacy/guarantees.py",
        "            nb = Neighbours.REPLACE_USER_SAME_SIZE  # the central model is bounded",
        "            nb = Neighbours.REPLACE_USER  # the central model is bounded",
        (f"{_GUARANTEES}::test_a_bounded_guarantee_keeps_its_same_size_qualifier_through_every_conversion",),
        "a bounded central d_EM-DP release is charged to a budget for replacing a user's data by any data: the "
        "ledger claims protection for pairs of different sizes, where the release protects nothing",
    ),
    Mutant(
        "bounded-local-read-as-any-two-inputs",
        "conversion",
        "privacy/guarantees.py",
        "nb = Neighbours.TWO_INPUTS_SAME_SIZE if self.bounded else Neighbours.ANY_TWO_INPUTS",
        "nb = Neighbours.ANY_TWO_INPUTS",
        (f"{_GUARANTEES}::test_a_bounded_guarantee_keeps_its_same_size_qualifier_through_every_conversion",),
        "a bounded local d_EM-DP release loses its equal-sizes qualifier at d_EM = 1",
    ),
    Mutant(
        "same-size-local-charged-to-any-two-inputs",
        "conversion",
        "privacy/guarantees.py",
        "    (_LOCAL, _LOCAL_SAME): 1,\n",
        "    (_LOCAL, _LOCAL_SAME): 1,\n    (_LOCAL_SAME, _LOCAL): 1,\n",
        (f"{_GUARANTEES}::test_a_bounded_guarantee_keeps_its_same_size_qualifier_through_every_conversion",),
        "a local guarantee for inputs of the same size is charged to a budget for any two inputs",
    ),
    # ------------------------------------------------------------------ the one delta validator (issue 34)
    Mutant(
        "delta-one-accepted",
        "refusal",
        "privacy/params.py",
        "if math.isnan(d) or d < 0 or d >= 1:",
        "if math.isnan(d) or d < 0 or d > 1:",
        (
            f"{_PARAMS}::test_check_delta_refuses_what_promises_nothing",
            f"{_PARAMS}::test_the_accountant_and_the_guarantees_refuse_delta_1_with_the_same_message",
            "tests/cli/test_delta.py::test_a_delta_that_promises_nothing_is_refused_and_charges_nothing",
        ),
        "a release, a guarantee or the ledger accepts delta = 1, a guarantee that promises nothing (every "
        "mechanism is (0, 1)-DP), and reports and charges it as if it protected someone",
    ),
    Mutant(
        "delta-warning-ceiling-raised",
        "refusal",
        "privacy/params.py",
        "if not d > DELTA_CEILING:",
        "if not d > 10 * DELTA_CEILING:",
        (
            f"{_PARAMS}::test_the_warning_fires_above_the_public_ceiling_only_and_names_the_caller",
            f"{_PARAMS}::test_every_release_warns_on_a_large_delta_before_reading_whatever_the_data",
        ),
        "a delta between 1e-3 and 1e-2 (above 1/n on any data set of 1,000 persons or more) is released "
        "without the documented warning",
    ),
]
