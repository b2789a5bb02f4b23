"""Ground-truth attribution labels (auditor side: needs the retrieved passages of each query).

Rule (documented, used for training and for every metric):

    tokens(x)  = lower-cased alphanumeric word tokens of x (``ragleak.lcs.tokens``)
    rougeL_recall(R_i, T) = LCS(tokens(R_i), tokens(T)) / |tokens(R_i)|
                          = ROUGE-L precision of R_i against T (``ragleak.lcs.rouge_l``)
    y_i = 1  iff  |tokens(R_i)| >= min_tokens  and  max_{T in top-k context} rougeL_recall(R_i, T) >= tau

Defaults tau = 0.5, min_tokens = 3. The LCS keeps word order but allows gaps, so a sentence that
copies a passage's facts with a few words changed (the usual small-LLM paraphrase) counts as
attributable, while a sentence that only shares a name or a stop-word scaffold does not. The
paper's rule is exact containment ("appears in"); reviewers noted that labels paraphrases 0,
which is why the fuzzy recall is the default here.

The context is what the LLM saw: the passages in the trace's prompt (after any
``rewrite_context`` hook), recovered by inverting ``rag.prompt.format_context``.
"""

from __future__ import annotations

import re
from typing import Sequence

from ragleak.lcs import lcs_length, rouge_l, tokens
from ragleak.records import Trace

__all__ = ["attribution", "attribution_label", "context_passages", "lcs_length", "rouge_l_recall", "tokens"]

_PASSAGE = re.compile(r"^Passage \d+: (.*)$")


def rouge_l_recall(sentence: str, passage: str) -> float:
    """The share of ``sentence``'s tokens found, in order, in ``passage``."""
    return rouge_l(sentence, passage).precision


def attribution(sentence: str, passages: Sequence[str]) -> float:
    """max over passages of ROUGE-L recall of ``sentence``."""
    return max((rouge_l_recall(sentence, p) for p in passages), default=0.0)


def attribution_label(sentence: str, passages: Sequence[str], tau: float = 0.5, min_tokens: int = 3) -> int:
    """y_i of the module docstring."""
    if len(tokens(sentence)) < min_tokens:
        return 0
    return int(attribution(sentence, passages) >= tau)


def context_passages(trace: Trace) -> list[str]:
    """The passage texts the LLM saw, read back from the rendered prompt of ``trace``."""
    prompt = trace.prompt
    start = prompt.rfind("Context:\n")
    if start < 0:
        return []
    end = prompt.find("\n\nQuestion:", start)
    block = prompt[start + len("Context:\n"): end if end >= 0 else len(prompt)]
    out = []
    for line in block.splitlines():
        match = _PASSAGE.match(line)
        if match:
            out.append(match.group(1))
        elif out:  # a passage whose text held a newline continues on the next line
            out[-1] += "\n" + line
    return out
