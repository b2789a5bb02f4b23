"""Defenses: classes with up to four pipeline hooks, registered by name.

A defense name is a registered name (packages add theirs through the ``ragleak.defenses``
entry-point group: ``my-defense = "my_package.defense:MyDefense"``) or ``path/to/file.py:Class``
(``defenses.loader``). ``external`` stands for an endpoint's own defense, which ragleak cannot see.
"""

from ragleak.defenses.base import Defense, DefenseParams
from ragleak.registry import Registry

DEFENSES: Registry[type[Defense]] = Registry(
    "defenses",
    {
        "none": "ragleak.defenses.base:Defense",
        "dp-retrieval": "ragleak.defenses.dp_retrieval:DPRetrieval",
        "ca-dp": "ragleak.defenses.ca_dp:CompositionAwareDP",
        "private-rag": "ragleak.defenses.private_rag:PrivateRAG",
        "dp-synthetic": "ragleak.defenses.dp_synthetic:DPSynthetic",
        "pad": "ragleak.defenses.pad:PresidioMasking",
        "pad-context": "ragleak.defenses.pad:PresidioContextMasking",
        "pad-regex": "ragleak.defenses.pad_regex:RegexMasking",
        "pad-regex-context": "ragleak.defenses.pad_regex:RegexContextMasking",
        "lprag": "ragleak.defenses.lprag:LPRAG",
        "lprag-output": "ragleak.defenses.lprag:LPRAGOutput",
        "dp-vote": "ragleak.defenses.dp_vote:DPVote",
        "intent-filter": "ragleak.defenses.intent_filter:IntentFilter",
        "external": "ragleak.defenses.external:ExternalDefense",
    },
)

#: The defense names an endpoint target's cells may carry: its own defense runs in the service.
ENDPOINT_DEFENSES = ("none", "external")

from ragleak.defenses.loader import defense_class, make_defense  # noqa: E402  (it reads DEFENSES)

__all__ = ["DEFENSES", "ENDPOINT_DEFENSES", "Defense", "DefenseParams", "defense_class", "make_defense"]
