"""ca-dp: the accountant sizes the conversation, the whole conversation stays within its budget,
turns beyond it answer without retrieval, and a new conversation starts afresh."""

from __future__ import annotations

from collections import Counter

import pytest

from ragleak.accounting import epsilon_after, log_ratio_interval
from ragleak.context import RunContext
from ragleak.defenses import make_defense
from ragleak.defenses.ca_dp import CompositionAwareDP
from ragleak.pipeline.conversation import Conversation
from ragleak.records import Passage, Scored
from ragleak.errors import ConfigError
from ragleak.testing import pipeline_under_test, target_under_test

SCORES = [0.8, 0.55, 0.5, 0.05]
NEIGHBOUR = [0.8, 0.55, 0.5, 0.95]   # document 3 substituted


def count_passages(user):
    """Answers with the number of context passages: the pipeline logic without a model."""
    return f"passages: {user.count('Passage ')}"


def _cands(scores):
    return [Scored(passage=Passage(id=f"d{i}#0", doc_id=f"d{i}", text=f"t{i}"), score=s) for i, s in enumerate(scores)]


def _conversation_transcripts(scores, seed, turns, n=20_000):
    d = CompositionAwareDP(turn_epsilon=0.5, conversation_epsilon=1.0, accountant="basic")
    d.prepare(RunContext(seed=seed))
    cands = _cands(scores)
    out = []
    for _ in range(n):
        transcript = []
        for _ in range(turns):
            rescored = d.score_retrieval("q", cands)
            transcript.append(max(rescored, key=lambda s: s.score).passage.doc_id)
        out.append(tuple(transcript))
    return out


def test_a_whole_conversation_stays_within_the_conversation_budget():
    d = CompositionAwareDP(turn_epsilon=0.5, conversation_epsilon=1.0, accountant="basic")
    assert d.max_turns == 2
    a = Counter(_conversation_transcripts(SCORES, 1, d.max_turns))
    b = Counter(_conversation_transcripts(NEIGHBOUR, 2, d.max_turns))
    n = sum(a.values())
    keys = [k for k in a if a[k] >= 200 and b[k] >= 200]
    losses = [log_ratio_interval(a[k], n, b[k], n) for k in keys] + [log_ratio_interval(b[k], n, a[k], n) for k in keys]
    assert all(low <= 1.0 for _, low, _ in losses)
    assert max(est for est, _, _ in losses) > 0.5  # two turns really compose: more than one turn's 0.5 alone


def test_accountant_sizes_the_conversation():
    tight = CompositionAwareDP(turn_epsilon=0.2, conversation_epsilon=4.0, budget_scope="stream")
    basic = CompositionAwareDP(turn_epsilon=0.2, conversation_epsilon=4.0, accountant="basic", budget_scope="stream")
    assert basic.max_turns == 20 and tight.max_turns > basic.max_turns
    g = tight.guarantee()
    assert epsilon_after(g, 10_000).eps <= 4.0 + 1e-9
    assert epsilon_after(g, 10_000, method="basic").eps == pytest.approx(0.2 * tight.max_turns)
    with pytest.raises(ConfigError, match="invalid parameter"):
        CompositionAwareDP(turn_epsilon=5.0, conversation_epsilon=1.0)


def test_turns_beyond_the_budget_answer_without_retrieval_and_new_conversations_do_not_reset(fact_index):
    d = make_defense("ca-dp", turn_epsilon=1.0, conversation_epsilon=2.0, accountant="basic")
    pipe = pipeline_under_test(fact_index, count_passages, d, top_k=2, seed=1)
    chat = Conversation(pipe)
    traces = [chat.ask(q).trace for q in ("ferry?", "garden?", "library?", "lab?")]
    assert [t.answer for t in traces] == ["passages: 2", "passages: 2", "passages: 0", "passages: 0"]
    assert [t.hook("score_retrieval").changed for t in traces] == [True, True, False, False]
    assert [t.hook("rewrite_context").changed for t in traces] == [False, False, True, True]
    assert d.refused_turns == 2 and d.spent() == pytest.approx(2.0)
    # a new conversation (empty history) is charged to the same budget (no client id: the stream's)
    fresh = Conversation(pipe).ask("ferry?").trace
    assert fresh.answer == "passages: 0" and d.conversations == 2 and d.charged == {"": 2}


def test_single_turn_queries_spend_the_stream_budget_and_the_card_matches(fact_index):
    """1000 single-turn queries (each a new conversation) in stream scope: retrieval for max_turns
    of them only, and the card's eps(1000) is what those charges cost."""
    from ragleak.accounting import build_card

    d = make_defense("ca-dp", turn_epsilon=1.0, conversation_epsilon=4.0, budget_scope="stream")
    pipe = pipeline_under_test(fact_index, count_passages, d, top_k=2, seed=5)
    answers = Counter(pipe.answer(f"ferry {i}?", principal=f"id{i}").answer for i in range(1000))
    assert answers == {"passages: 2": d.max_turns, "passages: 0": 1000 - d.max_turns}
    card = build_card("ca-dp", d.guarantee(), queries=(1000,), shown="retrieved-ids")
    assert not card.void
    assert card.curve[0].tight.eps == pytest.approx(d.spent()) and d.spent() <= 4.0
    assert "nothing resets" in card.resets


def test_per_principal_budgets_do_not_reset_with_conversations_and_the_card_is_the_worst_case(fact_index):
    from ragleak.accounting import build_card
    from ragleak.pipeline.target import PipelineTarget

    d = make_defense("ca-dp", turn_epsilon=1.0, conversation_epsilon=2.0, accountant="basic", budget_scope="principal")
    pipe = pipeline_under_test(fact_index, count_passages, d, top_k=2, seed=1)
    alice, bob = PipelineTarget(pipe, principal="alice"), PipelineTarget(pipe, principal="bob")
    got = [Conversation(alice).ask(f"q{i}?").answer for i in range(3)]  # three new conversations
    assert got == ["passages: 2", "passages: 2", "passages: 0"]
    assert bob.answer("q?").answer == "passages: 2"  # a new id starts a fresh budget
    assert pipe.answer("anonymous?").answer == "passages: 2"
    assert d.charged == {"alice": 2, "bob": 1, "": 1}
    assert d.spent("alice") == pytest.approx(2.0) and d.spent("bob") == pytest.approx(1.0)
    card = build_card("ca-dp", d.guarantee(), queries=(10, 1000), shown="retrieved-ids")
    # an adversary who opens new ids: every query composes, no cap at the per-id budget
    assert [round(r.basic.eps) for r in card.curve] == [10, 1000]
    assert "new client id" in card.resets and any("many ids" in w for w in card.warnings)


def test_default_card_is_the_worst_case_over_new_ids_and_stream_scope_caps():
    d = make_defense("ca-dp")
    g = d.guarantee()
    assert g.scope.budget_scope == "principal" and g.adjacency == "substitution"
    dp_r = make_defense("dp-retrieval").guarantee()
    # 1000 single-turn queries of an adversary with fresh ids: the identical mechanism's eps(1000)
    assert epsilon_after(g, 1000).eps == pytest.approx(epsilon_after(dp_r, 1000).eps)
    assert epsilon_after(g, 1000).eps > 400
    stream = make_defense("ca-dp", budget_scope="stream")
    gs = stream.guarantee()
    assert epsilon_after(gs, 1000).eps == pytest.approx(epsilon_after(gs, stream.max_turns).eps)
    assert epsilon_after(gs, 1000).eps <= stream.params.conversation_epsilon + 1e-9


@pytest.mark.model
def test_on_the_real_stack_each_declared_hook_changes(fact_index, generator):
    d = CompositionAwareDP(turn_epsilon=1.0, conversation_epsilon=1.0)
    chat = Conversation(pipeline_under_test(fact_index, generator, d, top_k=2, seed=2))
    first = chat.ask("When does the Oberlin community garden open?").trace
    second = chat.ask("And who keeps the telescope waiting list?").trace
    changed = [{h.hook: h.changed for h in t.hooks} for t in (first, second)]
    assert changed[0] == {"score_retrieval": True, "rewrite_context": False, "generate": False, "postprocess": False}
    assert changed[1] == {"score_retrieval": False, "rewrite_context": True, "generate": False, "postprocess": False}
    assert second.context == [] and "Context:" not in second.prompt.split("<|im_start|>user")[-1]


def test_served_pipeline_charges_each_client_its_own_budget(fact_index):
    from starlette.testclient import TestClient

    from ragleak.serve import make_app

    d = make_defense("ca-dp", turn_epsilon=1.0, conversation_epsilon=1.0, accountant="basic")
    target = target_under_test(fact_index, count_passages, d, top_k=2, seed=1)
    with TestClient(make_app(target)) as client:
        def ask(**body):
            return client.post("/ask", json={"query": "ferry?", **body}).json()["answer"]

        assert [ask(client="a"), ask(client="a"), ask(client="b"), ask(), ask()] == \
            ["passages: 2", "passages: 0", "passages: 2", "passages: 2", "passages: 0"]
        assert client.post("/ask", json={"query": "q", "client": 3}).status_code == 400
    assert d.charged == {"a": 1, "b": 1, "": 1}


def test_a_query_is_paid_for_before_its_answer_exists(fact_index):
    # the generator dies mid-answer (as a killed server would): the query was charged all the same
    def crash(user):
        raise RuntimeError("killed while generating")

    d = make_defense("ca-dp", turn_epsilon=1.0, conversation_epsilon=2.0, accountant="basic")
    pipe = pipeline_under_test(fact_index, crash, d, top_k=2, seed=1)
    with pytest.raises(RuntimeError, match="killed"):
        pipe.answer("ferry?", principal="alice")
    assert d.charged == {"alice": 1}
