"""The sentence classifier: a small ReLU MLP from sentence features to P(private).

Features (``FEATURE_SETS``):

* ``paper``    - [Ŝ_i] only, as the paper describes (Chen, Wang, Zhang, Gu 2025, arXiv 2507.23229);
* ``cosine``   - [S_i], the cosine-only ablation (no NLI);
* ``extended`` - [S_i, Ŝ_i, p_c, p_n, p_e, log(1 + tokens)], an [IMPL-CHOICE] reported separately;
* ``surprisal`` - [S_i, log(1 + n), surprisal per token, log(1 + tokens)] with n the sentence's
  tokens the standard LLM gives under 1% probability (``scoring.py``), an [IMPL-CHOICE].

Model: StandardScaler, then ``MLPClassifier(hidden_layer_sizes=(16, 8), activation="relu",
solver="adam", learning_rate_init=1e-3)`` trained with binary cross-entropy (log-loss) on
labels y_i from ``labels.py``. Training and evaluation are split by *query*
(``split_by_query``), never by sentence, so sentences of one answer never sit on both sides.

Persistence: ``save(path)`` writes one JSON file: the feature set, hyper-parameters, training
counts and the weights as plain arrays (scaler means and scales, each layer's coefficients and
intercepts). ``load`` rebuilds the forward pass in numpy (``MLPWeights``), so no scikit-learn
object is ever deserialised: a ``classifier_path`` in a grid config is data, never code. A
pickle or joblib file is refused with a ``ConfigError`` before a byte of it is interpreted.
JSON keeps every float64 exactly (shortest round-trip repr), so a loaded classifier scores
exactly as the saved one.
"""

from __future__ import annotations

import json
import logging
import math
import stat
import warnings
from dataclasses import dataclass
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
    "surprisal": ("cosine", "log_surprising", "surprisal_per_token", "log_tokens"),
}
#: features read from the standard LLM's likelihood of the sentence (``SentenceScore.surprisal``)
SURPRISAL_FEATURES = frozenset({"log_surprising", "surprisal_per_token"})


def feature_row(s: SentenceScore, names: Sequence[str]) -> list[float]:
    values = {"cosine": s.cosine, "score": s.score, "p_contradiction": s.p_contradiction,
              "p_neutral": s.p_neutral, "p_entailment": s.p_entailment,
              "log_tokens": math.log1p(len(tokens(s.text)))}
    if SURPRISAL_FEATURES & set(names):
        if s.surprisal is None or s.surprising_tokens is None or not s.n_tokens:
            raise ConfigError(f"sentence {s.text[:40]!r} has no likelihood scores; the surprisal features need "
                              "the standard LLM's token log-probabilities")
        values.update(log_surprising=math.log1p(s.surprising_tokens), surprisal_per_token=s.surprisal / s.n_tokens)
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


CLASSIFIER_KIND = "ragleak.asymmetry.classifier"
CLASSIFIER_SCHEMA_VERSION = 2  # 1 was a joblib pickle with a JSON sidecar: refused, retrain
# the first bytes of a pickle (protocol 2+ opcode), a zlib/gzip/bz2/xz/lzma-compressed joblib dump
_PICKLE_MAGIC = (b"\x80", b"\x78", b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x5d\x00")


@dataclass(frozen=True)
class MLPWeights:
    """A fitted StandardScaler + ReLU MLP with a logistic output, as plain float64 arrays; its
    ``predict_proba`` is scikit-learn's forward pass (``MLPClassifier._forward_pass_fast``)."""

    mean: np.ndarray
    scale: np.ndarray
    coefs: tuple[np.ndarray, ...]
    intercepts: tuple[np.ndarray, ...]

    @classmethod
    def from_sklearn(cls, pipeline) -> "MLPWeights":
        scaler, mlp = pipeline[0], pipeline[-1]
        if mlp.out_activation_ != "logistic" or mlp.activation != "relu":
            raise ConfigError(f"expected a ReLU MLP with a logistic output, got {mlp.activation}/{mlp.out_activation_}")
        return cls(np.asarray(scaler.mean_, dtype=np.float64), np.asarray(scaler.scale_, dtype=np.float64),
                   tuple(np.asarray(c, dtype=np.float64) for c in mlp.coefs_),
                   tuple(np.asarray(b, dtype=np.float64) for b in mlp.intercepts_))

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """P(class 1) for each row of ``X``."""
        from scipy.special import expit

        h = (np.asarray(X, dtype=np.float64) - self.mean) / self.scale
        last = len(self.coefs) - 1
        for i, (W, b) in enumerate(zip(self.coefs, self.intercepts)):
            h = h @ W + b
            if i < last:
                h = np.maximum(h, 0.0)
        return expit(h)[:, 0]

    def to_json(self) -> dict:
        return {"scaler_mean": self.mean.tolist(), "scaler_scale": self.scale.tolist(),
                "coefs": [c.tolist() for c in self.coefs], "intercepts": [b.tolist() for b in self.intercepts]}

    @classmethod
    def from_json(cls, data: dict, n_features: int, where: Path) -> "MLPWeights":
        try:
            weights = cls(np.array(data["scaler_mean"], dtype=np.float64), np.array(data["scaler_scale"], dtype=np.float64),
                          tuple(np.array(c, dtype=np.float64) for c in data["coefs"]),
                          tuple(np.array(b, dtype=np.float64) for b in data["intercepts"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: malformed classifier weights ({type(exc).__name__}: {exc})") from None
        weights._check(n_features, where)
        return weights

    def _check(self, n_features: int, where: Path) -> None:
        shapes_ok = (self.mean.shape == self.scale.shape == (n_features,) and self.coefs
                     and len(self.coefs) == len(self.intercepts))
        width = n_features
        for W, b in zip(self.coefs, self.intercepts) if shapes_ok else ():
            shapes_ok = shapes_ok and W.ndim == 2 and W.shape[0] == width and b.shape == (W.shape[1],)
            width = W.shape[1] if W.ndim == 2 else -1
        if not shapes_ok or width != 1:
            raise ConfigError(f"{where}: classifier weights do not fit a {n_features}-feature MLP with one output")
        if not all(np.isfinite(a).all() for a in (self.mean, self.scale, *self.coefs, *self.intercepts)):
            raise ConfigError(f"{where}: classifier weights contain NaN or infinity")


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
        self.model = MLPWeights.from_sklearn(model)
        self.training = {"n_queries": len(observations), "n_sentences": int(len(y)), "n_private": int(y.sum())}
        return self

    def predict_proba(self, sentences: Sequence[SentenceScore]) -> np.ndarray:
        if self.model is None:
            raise ConfigError("the classifier is not fitted; call fit() or load()")
        if not sentences:
            return np.zeros(0)
        X = np.array([feature_row(s, FEATURE_SETS[self.feature_set]) for s in sentences], dtype=np.float64)
        return self.model.predict_proba(X)

    def groups(self, observations: Sequence[Observation]) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(y, P(private))`` per labelled observation, for ``ragleak.metrics.attribution.evaluate``."""
        return [(np.array(o.labels, dtype=int), self.predict_proba(o.sentences)) for o in observations
                if o.labels is not None and o.sentences]

    def save(self, path: Path) -> Path:
        """Write the classifier as one JSON file (weights as plain arrays; see the module doc)."""
        if self.model is None:
            raise ConfigError("cannot save an unfitted classifier")
        path = Path(path)
        document = {"kind": CLASSIFIER_KIND, "schema_version": CLASSIFIER_SCHEMA_VERSION,
                    "hyperparameters": self.hyperparameters(), "features": list(FEATURE_SETS[self.feature_set]),
                    "training": self.training, "weights": self.model.to_json()}
        atomic_write_text(path, json.dumps(document) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> "AsymmetryClassifier":
        """Read a classifier written by ``save``; anything else (a pickle or joblib file above all)
        is a one-line ``ConfigError`` and is never executed."""
        path = Path(path)
        meta = _read_classifier_json(path)
        if meta.get("schema_version") != CLASSIFIER_SCHEMA_VERSION:
            raise ConfigError(f"{path} has classifier schema {meta.get('schema_version')}, this ragleak reads "
                              f"{CLASSIFIER_SCHEMA_VERSION}; retrain it")
        try:
            hp = meta["hyperparameters"]
            clf = cls(feature_set=hp["feature_set"], hidden=tuple(hp["hidden"]), learning_rate=hp["learning_rate"],
                      alpha=hp["alpha"], max_iter=hp["max_iter"], seed=hp["seed"])
            weights = meta["weights"]
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: malformed classifier file (missing {exc})") from None
        clf.model = MLPWeights.from_json(weights, len(FEATURE_SETS[clf.feature_set]), path)
        clf.training = meta.get("training", {})
        return clf


_MAX_CLASSIFIER_BYTES = 64 * 2**20  # a (16, 8) MLP is a few kB; this bounds a wrong path's cost


def _read_classifier_json(path: Path) -> dict:
    try:
        # checked before opening: a FIFO or a device (/dev/zero) would block or never end
        if not stat.S_ISREG(path.stat().st_mode):
            raise ConfigError(f"classifier {path} is not a regular file")
        if path.stat().st_size > _MAX_CLASSIFIER_BYTES:
            raise ConfigError(f"classifier {path} is {path.stat().st_size} bytes; a classifier file is a few kB")
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"classifier {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"classifier {path}: cannot read: {exc.strerror or exc}") from None
    if path.suffix.lower() in (".pkl", ".pickle", ".joblib") or data.startswith(_PICKLE_MAGIC):
        raise ConfigError(f"classifier {path} looks like a pickle/joblib file; ragleak never loads those (they can "
                          "run code): retrain and save it with AsymmetryClassifier.save (JSON weights)")
    try:
        meta = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ConfigError(f"classifier {path} is not a ragleak classifier JSON file") from None
    if not isinstance(meta, dict) or meta.get("kind") != CLASSIFIER_KIND:
        raise ConfigError(f"classifier {path} is not a ragleak classifier JSON file (no kind {CLASSIFIER_KIND!r})")
    return meta


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
