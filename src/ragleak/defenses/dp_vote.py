"""``dp-vote``: DP token voting over disjoint groups of retrieved documents (Koga et al. 2024,
DPVoteRAG and DPSparseVoteRAG), acting at ``generate``.

Retrieval by document (``score_retrieval``). The k best *documents* of the whole corpus are
selected, each as its best passage (``corpus_pool``: the flat index scores every passage; a
document's score is its best passage's). So adding or removing one document changes the selected
set by at most one substitution: the document leaves and the (k+1)-th enters. Over passages this
fails: a document with c passages in the top-k would evict c and let in up to c others, and a
candidate pool narrower than the corpus lets one removal pull in several documents at once.

Voters (sample-and-aggregate). The selected documents are dealt into m voter groups by a
uniformly random permutation drawn from the run's RNG (``voter_groups``, by document: all of a
document's passages go to one voter); voter i's prompt holds only its group. Random - not
rank-order - assignment is what makes the coupling argument work: the new document can take the
evicted one's slot, so exactly one voter's group differs. (Splitting by rank would let one
insertion shift every later group.)

Generation. The m voter prompts decode in lock-step in one llama.cpp context (``rag.multiseq``)
and the no-retrieval ("public") prompt alone in a second one, so its rows cannot depend on the
voters' batch (whose prompts hold the private documents). At each step the public
top-``domain_size`` tokens (plus the end-of-turn token) form the candidate domain, each voter
votes for its most likely candidate, and a token is released from the vote histogram by
``_vote.VoteReleaser`` (every token private) or ``_vote.SparseVoteReleaser`` (the public token is
free unless the SVT detects disagreement). The released token is appended to every prompt;
generation stops at an end token, after ``max_new_tokens``, or (sparse) after the
``max_discoveries``-th private release.

Guarantee (``guarantee``): per answered query, w.r.t. adding/removing one document, for the
answer text only: variant "vote" is (max_new_tokens * eps_token)-DP, variant "sparse" is
(max_discoveries * eps_token)-DP, both pure (delta = 0) and composing over queries. Assumptions:
one document reaches one voter (document-level retrieval and partition above); the selection
pool is the whole corpus; the LLM was not trained on the corpus; nothing else derived from the retrieved
documents is released (citations, retrieved ids, the trace - the answers+citations boundary voids
the claim). Reported as stated, worst case; ``last_release`` records what one answer actually
spent (pay-what-you-get). The card checks the selection over the served index (every document
in the pool) and states one voter per document.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import ClassVar, Literal, Sequence

from pydantic import Field

from ragleak.accounting.guarantee import Assumption, DocumentUnit, Guarantee, PerResponse
from ragleak.defenses._vote import SparseVoteReleaser, VoteReleaser, candidate_domain, vote_histogram
from ragleak.defenses.base import Defense, DefenseParams
from ragleak.defenses.corpus_pool import CorpusPool
from ragleak.rag.generator import Generator
from ragleak.rag.multiseq import LlamaMultiSequence, decoder_for
from ragleak.rag.prompt import ChatMessage, build_rag_messages, parse_rag_messages
from ragleak.records import HookName, Passage, Scored, Turn


class DPVoteParams(DefenseParams):
    variant: Literal["vote", "sparse"] = "vote"
    voters: int = Field(default=5, ge=1, description="m: disjoint voter groups")
    eps_token: float = Field(default=2.0, gt=0, description="vote: eps per token; sparse: eps0 per discovery")
    max_new_tokens: int = Field(default=32, ge=1, le=1024)
    domain_size: int = Field(default=20, ge=1, description="public top-c candidate tokens per step")
    max_discoveries: int = Field(default=10, ge=1, description="sparse: c private releases per answer")
    svt_threshold: float | None = Field(default=None, description="sparse: theta; default voters / 2")
    k: int = Field(default=5, ge=1, description="documents retrieved per query (the pipeline's top_k)")


class DPVote(Defense):
    name: ClassVar[str] = "dp-vote"
    version: ClassVar[str] = "3"
    epsilon_param: ClassVar[str | None] = "eps_token"
    hooks: ClassVar[frozenset[HookName]] = frozenset({"score_retrieval", "generate"})
    Params: ClassVar[type[DefenseParams]] = DPVoteParams

    def __init__(self, params: DefenseParams | None = None, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self._decoder: LlamaMultiSequence | None = None
        self.last_release: dict[str, float] = {}
        self.last_domains: list[tuple[int, ...]] = []  # the public candidate tokens of each step of the last answer
        self.corpus = CorpusPool()

    def begin_query(self, index, history: Sequence[Turn], principal: str | None = None) -> None:
        self.corpus.observe(index)

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        """The k best documents of the whole corpus, each as its best passage (deterministic)."""
        return self.corpus.document_pool(query, candidates).ranked(self.params.k)  # only the k read

    def voter_groups(self, passages: list[Passage]) -> list[list[Passage]]:
        """Deal the documents into m groups by a uniformly random permutation (empty groups allowed);
        all passages of one document go to the same voter."""
        docs: dict[str, list[Passage]] = {}
        for p in passages:
            docs.setdefault(p.doc_id, []).append(p)
        groups = list(docs.values())
        order = self.ctx.noise_rng("dp-vote/partition").permutation(len(groups))
        m = self.params.voters
        return [[p for j in order[i::m] for p in groups[j]] for i in range(m)]

    def decoder(self, generator: Generator) -> LlamaMultiSequence:
        self._decoder = decoder_for(generator, self._decoder)
        return self._decoder

    def releaser(self) -> VoteReleaser | SparseVoteReleaser:
        p, rng = self.params, self.ctx.noise_rng("dp-vote/release")
        if p.variant == "vote":
            return VoteReleaser(p.eps_token, rng)
        threshold = p.svt_threshold if p.svt_threshold is not None else p.voters / 2
        return SparseVoteReleaser(p.eps_token, threshold, p.max_discoveries, rng)

    def generate(self, messages: Sequence[ChatMessage], passages: list[Passage], generator: Generator) -> str:
        system, query, history = parse_rag_messages(messages, passages)
        groups = self.voter_groups(passages)
        public = generator.render(build_rag_messages(query, [], system, history))
        voters = [generator.render(build_rag_messages(query, group, system, history)) for group in groups]
        decoder, releaser, tokens = self.decoder(generator), self.releaser(), []
        self.last_domains = []
        with ExitStack() as sessions:
            # the public prompt in a session of its own: a batched step's arithmetic depends on its batch-mates
            # (their lengths hold the private documents), and near-tied tokens at the domain's edge flip with it
            alone = sessions.enter_context(decoder.session([public], self.params.max_new_tokens))
            voting = sessions.enter_context(decoder.session(voters, self.params.max_new_tokens))
            ends = decoder.end_tokens()
            for _ in range(self.params.max_new_tokens):
                domain = candidate_domain(alone.logprobs()[0], self.params.domain_size, ends)
                self.last_domains.append(tuple(int(t) for t in domain))
                counts = vote_histogram(voting.logprobs(), domain)
                token = int(domain[releaser.release(counts, public_index=0)])  # domain[0] = public argmax
                if decoder.is_end(token):
                    break
                tokens.append(token)
                if releaser.exhausted:
                    break
                alone.append(token)
                voting.append(token)
        self.last_release = {"tokens": len(tokens), "private_releases": releaser.private_releases}
        return decoder.detokenize(tokens).strip()

    def guarantee(self) -> Guarantee:
        p = self.params
        if p.variant == "vote":
            eps_q = p.max_new_tokens * p.eps_token
            how = f"{p.max_new_tokens} tokens x {p.eps_token:g} (exponential mechanism per token)"
        else:
            eps_q = p.max_discoveries * p.eps_token
            how = f"{p.max_discoveries} discoveries x {p.eps_token:g} (SVT {p.eps_token / 2:g} + EM {p.eps_token / 2:g})"
        return Guarantee(
            unit=DocumentUnit(), noise=self.ctx.noise,
            scope=PerResponse(eps_q=eps_q, delta_q=0.0, mechanism="exponential"),
            boundary="answers",
            retrieval_randomised=False,
            adjacency="add-remove",
            max_chunks=self.corpus.facts.max_chunks if self.corpus.facts else None,
            assumptions=(
                self.corpus.assumption(),
                Assumption(name="one-voter-per-document",
                           statement="one document reaches one voter (a document with c passages in c voters "
                                     "would move c votes)",
                           met=True, detail="the top-k documents are selected by their best passage and dealt "
                                            "to voters by document"),
                Assumption(name="model-not-trained-on-corpus",
                           statement="the LLM's weights hold nothing of the corpus (its no-retrieval prompt is public)",
                           met=None, detail="cannot be checked in code"),
            ),
            notes=(
                f"pure DP per answer for the answer text: {how}, basic composition; {p.voters} voters over "
                f"a random partition of the {p.k} best documents, candidate tokens from the no-retrieval model; "
                "void if citations, retrieved ids or traces are also released"
            ),
        )
