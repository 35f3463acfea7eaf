"""What a Session charges (issue 37, item 4): the tight total (privacy loss distributions, zCDP where a
release states it) for an ``(epsilon, delta)`` budget, pessimistic so that it never understates the loss; the
sum of the stated ``rho`` for a zCDP budget; and old ledgers read as they were."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from userdp import releases
from userdp.errors import BudgetExceededError, ParameterError
from userdp.noise import calibrate_gaussian, zcdp_delta
from userdp.privacy import ZCDP, ZCDP_TV_ALLOWANCE, ApproxDP, Neighbours, PureDP, Session
from userdp.privacy.composition import (
    DPLoss,
    GaussianLoss,
    LaplaceLoss,
    ZCDPLoss,
    basic_epsilon,
    tight_epsilon,
    zcdp_delta_bound,
    zcdp_epsilon,
)

AR, REPLACE = Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER


def _optimal_delta(eps: float, k: int, eps_g: float) -> float:
    """The exact delta at eps_g of the k-fold composition of eps-DP (Kairouz, Oh & Viswanath 2015, Theorem 3.3)."""
    total = 0.0
    for l in range(k + 1):  # noqa: E741
        total += math.comb(k, l) * max(0.0, math.exp((k - l) * eps) - math.exp(eps_g + l * eps))
    return total / (1 + math.exp(eps)) ** k


@pytest.fixture(scope="module")
def vocabulary_release(tmp_path_factory):
    """One Gaussian vocabulary release at (1, 1e-6), by the library's default path (weighted union, max_items
    chosen privately, counts)."""
    path = tmp_path_factory.mktemp("v") / "words.csv"
    rows = ["person,word"] + [f"p{i % 1000},w{(i * 7) % 13}" for i in range(8000)]
    path.write_text("\n".join(rows) + "\n")
    return releases.vocabulary(path, 1.0, 1e-6, user="person", item="word", rng=3)


def _fill(session: Session, rel, stated: bool = True) -> int:
    """Charge ``rel`` until the session refuses; the refusal records nothing. Returns how many fit."""
    n = 0
    while True:
        before = list(session.ledger)
        try:
            session.charge(rel.guarantee, "vocabulary", rel.mechanism, losses=rel.losses if stated else ())
        except BudgetExceededError:
            assert session.ledger == before
            return n
        n += 1
        assert n < 1000


def test_the_gaussian_vocabulary_release_states_its_zcdp_guarantee(vocabulary_release):
    """The release states one zCDP loss: rho at least the sum of its steps' rho as drawn (the bound's choice
    epsilon^2 / 2, the set's histogram 1 / (2 sd^2) in persons' weight, the counts' sqrt(max_items)^2 /
    (2 sd^2)) and within 1e-5 of it; delta the threshold's quarter of delta; implying its guarantee."""
    rel = vocabulary_release
    (loss,) = rel.losses
    p = rel.params
    assert p["max_items_chosen"] and p["count_fraction"] == 0.5
    drawn = (
        p["epsilon_bound"] ** 2 / 2 + 1 / (2 * p["noise_sd"] ** 2) + p["max_items"] / (2 * p["count_sd"] ** 2)
    )
    assert drawn <= loss.rho <= drawn * (1 + 1e-5)
    assert loss.delta == pytest.approx(1e-6 / 4, rel=1e-12) and 0 < loss.tv < 1e-200
    eps, delta = loss.epsilon_delta()
    assert eps == 1.0 and delta <= 1e-6
    assert rel.guarantee == ApproxDP(1.0, 1e-6, AR) and len(rel.value["items"]) > 0
    laplace = releases.vocabulary(
        _table(), 1.0, 1e-6, user="person", item="word", noise="laplace", rng=1
    )  # Laplace noise: nothing stated beyond its (epsilon, delta)
    assert laplace.losses == ()


def _table():
    import pyarrow as pa

    return pa.table({"person": [f"p{i % 30}" for i in range(200)], "word": [f"w{i % 11}" for i in range(200)]})


def test_the_counts_rho_bound_covers_every_dimension():
    """The counts' noise is calibrated for the number of released items, known after the data are read: the
    stated rho bounds the calibration's rho at every dimension, and is not loose."""
    from userdp.vocabulary.union import gaussian_rho_bound

    for eps, delta, sens in [(0.49, 5e-7, 8192**0.5), (0.1, 1e-9, 3.0), (2.0, 1e-4, 1.0)]:
        bound = gaussian_rho_bound(eps, delta)
        rhos = [calibrate_gaussian(sens, eps, delta, dim=d).rho_at(sens) for d in (1, 7, 1000, 2**20, 2**31)]
        assert max(rhos) <= bound <= max(rhos) * (1 + 1e-5)


def test_a_session_admits_gaussian_releases_basic_composition_would_refuse(vocabulary_release):
    """(1, 1e-6) Gaussian vocabulary releases in a (4, 1e-5) budget: basic composition admits 4; the tight total
    (zCDP of the stated losses, converted by Canonne, Kamath & Steinke) admits 28, and refuses the 29th,
    recording nothing. Without the stated losses, the worst-case PLD of (1, 1e-6) admits 4 as well."""
    rel = vocabulary_release
    s = Session(ApproxDP(4.0, 1e-5, AR))
    assert _fill(s, rel) == 28
    tight, at = s.tight_spent()
    assert at == 1e-5 and 3.9 < tight <= 4.0
    assert s.basic_spent() == pytest.approx((28.0, 28e-6))
    assert s.spent().epsilon == 28.0 and s.remaining() is None  # basic composition: far over the budget
    assert _fill(Session(ApproxDP(4.0, 1e-5, AR)), rel, stated=False) == 4
    # the charged total is sound: the zCDP part's conversion holds at the charged epsilon
    (loss,) = rel.losses
    room = 1e-5 - 28 * loss.delta
    assert zcdp_delta(28 * loss.rho, tight) <= room * (1 + 1e-9)


def test_a_release_over_even_the_tight_total_is_refused():
    """Two pure 0.6-DP releases compose to 1.2 at delta 1e-5 whatever the accounting: a (1, 1e-5) budget refuses
    the second, records nothing, and the refusal names the tight total."""
    s = Session(ApproxDP(1.0, 1e-5, AR))
    s.charge(PureDP(0.6), "first")
    with pytest.raises(BudgetExceededError, match="by tight composition, over the budget"):
        s.charge(PureDP(0.6), "second")
    assert len(s.ledger) == 1 and not s.can_spend(PureDP(0.6))


@pytest.mark.parametrize(("eps", "k", "delta"), [(0.123457, 40, 1e-5), (0.0333333, 120, 1e-6), (0.77777, 8, 1e-3)])
def test_the_charged_total_never_understates_the_exact_optimum(eps, k, delta):
    """k pure eps-DP releases (epsilons off the discretization grid, where rounding matters): the total a session
    charges is a valid epsilon for the exact optimal composition (Kairouz et al.) at its delta, within 0.02 of
    the smallest one, and at most basic composition's."""
    s = Session(ApproxDP(1000.0, delta, AR))
    for _ in range(k):
        s.charge(PureDP(eps), "q")
    got, at = s.tight_spent()
    assert at == delta and got <= k * eps
    assert _optimal_delta(eps, k, got) <= delta * (1 + 1e-9)  # never below the true total
    assert _optimal_delta(eps, k, got - 0.02) > delta  # and tight


def test_the_pld_estimates_are_pessimistic():
    """A Laplace mechanism of scale 2 (epsilon_0 = 1/2) has delta(e) = 1 - e^((e - 1/2) / 2) exactly: the epsilon
    charged at delta 0.05 is at least 1/2 + 2 ln 0.95, and at most 1e-3 more; ten of them are at least what a
    10x finer pessimistic discretization gives."""
    exact = 0.5 + 2 * math.log(0.95)
    got = tight_epsilon([LaplaceLoss(2.0)], 0.05)
    assert exact <= got <= exact + 1e-3
    from dp_accounting.pld import privacy_loss_distribution as pld

    fine = pld.from_laplace_mechanism(2.0, value_discretization_interval=1e-5).self_compose(10)
    assert tight_epsilon([LaplaceLoss(2.0)] * 10, 1e-6) >= fine.get_epsilon_for_delta(1e-6)


def test_the_zcdp_conversion_is_sound_and_tight():
    """zcdp_epsilon(rho, delta) is an epsilon the exact conversion (noise.zcdp_delta, Canonne, Kamath & Steinke
    2020) accepts; at least the Gaussian mechanism's exact epsilon (that mechanism is exactly rho-zCDP, so no
    valid conversion can go below it); at most the classic rho + 2 sqrt(rho ln(1/delta))."""
    from userdp.privacy.composition import _gaussian_delta

    for rho, delta in [(0.01, 1e-6), (0.3, 1e-5), (2.0, 1e-9), (1e-4, 1e-3)]:
        e = zcdp_epsilon(rho, delta)
        assert zcdp_delta(rho, e) <= delta * (1 + 1e-9)
        assert zcdp_delta_bound(rho, e) <= delta * (1 + 1e-9)
        assert _gaussian_delta(1 / math.sqrt(2 * rho), 1.0, e) <= delta  # Balle & Wang's exact Gaussian delta
        assert e <= rho + 2 * math.sqrt(rho * math.log(1 / delta))
        assert zcdp_delta(rho, 0.95 * e) > delta  # and tight: 5% less is refused by the exact conversion
    assert zcdp_epsilon(0.0, 1e-6) == 0.0 and zcdp_epsilon(0.1, 0.0) == math.inf


def test_the_tight_total_is_at_most_basic_and_mixes_groups_soundly():
    """A mixed ledger (pure, approximate and zCDP parts): the tight total is at most basic composition's, and at
    least the PLD composition of the Gaussian parts' exact Gaussian PLDs (a zCDP part of rho stated by a
    Gaussian is at least as lossy as that Gaussian)."""
    zc = ZCDPLoss(0.02, 0.0, 0.0, 1.0)
    parts = [DPLoss(0.3), DPLoss(0.2, 1e-7), zc, zc, zc]
    got = tight_epsilon(parts, 1e-5)
    basic, basic_delta = basic_epsilon(parts)
    assert basic_delta <= 1e-5 and got <= basic
    gaussian = GaussianLoss(1 / math.sqrt(2 * 0.02))
    assert got >= tight_epsilon([DPLoss(0.3), DPLoss(0.2, 1e-7)] + [gaussian] * 3, 1e-5) - 1e-3
    with pytest.raises(ParameterError):
        ZCDPLoss(-1.0)


def test_a_zcdp_budget_adds_the_stated_rho_and_refuses_what_states_none(vocabulary_release, tmp_path):
    """A 1e-5-approximately 0.1-zCDP budget takes floor(0.1 / rho) vocabulary releases (their deltas, 2.5e-7
    each, fit); it refuses a release that states no zCDP guarantee, one of another relation, and one that
    overspends, each recording nothing; it is saved and read back."""
    rel = vocabulary_release
    (loss,) = rel.losses
    budget = ZCDP(0.1, 1e-5, AR, ZCDP_TV_ALLOWANCE)
    s = Session(budget)
    assert _fill(s, rel) == math.floor(0.1 / loss.rho) == 8
    assert s.spent().rho == pytest.approx(8 * loss.rho, rel=1e-12) and s.spent().delta == pytest.approx(2e-6)
    t = Session(budget)
    with pytest.raises(BudgetExceededError, match="states no zCDP guarantee"):
        t.charge(rel.guarantee, "v")
    with pytest.raises(BudgetExceededError, match="states no zCDP guarantee"):
        t.charge(PureDP(0.1), "laplace", losses=[LaplaceLoss(10.0)])
    with pytest.raises(BudgetExceededError, match="zCDP is not converted"):
        t.charge(ApproxDP(1.0, 1e-6, REPLACE), "v", losses=rel.losses)
    assert t.ledger == [] and not t.can_spend(rel.guarantee) and t.can_spend(rel.guarantee, rel.losses)
    small = Session(ZCDP(0.1, 1e-7, AR, ZCDP_TV_ALLOWANCE))  # the approximate delta, 2.5e-7, does not fit
    with pytest.raises(BudgetExceededError, match="over the budget"):
        small.charge(rel.guarantee, "v", losses=rel.losses)
    path = tmp_path / "rho.json"
    s.save(path)
    again = Session.load(path)
    assert again.budget == budget and again.spent() == s.spent() and len(again.ledger) == 8
    assert json.loads(path.read_text())["budget"]["kind"] == "ZCDP"


def test_an_old_format_2_ledger_is_read_and_charged_tightly(tmp_path):
    """A ledger of format 2 (charged by basic composition) is read as it was, further charged by the tight
    total, and saved in format 3; a loaded ledger whose total exceeds its budget is refused."""
    entry = {"label": "q", "mechanism": "m", "guarantee": {"kind": "PureDP", "epsilon": 0.1, "neighbours": AR.value},
             "cost": {"kind": "PureDP", "epsilon": 0.1, "neighbours": AR.value}}  # fmt: skip
    old = {"format": "userdp-ledger/2", "budget": {"kind": "ApproxDP", "epsilon": 3.0, "delta": 1e-5,
           "neighbours": AR.value}, "entries": [entry] * 30}  # fmt: skip
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    s = Session.load(path)
    assert len(s.ledger) == 30 and s.spent().epsilon == pytest.approx(3.0)
    with Session.locked(path) as same:  # basic composition would refuse this: 3.1 > 3
        same.charge(PureDP(0.1), "more")
    data = json.loads(path.read_text())
    assert data["format"] == "userdp-ledger/3" and len(data["entries"]) == 31
    assert Session.load(path).tight_spent()[0] < 3.0
    data["entries"] = [entry] * 200  # 20 by basic, about 8.2 by the tight total: over 3
    path.write_text(json.dumps(data))
    with pytest.raises(ParameterError, match="over its budget"):
        Session.load(path)


def test_run_charges_the_losses_the_release_states(vocabulary_release):
    """Session.run records the losses the returned release states, so a zCDP budget can run it."""
    rel = vocabulary_release
    s = Session(ZCDP(0.05, 1e-6, AR, ZCDP_TV_ALLOWANCE))
    assert s.run(rel.guarantee, lambda: rel, label="v", losses=rel.losses) is rel
    assert s.ledger[0].losses == rel.losses and s.spent().rho == pytest.approx(rel.losses[0].rho)
    assert np.isfinite(s.tight_spent()[0])


def test_the_gaussian_key_counts_state_their_zcdp_guarantee(tmp_path):
    """Per-key counts with Gaussian noise (library default path otherwise: bounds chosen by GEM): with public
    keys the stated rho is at least GEM's epsilon^2 / 2 plus the counts' L0 Linf^2 / (2 sd^2) as drawn, within
    1e-5; with keys selected from the data it adds the selection's rho and the threshold's delta; Laplace
    counts state nothing. Each stated loss implies the release's guarantee."""
    path = tmp_path / "visits.csv"
    rng = np.random.default_rng(4)
    rows = ["person,venue"] + [f"p{rng.integers(0, 400)},v{rng.integers(0, 12)}" for _ in range(4000)]
    path.write_text("\n".join(rows) + "\n")
    keys = [f"v{i}" for i in range(12)]
    public = releases.key_counts(path, 1.0, 1e-6, user="person", key="venue", keys=keys, noise="gaussian", rng=2)
    gem, loss = public.losses
    p = public.params
    drawn = p["l0"] * p["linf"] ** 2 / (2 * p["count_sd"] ** 2)
    assert gem == DPLoss(p["epsilon_select"]) and p["epsilon_select"] == pytest.approx(0.2)
    assert drawn <= loss.rho <= drawn * (1 + 1e-5) and loss.delta == 0
    assert basic_epsilon(public.losses)[1] <= 1e-6
    selected = releases.key_counts(path, 1.0, 1e-6, user="person", key="venue", noise="gaussian", rng=2)
    gem, sel = selected.losses
    q = selected.params
    counts_drawn = q["l0"] * q["linf"] ** 2 / (2 * q["count_sd"] ** 2) + q["epsilon_max_keys"] ** 2 / 2
    assert sel.delta == pytest.approx(1e-6 / 4, rel=1e-12) and sel.rho > 1.2 * counts_drawn  # + the selection
    assert basic_epsilon(selected.losses) <= (1.0, 1e-6) and len(selected.value["keys"]) > 0
    assert releases.key_counts(path, 1.0, 1e-6, user="person", key="venue", keys=keys, rng=2).losses == ()
    s = Session(ZCDP(0.5, 1e-5, AR, ZCDP_TV_ALLOWANCE))  # GEM's 0.2 costs 0.02 there
    s.charge(public.guarantee, "counts", losses=public.losses)
    assert s.spent().rho == pytest.approx(0.02 + loss.rho, rel=1e-12)
