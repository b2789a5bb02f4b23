"""Release-boundary checks, the guarantee card, and `ragleak account` as a user runs it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from ragleak.accounting import (
    Guarantee,
    GuaranteeCard,
    OneTimeRelease,
    PerResponse,
    boundary_check,
    build_card,
    epsilon_after,
)
from ragleak.defenses import make_defense


def ragleak(*args):
    env = {**os.environ, "RAGLEAK_THREADS": "1", "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "ragleak.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


ANSWERS_DP = Guarantee(scope=PerResponse(eps_q=1.0), boundary="answers")


def test_answers_claim_is_void_when_citations_are_shown_unless_retrieval_is_randomised():
    assert boundary_check(ANSWERS_DP, "answers") == ""
    assert "citations" in boundary_check(ANSWERS_DP, "answers+citations")
    void = epsilon_after(ANSWERS_DP, 10, shown="answers+citations")
    assert void.void and void.delta >= 1.0 and math.isinf(void.eps)
    # randomised retrieval lets citations through only by adding the selection's own epsilon
    randomised = ANSWERS_DP.model_copy(update={"retrieval_randomised": True})
    unstated = epsilon_after(randomised, 10, shown="answers+citations")
    assert unstated.void and "epsilon" in unstated.reason
    stated = randomised.model_copy(update={"retrieval_eps_q": 0.5})
    assert epsilon_after(stated, 10, shown="answers+citations", method="basic").eps == pytest.approx(15.0)
    assert epsilon_after(stated, 10, shown="retrieved-ids", method="basic").eps == pytest.approx(15.0)
    assert epsilon_after(stated, 10, shown="answers", method="basic").eps == pytest.approx(10.0)


def test_retrieval_claims_do_not_cover_answers_and_synthetic_corpora_cover_everything():
    retrieval = Guarantee(scope=PerResponse(eps_q=1.0), boundary="retrieved-ids", retrieval_randomised=True)
    assert epsilon_after(retrieval, 1, shown="answers").void
    assert not epsilon_after(retrieval, 1, shown="retrieved-ids").void
    synthetic = Guarantee(scope=OneTimeRelease(eps0=1.0), boundary="synthetic-corpus")
    assert all(not epsilon_after(synthetic, 5, shown=s).void for s in ("answers", "answers+citations", "retrieved-ids"))


def test_card_of_a_retrieval_defense_is_void_on_answers_but_shows_its_own_claim():
    d = make_defense("dp-retrieval")
    card = build_card("dp-retrieval", d.guarantee(), params=d.params.model_dump(mode="json"))
    assert card.void and card.shown_boundary == "answers" and [r.queries for r in card.curve] == [1, 10, 100, 1000]
    assert all(r.tight.delta == 1.0 and math.isinf(r.tight.eps) for r in card.curve)
    assert [round(r.claim.eps, 2) for r in card.curve][:2] == [1.0, 10.0]
    assert card.curve[-1].claim.eps < 1000  # PLD beats basic composition
    assert any(w.startswith("VOID") for w in card.warnings)


def test_card_person_level_and_round_trip():
    g = make_defense("dp-synthetic", epsilon=2.0).guarantee()
    card = build_card("dp-synthetic", g, docs_per_person=3, queries=(1, 7))
    assert [r.tight.eps for r in card.curve] == [6.0, 6.0] and card.unit.startswith("person")
    again = GuaranteeCard.model_validate_json(card.model_dump_json())
    assert again == card
    none_card = build_card("none", make_defense("none").guarantee())
    assert GuaranteeCard.model_validate_json(none_card.model_dump_json()).curve[0].tight.eps == math.inf


def test_cli_account_writes_json_and_prints_the_card(tmp_path):
    out = tmp_path / "card.json"
    result = ragleak("account", "private-rag", "--queries", "5", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "per-document filter" in result.stdout and "warning" in result.stdout
    data = json.loads(out.read_text())
    assert [r["queries"] for r in data["curve"]] == [1, 5, 10, 100, 1000]
    assert [r["tight"]["eps"] for r in data["curve"]] == [20.0, 40.0, 40.0, 40.0, 40.0]
    cited = ragleak("account", "private-rag", "--boundary", "answers+citations", "--json")
    assert cited.returncode == 0 and json.loads(cited.stdout)["void"] is True


@pytest.mark.parametrize("args, message", [
    (["account", "no-such-defense"], "unknown defenses"),
    (["account", "dp-retrieval", "--boundary", "everything"], "--boundary"),
    (["account", "dp-retrieval", "--docs-per-person", "0"], "--docs-per-person"),
])
def test_cli_account_user_errors_exit_2_with_one_line(args, message):
    result = ragleak(*args)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_cli_account_ca_dp_counts_every_single_turn_query_and_a_narrow_pool_voids_the_card():
    ca = ragleak("account", "ca-dp", "--queries", "1000", "--boundary", "retrieved-ids", "--json")
    assert ca.returncode == 0, ca.stderr
    card = json.loads(ca.stdout)
    claim = {r["queries"]: r["claim"]["eps"] for r in card["curve"]}
    assert 400 < claim[1000] < 1000 and "new client id" in card["resets"]  # 1000 single-turn queries, PLD
    pool = ragleak("account", "dp-retrieval", "--params", '{"pool": 20}', "--boundary", "retrieved-ids", "--json")
    data = json.loads(pool.stdout)
    assert data["void"] and "pool=20" in data["void_reason"] and data["adjacency"].startswith("substitution")
    checked = ragleak("account", "dp-retrieval", "--params", '{"pool": 200}', "--corpus", "synthetic-corp",
                      "--boundary", "retrieved-ids")
    assert checked.returncode == 0 and "pool-covers-corpus: met" in checked.stdout and "VOID" not in checked.stdout
