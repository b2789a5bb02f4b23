"""chatterbot-qa: the English conversations of the ``chatterbot-corpus`` package (real public text).

``chatterbot-corpus`` (BSD licence) is a pure-data wheel: 21 English YAML files, each
``{categories: [...], conversations: [[turn, turn, ...], ...]}``, 2,026 conversations of trivia,
tech support, science, history and small talk. Each conversation becomes one Document whose text
is its turns, one per line (the first turn is the question, the rest its answers). It installs
from the package registry with no dependencies, so it is available wherever ragleak is.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import Field

from ragleak.corpora.base import Corpus, CorpusKind, CorpusParams, seeded_rng
from ragleak.errors import CorpusError
from ragleak.records import Document

log = logging.getLogger(__name__)

INSTALL_HINT = "install it with: pip install chatterbot-corpus==1.3.3"


class ChatterbotParams(CorpusParams):
    n_docs: int | None = Field(default=None, ge=1, description="seeded subsample size; None = all")
    seed: int = Field(default=0, description="subsample seed")
    categories: tuple[str, ...] | None = Field(default=None, description="file stems to keep, e.g. ('science', 'history')")
    language: str = Field(default="english", pattern=r"^[a-z]+$")
    data_dir: Path | None = Field(default=None, description="override the installed package's data folder")


class ChatterbotQA(Corpus):
    """Public Q&A conversations from chatterbot-corpus, one Document per conversation."""

    name: ClassVar[str] = "chatterbot-qa"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "Public Q&A conversations from the chatterbot-corpus package (2,026 in English)"
    kind: ClassVar[CorpusKind] = "public"
    Params: ClassVar[type[CorpusParams]] = ChatterbotParams

    def load(self) -> list[Document]:
        params: ChatterbotParams = self.params  # type: ignore[assignment]
        folder = (params.data_dir or _package_data_dir()) / params.language
        if not folder.is_dir():
            raise CorpusError(f"chatterbot-corpus has no language folder {folder}")
        files = sorted(folder.glob("*.yml"))
        if params.categories is not None:
            known = {f.stem for f in files}
            missing = [c for c in params.categories if c not in known]
            if missing:
                raise CorpusError(f"chatterbot-corpus has no categories {missing}; known: {', '.join(sorted(known))}")
            files = [f for f in files if f.stem in params.categories]
        docs = [doc for f in files for doc in _read_file(f)]
        if not docs:
            raise CorpusError(f"{folder}: empty corpus (no conversations)")
        if params.n_docs is not None:
            if params.n_docs > len(docs):
                raise CorpusError(f"chatterbot-qa has {len(docs)} conversations, fewer than n_docs={params.n_docs}")
            keep = sorted(seeded_rng(self.name, params.seed).sample(range(len(docs)), params.n_docs))
            docs = [docs[i] for i in keep]
        return docs


def _package_data_dir() -> Path:
    """The installed package's data folder, found without importing the package."""
    spec = importlib.util.find_spec("chatterbot_corpus")
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(f"the chatterbot-qa corpus needs the chatterbot-corpus package; {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _read_file(path: Path) -> list[Document]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CorpusError(f"{path}: cannot read chatterbot YAML: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("conversations"), list):
        raise CorpusError(f"{path}: expected a mapping with a 'conversations' list")
    categories = raw.get("categories") or [path.stem]
    category = str(categories[0])
    docs: list[Document] = []
    for i, conversation in enumerate(raw["conversations"]):
        turns = _turns(conversation)
        if not turns:
            log.debug("%s: conversation %d is empty; skipped", path, i)
            continue
        docs.append(
            Document(
                id=f"chatterbot-{path.stem}-{i:04d}",
                text="\n".join(turns),
                metadata={"category": category, "file": path.name, "question": turns[0], "n_turns": len(turns)},
            )
        )
    return docs


def _turns(conversation: Any) -> list[str]:
    # one trivia entry (1.3.3) is a bare string, not a list: keep it as a one-turn conversation
    items = conversation if isinstance(conversation, list) else [conversation]
    return [str(item).strip() for item in items if item is not None and str(item).strip()]
