"""``dp-retrieval`` (DP-R): differentially private top-k selection on clipped similarity scores.

Mechanism (Laplace noise on every clipped score, then top-k: post-processing of an eps-DP release). For a query q and the candidate pool c_1..c_n handed to
``score_retrieval``:

    s_i = clip(sim(q, c_i), a, b)                  public bounds, default [0, 1] for cosine
    laplace mode:  s~_i = s_i + Lap((b - a) / eps)     keep the k largest s~
    gumbel  mode:  s~_i = s_i + Gumbel(2 k (b - a) / eps) keep the k largest s~

In laplace mode every candidate is returned with s~ as its score, so the pipeline's top-k by score
*is* the DP selection; in gumbel mode only the k selected candidates are returned, scored by rank.

Sensitivity argument. The query is public (the attacker chooses it). Neighbouring corpora differ
by *substituting* one document (add/remove is impossible for selection: the neighbour lacks the
candidate). Substitution moves one coordinate of the score vector, and after clipping by at most
Delta = b - a, so the L1 and L_inf sensitivities are both Delta. Laplace(Delta/eps) on every
coordinate is then an eps-DP release of the whole noisy vector and its top-k is post-processing;
the Gumbel mode is k exponential-mechanism rounds at eps/k each (see ``dp_select``). Clipping
bounds must not be chosen from the corpus.

Assumptions and limits, stated in ``guarantee()``:
* the candidate pool is the whole corpus (``candidate_k`` >= corpus size); with a smaller pool
  the exact pre-selection of the pool by the index is a data-dependent step outside the
  mechanism;
* the guarantee covers *which documents are selected* (boundary ``retrieved-ids``): the LLM
  then reads the selected passages verbatim, so answers are not DP;
* each query costs eps; T queries compose (the accountant computes eps(T); Laplace mode is
  accounted exactly as a Laplace mechanism of noise multiplier 1/eps).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from ragleak.accounting.guarantee import DocumentUnit, Guarantee, PerResponse
from ragleak.defenses.base import Defense, DefenseParams
from ragleak.defenses.dp_select import clip_scores, gumbel_top_k, laplace_noisy_scores
from ragleak.records import Scored


class DPRetrievalParams(DefenseParams):
    epsilon: float = Field(default=1.0, gt=0, description="eps per query for the selection")
    mode: Literal["laplace", "gumbel"] = "laplace"
    clip_low: float = Field(default=0.0, description="a: public lower clip bound on the similarity")
    clip_high: float = Field(default=1.0, description="b: public upper clip bound on the similarity")
    k: int = Field(default=5, ge=1, description="selection size the gumbel mode pays for (the pipeline's top_k)")

    @model_validator(mode="after")
    def _bounds(self):
        if not self.clip_high > self.clip_low:
            raise ValueError("clip_high must exceed clip_low")
        return self


class DPRetrieval(Defense):
    name: ClassVar[str] = "dp-retrieval"
    version: ClassVar[str] = "1"
    epsilon_param: ClassVar[str | None] = "epsilon"
    hooks = frozenset({"score_retrieval"})
    Params = DPRetrievalParams

    @property
    def sensitivity(self) -> float:
        return self.params.clip_high - self.params.clip_low

    def score_retrieval(self, query: str, candidates: list[Scored]) -> list[Scored]:
        if not candidates:
            return candidates
        p = self.params
        rng = self.ctx.rng(f"defense/{self.name}")
        clipped = clip_scores([c.score for c in candidates], p.clip_low, p.clip_high)
        if p.mode == "laplace":
            noisy = laplace_noisy_scores(clipped, p.epsilon, self.sensitivity, rng)
            return [c.model_copy(update={"score": float(s)}) for c, s in zip(candidates, noisy)]
        order = gumbel_top_k(clipped, min(p.k, len(candidates)), p.epsilon, self.sensitivity, rng)
        # only the selected candidates, scored by rank (k..1): the noisy values are not released, and
        # nothing unselected is left for the pipeline to fill a larger top_k with by exact rank
        return [candidates[int(i)].model_copy(update={"score": float(len(order) - r)}) for r, i in enumerate(order)]

    def guarantee(self) -> Guarantee:
        p = self.params
        if p.mode == "laplace":
            scope = PerResponse(eps_q=p.epsilon, mechanism="laplace", noise_multiplier=1.0 / p.epsilon)
        else:
            scope = PerResponse(eps_q=p.epsilon, mechanism="exponential")
        return Guarantee(
            unit=DocumentUnit(), scope=scope, boundary="retrieved-ids", retrieval_randomised=True,
            notes=(f"DP for the retrieval selection only ({p.mode}, scores clipped to [{p.clip_low:g}, "
                   f"{p.clip_high:g}], Delta={self.sensitivity:g}); substitution adjacency; assumes the "
                   "candidate pool is the whole corpus; answers quote the selected passages and are not DP"),
        )
