"""Attacks: classes that drive queries through a Target and return a Transcript, registered by name.

Each attack is one file plus one line here; third-party attacks register through the
``ragleak.attacks`` entry-point group.
"""

from ragleak.attacks.base import Attack, AttackParams, AttackResult, CorpusView, QueryRecord, QuerySession, Transcript
from ragleak.registry import Registry

ATTACKS: Registry[type[Attack]] = Registry(
    "attacks",
    {
        "ps": "ragleak.attacks.prompt_extraction:PromptExtraction",
        "pm": "ragleak.attacks.prompt_extraction:MultiTurnPromptExtraction",
        "canary": "ragleak.attacks.canary:CanaryExtraction",
        "mi": "ragleak.attacks.membership:MembershipInference",
        "mi-entailment": "ragleak.attacks.mi_entailment:EntailmentMembership",
        "mi-interrogation": "ragleak.attacks.mi_interrogation:InterrogationMembership",
        "mi-dcmi": "ragleak.attacks.mi_dcmi:DcmiMembership",
        "rag-thief": "ragleak.attacks.rag_thief:RagThief",
        "deal": "ragleak.attacks.deal:Deal",
        "ikea": "ragleak.attacks.ikea:Ikea",
        "pide": "ragleak.attacks.pide:Pide",
        "pirates": "ragleak.attacks.pirates:Pirates",
        "asymmetry": "ragleak.attacks.asymmetry.attack:KnowledgeAsymmetryAttack",
        "utility": "ragleak.attacks.utility:UtilityProbe",
    },
)


def make_attack(name: str, **params) -> Attack:
    return ATTACKS.get(name)(**params)


__all__ = ["ATTACKS", "Attack", "AttackParams", "AttackResult", "CorpusView", "QueryRecord", "QuerySession",
           "Transcript", "make_attack"]
