"""Offline NLP components shared by the defenses: the spaCy English pipeline and Presidio.

Both are built lazily, once per process, from locally installed packages only; building them
never touches the network (see ``models.py``).
"""

from ragleak.nlp.models import SPACY_MODEL, presidio_analyzer, spacy_pipeline

__all__ = ["SPACY_MODEL", "presidio_analyzer", "spacy_pipeline"]
