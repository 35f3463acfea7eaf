"""All randomness used by userdp, in one package.

* :mod:`.sources` -- :class:`RandomSource` (the OS CSPRNG by default) and :func:`resolve_rng`;
* :mod:`.kernels` -- the numba kernels of the exact samplers;
* :mod:`.samplers` -- exact integer noise (discrete Laplace, discrete Gaussian, Polya shares, randomized rounding);
* :mod:`.mechanisms` -- Laplace and Gaussian noise on a lattice, their calibrations and accounting;
* :mod:`.knorm` -- lattice K-norm noise (l1, and the exact l2 law :class:`L2LatticeLaw`);
* :mod:`.selection` -- the exponential mechanism, permute-and-flip, sampling from cumulative tables;
* :mod:`.keyed` -- keyed per-user streams (:class:`KeyedStreams`), shared by every engine.

Design
------
* **Source of randomness.** Every sampler draws 64-bit words from a :class:`RandomSource`. The
  default source is the operating system's CSPRNG (``os.urandom``); large batches are expanded with
  AES-256-CTR under a fresh key from ``os.urandom`` per batch (NIST SP 800-90A CTR-DRBG style). A seeded source
  (NumPy's PCG64) exists for experiments and tests and is used only when the caller passes it
  (or an ``int`` seed, or a :class:`numpy.random.Generator`) explicitly.
* **Exact samplers, exact streams.** Every sampler is an algorithm on an unbounded stream of uniform words
  in which integer arithmetic alone decides each output; its law is the law of that algorithm, with no
  truncation and no conditioning. Words are drawn in batches; when a batch runs out in the middle of a
  sample, the sample is *continued* on the same words plus fresh ones (the kernels are deterministic
  functions of the stream), never restarted, so running out of words cannot bias the output.
  Discrete Laplace and discrete Gaussian: Canonne, Kamath & Steinke, "The Discrete Gaussian for
  Differential Privacy" (NeurIPS 2020), Algorithms 1-3. Kernels are compiled with numba; where an
  intermediate integer would leave 63 bits, the sample is finished by the same algorithm on Python integers.
* **Floating-point safety.** Real-valued releases never compute ``value + float_noise`` (the
  floating-point attack of Mironov, CCS 2012). A value is first moved to a lattice ``g * Z`` (``g`` a power
  of two chosen from the *public* noise scale), exact integer noise is added to the integer lattice
  coordinate, and the result is converted back to a float, which is post-processing. This is the approach
  of OpenDP and of Google's differential-privacy library. Two roundings are used:

  - *deterministic* rounding (user-level DP: Laplace, Gaussian, histograms, heatmaps): rounding moves
    a coordinate by at most ``g / 2``, so the calibration adds ``g`` per coordinate to the sensitivity
    (``d g`` in l1, ``sqrt(d) g`` in l2). The guarantee is exact for the stated sensitivity.
  - *randomized* rounding (metric DP: d_EM releases and item randomizers, whose guarantee must shrink in
    proportion to the distance however small it is): ``x/g`` goes to ``floor(x/g) + Bernoulli(frac(x/g))``,
    where the Bernoulli of the exact dyadic fraction is decided by comparing uniform bits. The output law is
    the multilinear interpolation of the lattice noise law, so its privacy loss is Lipschitz in ``x`` with
    an explicit constant (see :class:`KNormCalibration`); deterministic rounding would add a constant
    ``g / scale`` to the loss of every pair, however close.
* **Lattice K-norm noise.** l1: independent discrete Laplace coordinates. l2 (dimension >= 2): the exact
  lattice law ``P(z) ∝ exp(-ceil(s sqrt(|z|^2 + c^2)) / (s T))`` (:class:`L2LatticeLaw`), sampled by
  an exact rejection sampler built from discrete-Laplace, geometric and discrete-Gaussian draws; every
  lattice point has positive probability. The K-norm mechanism of Hardt & Talwar (2010) is its continuous
  limit; the smoothing radius ``c`` and the granularity ``s`` keep the guarantee within 0.2% of it.
  (The l-infinity K-norm is not offered: no exact lattice sampler is known to userdp whose loss stays
  proportional to the l-infinity distance under randomized rounding.)
* **Selection** (exponential mechanism, permute-and-flip) is exact: scores, epsilon and the sensitivity
  are turned into exact rationals. The exponential mechanism inverts its CDF against a lazily refined
  uniform with interval arithmetic (constant work except with probability below ``m 10^-38``);
  permute-and-flip uses exact ``Bernoulli(exp(-gamma))`` draws with Python integers.

Negligible deviations (documented, not hidden)
----------------------------------------------
* The discrete Gaussian sampler rejects discrete-Laplace proposals beyond ``32 sigma`` (acceptance
  probability below ``exp(-480)``): its law is the discrete Gaussian conditioned on ``|x| <= 32 sigma``.
  The truncated and untruncated laws differ in total variation by at most ``t = 2 exp(-480)`` per
  coordinate, so the Gaussian mechanism's delta gains ``(1 + e^epsilon) t`` per coordinate, which the
  calibration counts; it refuses ``epsilon > 300`` (where that term could matter) and ``delta < 1e-15``
  (where the lattice step of ``2^-54 sigma`` and the floating-point accounting could not certify delta).
  Inside the l2 lattice sampler it only rescales a
  normalising constant by less than ``1e-200`` (accounted for in ``kappa``).
* The multivariate discrete Gaussian's privacy curve differs from the continuous Gaussian's by a term of
  order ``d exp(-2 pi^2 sigma^2)`` in lattice units (Canonne, Kamath & Steinke 2020, section 4); with
  ``sigma >= 2^54`` lattice steps this is zero to every representable digit.
"""

from __future__ import annotations

from .keyed import (
    KeyedBatch,
    KeyedKeep,
    KeyedSource,
    KeyedStreams,
    encode_user_key,
    keyed_keep,
    keyed_randomize,
    keyed_sample_indices,
    sips_round_purpose,
)
from .knorm import KNormCalibration, L2LatticeLaw, calibrate_knorm, knorm_mechanism, knorm_release, lattice_knorm_noise
from .mechanisms import (
    GaussianCalibration,
    LaplaceCalibration,
    add_gaussian,
    add_laplace,
    analytic_gaussian_sigma,
    calibrate_gaussian,
    calibrate_gaussian_metric,
    calibrate_laplace,
    gaussian_delta,
    gaussian_mechanism,
    gaussian_noise,
    laplace_mechanism,
    laplace_noise,
    metric_gaussian_sup_delta,
    zcdp_delta,
)
from .samplers import discrete_gaussian, discrete_laplace, polya, randomized_round
from .selection import (
    bernoulli_exp,
    exponential_mechanism,
    permute_and_flip,
    permute_and_flip_probabilities,
    sample_cumulative,
)
from .sources import RandomSource, RngLike, resolve_rng, seeded

__all__ = [
    "RandomSource",
    "RngLike",
    "resolve_rng",
    "seeded",
    "discrete_laplace",
    "discrete_gaussian",
    "polya",
    "randomized_round",
    "LaplaceCalibration",
    "GaussianCalibration",
    "calibrate_laplace",
    "calibrate_gaussian",
    "add_laplace",
    "add_gaussian",
    "laplace_mechanism",
    "gaussian_mechanism",
    "laplace_noise",
    "gaussian_noise",
    "analytic_gaussian_sigma",
    "gaussian_delta",
    "zcdp_delta",
    "calibrate_gaussian_metric",
    "metric_gaussian_sup_delta",
    "L2LatticeLaw",
    "lattice_knorm_noise",
    "knorm_release",
    "knorm_mechanism",
    "KNormCalibration",
    "calibrate_knorm",
    "exponential_mechanism",
    "permute_and_flip",
    "permute_and_flip_probabilities",
    "bernoulli_exp",
    "sample_cumulative",
    "KeyedStreams",
    "keyed_sample_indices",
    "keyed_keep",
    "KeyedKeep",
    "sips_round_purpose",
    "keyed_randomize",
    "KeyedBatch",
    "KeyedSource",
    "encode_user_key",
]
