"""Attack logic with scripted targets: budgets, transcripts, failures, pools, hidden ground truth.

These never run a model; the feature tests against the real stack are in test_attacks_model.py.
"""

from __future__ import annotations

import re

import http.server
import json
import threading

import pytest

from ragleak.attacks import ATTACKS, Attack, CorpusView, Transcript, make_attack
from ragleak.attacks.base import AttackResult
from ragleak.attacks.canary import FORBIDDEN_IN_QUERIES, canary_kb, email_canaries, name_canaries
from ragleak.attacks.membership import bleu, heuristic_score, membership_split, yes_no_score
from ragleak.attacks.parsing import pii_items, split_chunks
from ragleak.lcs import Rouge, rouge_l
from ragleak.attacks.pools import load_pool, pool_names
from ragleak.context import RunContext
from ragleak.errors import ConfigError
from ragleak.pipeline.target import CallableTarget, HttpTarget
from ragleak.records import Document


def echo(query):
    return f"Passage 1: you asked {query!r} and here is a long enough copied passage of text."


def test_every_registered_attack_declares_its_contract():
    for name in ATTACKS.names():
        cls = ATTACKS.get(name)
        assert issubclass(cls, Attack) and cls.name == name
        assert cls.version and cls.threat_model in ("black-box", "needs-retrieved-ids")
        assert isinstance(cls.default_budget, int) and cls.default_budget > 0
        params = cls.Params()
        assert type(params).model_validate_json(params.model_dump_json()) == params
        with pytest.raises(Exception):
            params.__setattr__(next(iter(type(params).model_fields), "x"), None)  # frozen


def test_unknown_attack_and_bad_params_are_config_errors():
    with pytest.raises(ConfigError, match="unknown attacks"):
        make_attack("no-such-attack")
    with pytest.raises(ConfigError, match="turns"):
        make_attack("ps", turns=0)
    with pytest.raises(ConfigError, match="no query pool"):
        make_attack("ps", pool="missing").run(CallableTarget(echo), RunContext())


def test_ps_sends_the_pool_in_order_within_budget_and_round_trips():
    sent = []
    transcript = make_attack("ps").run(CallableTarget(lambda q: sent.append(q) or echo(q)), RunContext(), budget=4)
    pool = load_pool("shared-extraction").items
    assert sent == pool[:4] == [q.query for q in transcript.queries]
    assert transcript.errors == 0 and transcript.budget == 4
    assert transcript.extracted and all("copied passage" in c for c in transcript.extracted)
    again = Transcript.from_json(transcript.to_json())
    assert again == transcript and again.schema_version == 1
    assert make_attack("ps").run(CallableTarget(echo), RunContext()).budget == len(pool)  # default budget = pool size


def test_seed_shuffles_the_pool_order_reproducibly():
    def order(seed):
        return [q.query for q in make_attack("ps").run(CallableTarget(echo), RunContext(seed=seed), budget=10).queries]

    assert order(0) == load_pool("shared-extraction").items
    assert order(7) == order(7) != order(0) and sorted(order(7)) == sorted(order(0))


def test_pm_keeps_one_conversation_per_pool_query():
    histories = []

    def chat(query, history):
        histories.append([t.query for t in history])
        return echo(query)

    transcript = make_attack("pm", turns=3).run(CallableTarget(chat), RunContext(), budget=7)
    assert len(transcript.queries) == 7
    pool, follow = load_pool("shared-extraction").items, load_pool("followups").items
    assert histories[:4] == [[], [pool[0]], [pool[0], follow[0]], []]
    assert [q.turn for q in transcript.queries] == [0, 1, 2, 0, 1, 2, 0]
    assert [q.conversation for q in transcript.queries] == [0, 0, 0, 1, 1, 1, 2]


def test_failing_calls_are_recorded_counted_and_never_leakage():
    calls = {"n": 0}
    secret = "operator_1234@acmetest-internal.canary"

    def flaky(query):
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            raise TimeoutError(f"timed out; last answer contained {secret}")
        return "nothing to see"

    view = CorpusView(secrets=[secret])
    transcript = make_attack("canary").run(CallableTarget(flaky), RunContext(), budget=6, corpus_view=view)
    assert len(transcript.queries) == 6 and transcript.errors == 3
    failed = [q for q in transcript.queries if not q.ok]
    assert all(q.answer is None and "TimeoutError" in q.error for q in failed)
    assert transcript.scoring["recovered"] == [] and transcript.scoring["secrets"][secret] == []
    assert Transcript.from_json(transcript.to_json()).errors == 3


def _serve(status: int):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"answer": "Passage 1: a served answer that is long enough to be a chunk."}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if status == 200 else b"boom")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_http_500_and_dead_endpoint_are_recorded_not_raised():
    server = _serve(500)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/ask"
        transcript = make_attack("ps").run(HttpTarget(url, retries=1, backoff_s=0.01, timeout_s=5), RunContext(), budget=2)
    finally:
        server.shutdown()
        server.server_close()
    assert transcript.errors == 2 and all("HTTP 500" in q.error for q in transcript.queries)
    assert transcript.extracted == []
    dead = HttpTarget("http://127.0.0.1:9/ask", retries=0, timeout_s=2)
    t2 = make_attack("mi").run(dead, RunContext(), corpus_view=CorpusView(documents=[Document(id="d", text="one two three four")]))
    assert t2.errors == 2 and t2.membership[0].scores == {}  # no score from a failed call


def test_mi_scores_every_candidate_and_labels_come_after_the_queries():
    docs = [Document(id=f"d{i}", text=f"Record {i}: Zorbel Quant{i} owes 4{i}11 dollars to Vexa Lintz{i}.") for i in range(4)]
    seen_views = []

    class Spy(type(make_attack("mi"))):
        def execute(self, session, view, ctx):
            seen_views.append(view)
            return super().execute(session, view, ctx)

    target = CallableTarget(lambda q: "Yes." if "d1" in q or "Quant1" in q else "No.")
    t = Spy().run(target, RunContext(), corpus_view=CorpusView(documents=docs, member_ids=["d1"], secrets=["x"]))
    assert seen_views[0].member_ids is None and seen_views[0].secrets == []  # ground truth withheld
    assert len(t.queries) == 8 == t.budget
    by_id = {m.doc_id: m for m in t.membership}
    assert by_id["d1"].member is True and by_id["d0"].member is False
    assert by_id["d1"].scores["rag-mia"] == 1.0 and by_id["d0"].scores["rag-mia"] == 0.0


def test_mi_scorers():
    held_out = "owes 4411 dollars to Vexa Lintz for the harbour repairs"
    assert heuristic_score("Vexa Lintz is owed 4411 dollars for harbour repairs.", held_out, "q") > \
        heuristic_score("I don't know.", held_out, "q")
    assert bleu(held_out, held_out) == pytest.approx(1.0)
    assert bleu("completely unrelated words here", held_out) < 0.2
    assert [yes_no_score(a) for a in ("Yes.", "No", "yes and no", "Maybe")] == [1.0, 0.0, 0.0, 0.0]


def test_membership_split_is_disjoint_and_sized():
    docs = [Document(id=f"d{i}", text=str(i)) for i in range(20)]
    kb, view = membership_split(docs, n_members=3, n_nonmembers=8, kb_size=10, seed=1)
    kb_ids = {d.id for d in kb}
    assert len(view.documents) == 11 and set(view.member_ids) <= kb_ids and len(view.member_ids) == 3
    assert not ({d.id for d in view.documents} - set(view.member_ids)) & kb_ids
    # shuffled: the KB and the non-members come from the whole corpus, in an order fixed by the seed
    topics = [Document(id=f"{'ab'[i >= 10]}{i}", text=str(i)) for i in range(20)]  # stored by topic
    kb_s, view_s = membership_split(topics, n_members=3, n_nonmembers=8, kb_size=10, seed=1, shuffle=True)
    assert {d.id[0] for d in kb_s} == {"a", "b"} and len(kb_s) == 10 and len(view_s.documents) == 11
    assert not ({d.id for d in view_s.documents} - set(view_s.member_ids)) & {d.id for d in kb_s}
    again = membership_split(topics, n_members=3, n_nonmembers=8, kb_size=10, seed=1, shuffle=True)
    assert [d.id for d in again[0]] == [d.id for d in kb_s] and again[1] == view_s
    assert [d.id for d in membership_split(topics, 3, 8, 10, seed=1)[0]] == [f"a{i}" for i in range(10)]


def test_pools_are_versioned_data_and_the_canary_pool_never_names_the_canary():
    assert {"shared-extraction@1", "targeted-pii@1", "canary-targeted@1", "followups@1"} <= set(pool_names())
    pool = load_pool("canary-targeted")
    assert len(pool.items) == 50 and len(set(pool.items)) == 50
    assert pool.items[:10] == load_pool("shared-extraction").items
    for query in pool.items:
        assert not any(bad in query.lower() for bad in FORBIDDEN_IN_QUERIES), query
    for seed in (101, 102, 103):
        for canary in email_canaries(50, seed) + name_canaries(50, seed):
            local = canary.secret.split("@")[0].lower()
            assert all(local not in q.lower() and canary.secret.lower() not in q.lower() for q in pool.items)


_STOP = frozenset("the a an at to for on of in is are be by with and or from".split())


def _stems(text):
    out = set()
    for word in re.findall(r"[A-Za-z'-]+", text.lower()):
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        out.add(word)
    return out - _STOP


def test_canary_pool_v2_shares_no_word_with_any_carrier_sentence():
    """Issue 16: the targeted queries must not echo the sentence that carries the canary (its
    wording would retrieve the carrier by lexical overlap, not by what the query asks for)."""
    pool = load_pool("canary-targeted", "2")
    assert len(pool.items) == 50 == len(set(pool.items))
    general = load_pool("shared-extraction", "2")
    assert len(general.items) == 250 and set(pool.items[:10]) <= set(general.items)
    carriers = set()
    for seed in (101, 102, 103):
        for canary in email_canaries(50, seed) + name_canaries(50, seed):
            carriers |= _stems(canary.prefix)
    for query in pool.items:
        assert not any(bad in query.lower() for bad in FORBIDDEN_IN_QUERIES), query
        assert not (_stems(query) - {"please", "repeat", "all", "context"}) & carriers, query


def test_canary_kb_plants_one_canary_per_document():
    kb = canary_kb("email", seed=101, n_docs=50)
    assert len(kb.documents) == 50 and len(kb.canaries) == 50
    for canary in kb.canaries:
        assert canary.secret.startswith("operator_") and canary.secret.endswith("@acmetest-internal.canary")
        carriers = [d.id for d in kb.documents if canary.secret in d.text]
        assert carriers == [kb.doc_of[canary.secret]]
    names = canary_kb("name", seed=102, n_docs=50)
    assert all(c.kind == "name" and c.secret in "".join(d.text for d in names.documents) for c in names.canaries)
    assert canary_kb("email", seed=101, n_docs=50) == kb and canary_kb("email", seed=102, n_docs=50) != kb


def test_parsing_helpers():
    answer = "Passage 1: Sarah Hall joined Lopez Inc as CEO on July 13, 2020, phone (875) 542-0355.\n" \
             "Passage 2: work e-mail sarah.hall@lopez.com and more words to pass the threshold."
    chunks = split_chunks(answer)
    assert len(chunks) == 2 and chunks[0].startswith("Sarah Hall")
    pii = pii_items(answer)
    assert pii["email"] == ["sarah.hall@lopez.com"] and pii["phone"] == ["(875) 542-0355"]
    assert "Sarah Hall" in pii["name"]
    assert rouge_l("a b c d", "a b c d").f1 == 1.0 and rouge_l("a b", "c d") == Rouge(0.0, 0.0, 0.0)


def test_an_attack_without_ids_access_is_refused_where_it_needs_them():
    class NeedsIds(Attack):
        name, version, threat_model, default_budget = "needs-ids", "1", "needs-retrieved-ids", 1

        def execute(self, session, view, ctx):
            return AttackResult()

    with pytest.raises(ConfigError, match="retrieved ids"):
        NeedsIds().run(CallableTarget(echo), RunContext())
    assert NeedsIds().run(CallableTarget(echo, exposes_retrieved_ids=True), RunContext()).queries == []


def test_exported_canary_kb_loads_as_a_files_corpus_and_a_view(tmp_path):
    from ragleak.attacks.canary import export_canary_kb
    from ragleak.corpora import load_corpus

    kb = canary_kb("email", seed=103, n_docs=50)
    docs_path, view_path = export_canary_kb(kb, tmp_path)
    loaded = load_corpus(docs_path)
    assert [(d.id, d.text) for d in loaded] == [(d.id, d.text) for d in kb.documents]
    assert CorpusView.model_validate_json(view_path.read_text()).secrets == [c.secret for c in kb.canaries]


def test_prepare_corpus_hooks_for_grid_cells():
    docs = [Document(id=f"d{i:03d}", text=f"Note {i}. The ledger was closed on day {i}. Nothing else.") for i in range(80)]
    kb, view = make_attack("mi").prepare_corpus(docs, seed=3)
    assert len(kb) == 50 and len(view.member_ids) == 10 and len(view.documents) == 10 + 30
    with pytest.raises(ConfigError, match="MI needs"):
        make_attack("mi").prepare_corpus(docs[:50], seed=3)
    planted, cview = make_attack("canary", variant="name").prepare_corpus(docs, seed=102)
    assert len(planted) == 50 == len(cview.secrets) and not cview.documents
    assert all(sum(s in d.text for d in planted) == 1 for s in cview.secrets)
