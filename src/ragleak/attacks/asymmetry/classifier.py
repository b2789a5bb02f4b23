"""The sentence classifier: a small ReLU MLP from sentence features to P(private).

Features (``FEATURE_SETS``):

* ``paper``    - [Ŝ_i] only, as the paper describes (Chen, Wang, Zhang, Gu 2025, arXiv 2507.23229);
* ``cosine``   - [S_i], the cosine-only ablation (no NLI);
* ``extended`` - [S_i, Ŝ_i, p_c, p_n, p_e, log(1 + tokens)], an [IMPL-CHOICE] reported separately.

Model: StandardScaler, then ``MLPClassifier(hidden_layer_sizes=(16, 8), activation="relu",
solver="adam", learning_rate_init=1e-3)`` trained with binary cross-entropy (log-loss) on
labels y_i from ``labels.py``. Training and evaluation are split by *query*
(``split_by_query``), never by sentence, so sentences of one answer never sit on both sides.

Persistence: ``save(path)`` writes the fitted scikit-learn pipeline with joblib and a JSON
sidecar ``<path>.json`` (feature set, hyper-parameters, scikit-learn version, training counts);
``load`` refuses a model whose sidecar is missing or was written by another scikit-learn
version. joblib files are pickles: load only files you wrote.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from ragleak.attacks.asymmetry.probe import Observation
from ragleak.attacks.asymmetry.scoring import SentenceScore
from ragleak.attacks.asymmetry.labels import tokens
from ragleak.errors import ConfigError
from ragleak.files import atomic_write_text

log = logging.getLogger(__name__)

FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "paper": ("score",),
    "cosine": ("cosine",),
    "extended": ("cosine", "score", "p_contradiction", "p_neutral", "p_entailment", "log_tokens"),
}


def feature_row(s: SentenceScore, names: Sequence[str]) -> list[float]:
    values = {"cosine": s.cosine, "score": s.score, "p_contradiction": s.p_contradiction,
              "p_neutral": s.p_neutral, "p_entailment": s.p_entailment,
              "log_tokens": math.log1p(len(tokens(s.text)))}
    return [float(values[n]) for n in names]


def design(observations: Sequence[Observation], feature_set: str) -> tuple[np.ndarray, np.ndarray]:
    """Feature matrix X and label vector y over all sentences of labelled observations."""
    names = FEATURE_SETS[feature_set]
    rows, ys = [], []
    for obs in observations:
        if obs.labels is None:
            raise ConfigError(f"observation for {obs.query!r} has no labels (the target exposed no trace)")
        rows.extend(feature_row(s, names) for s in obs.sentences)
        ys.extend(obs.labels)
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(names)), np.array(ys, dtype=int)


def split_by_query(observations: Sequence[Observation], test_fraction: float = 0.3,
                   seed: int = 0) -> tuple[list[Observation], list[Observation]]:
    """Shuffle queries with a seeded RNG; the last ``ceil(test_fraction * n)`` are held out."""
    if not 0 < test_fraction < 1:
        raise ConfigError(f"test_fraction must be in (0, 1), got {test_fraction}")
    order = np.random.default_rng(seed).permutation(len(observations))
    n_test = max(1, math.ceil(test_fraction * len(observations)))
    test = set(order[-n_test:].tolist())
    return ([o for i, o in enumerate(observations) if i not in test],
            [o for i, o in enumerate(observations) if i in test])


class AsymmetryClassifier:
    """Constructor stores hyper-parameters; ``fit`` trains; ``predict_proba`` gives P(private)."""

    def __init__(self, feature_set: str = "paper", hidden: tuple[int, ...] = (16, 8), learning_rate: float = 1e-3,
                 alpha: float = 1e-4, max_iter: int = 3000, seed: int = 0) -> None:
        if feature_set not in FEATURE_SETS:
            raise ConfigError(f"unknown feature set {feature_set!r}; known: {', '.join(FEATURE_SETS)}")
        self.feature_set = feature_set
        self.hidden = tuple(hidden)
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.max_iter = max_iter
        self.seed = seed
        self.model = None
        self.training: dict = {}

    def hyperparameters(self) -> dict:
        return {"feature_set": self.feature_set, "hidden": list(self.hidden), "learning_rate": self.learning_rate,
                "alpha": self.alpha, "max_iter": self.max_iter, "seed": self.seed}

    def fit(self, observations: Sequence[Observation]) -> "AsymmetryClassifier":
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPClassifier
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        X, y = design(observations, self.feature_set)
        if len(set(y.tolist())) < 2:
            raise ConfigError(f"training needs both classes; got {len(y)} sentences all labelled {y[:1].tolist()}")
        model = make_pipeline(StandardScaler(), MLPClassifier(
            hidden_layer_sizes=self.hidden, activation="relu", solver="adam", learning_rate_init=self.learning_rate,
            alpha=self.alpha, max_iter=self.max_iter, random_state=self.seed))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(X, y)
        for w in caught:
            log.warning("classifier training: %s", w.message)
        self.model = model
        self.training = {"n_queries": len(observations), "n_sentences": int(len(y)), "n_private": int(y.sum())}
        return self

    def predict_proba(self, sentences: Sequence[SentenceScore]) -> np.ndarray:
        if self.model is None:
            raise ConfigError("the classifier is not fitted; call fit() or load()")
        if not sentences:
            return np.zeros(0)
        X = np.array([feature_row(s, FEATURE_SETS[self.feature_set]) for s in sentences], dtype=np.float64)
        return self.model.predict_proba(X)[:, 1]

    def groups(self, observations: Sequence[Observation]) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(y, P(private))`` per labelled observation, for ``ragleak.metrics.attribution.evaluate``."""
        return [(np.array(o.labels, dtype=int), self.predict_proba(o.sentences)) for o in observations
                if o.labels is not None and o.sentences]

    def save(self, path: Path) -> Path:
        import joblib
        import sklearn

        if self.model is None:
            raise ConfigError("cannot save an unfitted classifier")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        joblib.dump(self.model, tmp)
        tmp.replace(path)
        sidecar = {"kind": "ragleak.asymmetry.classifier", "schema_version": 1, "sklearn": sklearn.__version__,
                   "hyperparameters": self.hyperparameters(), "features": list(FEATURE_SETS[self.feature_set]),
                   "training": self.training}
        atomic_write_text(sidecar_path(path), json.dumps(sidecar, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> "AsymmetryClassifier":
        import joblib
        import sklearn

        path = Path(path)
        meta_path = sidecar_path(path)
        if not path.exists() or not meta_path.exists():
            raise ConfigError(f"classifier {path} or its sidecar {meta_path} is missing")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("kind") != "ragleak.asymmetry.classifier":
            raise ConfigError(f"{meta_path} is not an asymmetry-classifier sidecar")
        if meta["sklearn"] != sklearn.__version__:
            raise ConfigError(f"{path} was saved with scikit-learn {meta['sklearn']}, this is {sklearn.__version__}; retrain it")
        hp = meta["hyperparameters"]
        clf = cls(feature_set=hp["feature_set"], hidden=tuple(hp["hidden"]), learning_rate=hp["learning_rate"],
                  alpha=hp["alpha"], max_iter=hp["max_iter"], seed=hp["seed"])
        clf.model = joblib.load(path)
        clf.training = meta.get("training", {})
        return clf


def sidecar_path(path: Path) -> Path:
    return Path(path).with_name(Path(path).name + ".json")


def select_feature_set(observations: Sequence[Observation], candidates: Sequence[str] = ("paper", "cosine", "extended"),
                       n_folds: int = 3, seed: int = 0, **hyperparameters) -> tuple[str, dict[str, float]]:
    """Pick a feature set by grouped cross-validation on *training* queries only.

    Queries are shuffled (seeded) and dealt into ``n_folds`` folds; for each candidate, train on
    the other folds and pool P(private) over the held-out folds; the pooled ROC AUC decides
    (ties: the earlier candidate). The held-out test queries must not be in ``observations``.
    """
    from sklearn.metrics import roc_auc_score

    if len(observations) < n_folds:
        raise ConfigError(f"need at least {n_folds} training queries to cross-validate, got {len(observations)}")
    order = np.random.default_rng(seed).permutation(len(observations))
    folds = [[observations[i] for i in order[f::n_folds]] for f in range(n_folds)]
    scores: dict[str, float] = {}
    for name in candidates:
        ys, ps = [], []
        for f in range(n_folds):
            train = [o for g, fold in enumerate(folds) if g != f for o in fold]
            _, y_train = design(train, name)
            if len(set(y_train.tolist())) < 2:
                continue
            clf = AsymmetryClassifier(feature_set=name, seed=seed, **hyperparameters).fit(train)
            for y, p in clf.groups(folds[f]):
                ys.append(y)
                ps.append(p)
        y_all = np.concatenate(ys) if ys else np.zeros(0, dtype=int)
        # AUC is undefined over one class: the candidate cannot be scored (NaN, skipped below)
        scores[name] = float(roc_auc_score(y_all, np.concatenate(ps))) if len(set(y_all.tolist())) == 2 \
            else float("nan")
    valid = {k: v for k, v in scores.items() if not np.isnan(v)}
    if not valid:
        raise ConfigError("cross-validation could not score any feature set (one class only in every fold)")
    best = max(valid, key=lambda k: (valid[k], -list(candidates).index(k)))
    return best, scores
