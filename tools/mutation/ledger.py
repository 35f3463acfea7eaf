"""Mutants of the Session and the ledger: what a release charges, and when (see :mod:`mutation`)."""

from __future__ import annotations

from . import Mutant

MUTANTS: list[Mutant] = [
    Mutant(
        "cli-distinct-charges-nothing",
        "ledger-charge",
        "cli/distinct.py",
        "    charge(args, rel)  # before anything is printed",
        "    pass  # before anything is printed",
        ("tests/cli/test_ledger.py::test_every_releasing_command_charges_what_it_released",),
        "`userdp distinct --ledger` prints its release and charges nothing",
    ),
    Mutant(
        "cli-heatmap-charges-nothing",
        "ledger-charge",
        "cli/heatmap.py",
        "    charge(args, rel)\n    staged = [",
        "    staged = [",
        ("tests/cli/test_ledger.py::test_every_releasing_command_charges_what_it_released",
         "tests/cli/test_output_writes.py::test_a_map_that_fails_after_the_release_is_charged"),
        "`userdp heatmap --ledger` writes its map and charges nothing (nor for a map that fails to be written "
        "after the release: rerun, a free look at it)",
    ),
    Mutant(
        "cli-dem-charges-nothing",
        "ledger-charge",
        "cli/dem.py",
        "    charge(args, rel)  # before anything is shown: if refused, nothing is",
        "    pass  # before anything is shown: if refused, nothing is",
        ("tests/cli/test_ledger.py::test_every_releasing_command_charges_what_it_released",),
        "`userdp linear|itemwise|freq --ledger` print their release and charge nothing",
    ),
    Mutant(
        "cli-csv-charges-nothing",
        "ledger-charge",
        "cli/common.py",
        "    charge(args, release)\n    tmp = None",
        "    tmp = None",
        ("tests/cli/test_ledger.py::test_every_releasing_command_charges_what_it_released",),
        "`userdp vocabulary|counts --ledger` write their release and charge nothing",
    ),
    Mutant(
        "cli-csv-write-failure-uncharged",
        "ledger-charge",
        "cli/common.py",
        "    charge(args, release)\n    tmp = None\n    try:\n        if out is not None:",
        "    tmp = None\n    try:\n        if out is None:\n            charge(args, release)\n"
        "        if out is not None:",
        ("tests/cli/test_output_writes.py::test_a_csv_that_fails_after_the_release_is_charged",),
        "a CSV that fails to be written after the release (a full disk, its size set by the release) charges "
        "nothing: rerun, it is a free look at the release",
    ),
    Mutant(
        "cli-charges-another-guarantee",
        "ledger-charge",
        "cli/common.py",
        "    ledger.charge(args, release.guarantee, release.mechanism)",
        "    ledger.charge(args, getattr(release.guarantee, 'user_level_dp', lambda: release.guarantee)(), "
        "release.mechanism)",
        ("tests/cli/test_ledger.py::test_every_releasing_command_charges_what_it_released",),
        "a d_EM-DP release is recorded in the ledger as the user-level guarantee it implies, not as what it "
        "delivered (the entry no longer says what was released)",
    ),
    Mutant(
        "ledger-init-relation-swapped",
        "conversion",
        "cli/ledger.py",
        '    "add-remove": Neighbours.ADD_REMOVE_USER,\n    "replace": Neighbours.REPLACE_USER,',
        '    "add-remove": Neighbours.REPLACE_USER,\n    "replace": Neighbours.ADD_REMOVE_USER,',
        ("tests/cli/test_ledger.py::test_a_cli_release_is_charged_at_its_converted_cost",),
        "`ledger init --budget replace:E` protects add/remove: an add/remove release costs epsilon, not 2 epsilon, "
        "of what the curator believes is a replace-one-user budget",
    ),
    Mutant(
        "session-skips-the-fit-check",
        "ledger-charge",
        "privacy/budget.py",
        "        if not total.fits_within(self.budget):",
        "        if not total.fits_within(self.budget) and cost.budget_key() != self.budget.budget_key():",
        ("tests/privacy/test_budget.py::test_charge_and_remaining",),
        "a release of the budget's kind is recorded even when it overspends",
    ),
    Mutant(
        "session-run-releases-before-checking",
        "ledger-charge",
        "privacy/budget.py",
        "        if not self.can_spend(guarantee):\n            self.charge(guarantee, label)  # raises",
        "        if False:\n            self.charge(guarantee, label)  # raises",
        ("tests/privacy/test_budget.py::test_run_refuses_before_releasing",),
        "Session.run computes the release before it knows the budget allows it (the refusal comes after)",
    ),
    Mutant(
        "ledger-lock-on-the-replaced-file",
        "ledger-charge",
        "privacy/budget.py",
        "        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)",
        "        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)",
        ("tests/privacy/test_ledger_lock.py::test_concurrent_charges_never_overspend",),
        "the lock is taken on the ledger itself, which every save replaces: concurrent runs overspend",
    ),
    Mutant(
        "ledger-tight-composition-of-converted-losses",
        "conversion",
        "privacy/budget.py",
        "            if e.losses and e.cost == e.guarantee:",
        "            if e.losses:",
        ("tests/privacy/test_budget.py::test_the_tight_total_composes_converted_costs_not_unconverted_losses",),
        "`ledger show`'s tight total composes a converted release's unconverted losses (an add/remove "
        "release counted at half its cost under replace)",
    ),
    Mutant(
        "ledger-losses-may-exceed-the-guarantee",
        "ledger-charge",
        "privacy/budget.py",
        "            if eps > g.epsilon * (1 + 1e-12) or",
        "            if eps > 2 * g.epsilon * (1 + 1e-12) or",
        ("tests/privacy/test_budget.py::test_stated_losses_must_not_imply_more_than_the_guarantee",),
        "stated losses that imply more than the release's guarantee are accepted and then composed",
    ),
    Mutant(
        "ledger-reload-replays-the-guarantee",
        "ledger-charge",
        "privacy/budget.py",
        '            s._record(g, cost, e.get("label", ""), e.get("mechanism", ""), meta, losses)',
        '            s._record(g, g, e.get("label", ""), e.get("mechanism", ""), meta, losses)',
        ("tests/privacy/test_budget.py::test_save_and_load_keep_each_release_and_its_cost",),
        "a reloaded ledger replays each entry's guarantee instead of its recorded cost",
    ),
    Mutant(
        "session-remaining-forgets-spent-delta",
        "budget-split",
        "privacy/budget.py",
        "        delta = max(budget.delta - spent.delta, 0.0)",
        "        delta = max(budget.delta - 0.0 * spent.delta, 0.0)",
        ("tests/privacy/test_budget.py::test_what_is_left_deducts_delta_as_well_as_epsilon",),
        "what is left of a budget keeps its whole delta after releases spent some",
    ),
    Mutant(
        "ledger-refusal-still-saves",
        "ledger-charge",
        "privacy/budget.py",
        "            session = cls.load(path)\n            before = session.to_dict()\n            yield session\n",
        "            session = cls.load(path)\n            before = session.to_dict()\n            try:\n"
        "                yield session\n            finally:\n                session.save(path)\n",
        ("tests/privacy/test_ledger_lock.py::test_nothing_is_written_when_the_locked_block_raises",),
        "a refused or failed release still rewrites the ledger",
    ),
]
