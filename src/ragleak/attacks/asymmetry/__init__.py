"""The knowledge-asymmetry attack (Chen, Wang, Zhang, Gu 2025, arXiv 2507.23229; ICLR 2026).

Modules: ``query`` (Q = q1 ⊕ q2, the standard LLM), ``scoring`` (sentence cosine + NLI
correction; the NLI models are ``ragleak.nlp.nli``), ``labels`` (attribution ground
truth), ``probe`` (one query's observation), ``classifier`` (ReLU MLP), ``refine``
(Algorithm 1), ``metrics`` (ESR, F1, AUC with query-bootstrap intervals), ``attack`` (the
``Attack`` subclass). Nothing heavy is imported here.
"""
