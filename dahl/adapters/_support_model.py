"""The learned support model of the evidence Checker: load it and predict, in numpy.

A multinomial logistic regression over the features of
:mod:`dahl.adapters._support_features`, trained by ``python -m bench.train_checker``
and shipped as ``dahl/adapters/support_model.json``::

    {"version": "...", "classes": ["supports", "refutes", "neutral"],
     "features": [...], "mean": [...], "scale": [...],
     "coef": [[...] x n_classes], "intercept": [...],
     "training": {"command", "seed", "split", "files": {path: sha256}, "rows", ...}}

P(class | x) = softmax(W · (x - mean) / scale + b) (the standardization is part
of the model). No scikit-learn at run time.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from dahl.adapters._support_features import FEATURE_NAMES
from dahl.errors import ConfigError

__all__ = ["CLASSES", "SupportModel", "load_support_model", "parse_support_model"]

#: The model's classes, in the order of its probability vectors.
CLASSES = ("supports", "refutes", "neutral")

_RESOURCE = "support_model.json"


@dataclass(frozen=True)
class SupportModel:
    """A fitted multinomial logistic regression with its feature standardization.

    Attributes:
        features: feature names, in the order the vectors use.
        mean: float64 array of shape (n_features,), subtracted first.
        scale: float64 array of shape (n_features,), divided by next (> 0).
        coef: float64 array of shape (n_classes, n_features).
        intercept: float64 array of shape (n_classes,).
        digest: first 12 hex digits of the SHA-256 of the model file (goes into
            the Checker's fingerprint, so a retrained model is a new Checker).
        training: the training record (command, seed, split, data hashes).
    """

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    digest: str
    training: dict[str, Any]

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities of feature rows.

        Args:
            x: float array of shape (n_rows, n_features) or (n_features,).

        Returns:
            float64 array of shape (n_rows, 3) (or (3,)), rows summing to 1, in
            :data:`CLASSES` order.
        """
        z = ((np.asarray(x, dtype=np.float64) - self.mean) / self.scale) @ self.coef.T + self.intercept
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        out: np.ndarray = e / e.sum(axis=-1, keepdims=True)
        return out

    def contributions(self, x: np.ndarray, cls: int) -> list[tuple[str, float]]:
        """Per-feature terms of one class's logit for one row, largest magnitude first.

        Args:
            x: float array of shape (n_features,).
            cls: class index into :data:`CLASSES`.

        Returns:
            ``(feature name, coef * standardized value)`` pairs, sorted by |value|.
        """
        terms = self.coef[cls] * (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        pairs = [(n, float(v)) for n, v in zip(self.features, terms, strict=True)]
        return sorted(pairs, key=lambda p: -abs(p[1]))


def parse_support_model(data: bytes) -> SupportModel:
    """Read a model file's bytes.

    Raises:
        ConfigError: not valid JSON, fields missing, shapes inconsistent, or the
            feature names differ from :data:`FEATURE_NAMES` (a model trained for
            other features).
    """
    try:
        raw = msgspec.json.decode(data)
        features = tuple(str(f) for f in raw["features"])
        mean = np.asarray(raw["mean"], dtype=np.float64)
        scale = np.asarray(raw["scale"], dtype=np.float64)
        coef = np.asarray(raw["coef"], dtype=np.float64)
        intercept = np.asarray(raw["intercept"], dtype=np.float64)
        classes = tuple(raw["classes"])
        training = dict(raw.get("training", {}))
    except (msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"support model file is malformed: {exc}") from exc
    n = len(features)
    if features != FEATURE_NAMES:
        raise ConfigError("support model was trained for other features; retrain with python -m bench.train_checker")
    if classes != CLASSES or coef.shape != (len(CLASSES), n) or intercept.shape != (len(CLASSES),):
        raise ConfigError(f"support model has classes {classes} and coef shape {coef.shape}")
    if mean.shape != (n,) or scale.shape != (n,) or not np.all(scale > 0):
        raise ConfigError("support model mean/scale must be n_features long with scale > 0")
    return SupportModel(
        features, mean, scale, coef, intercept, hashlib.sha256(data).hexdigest()[:12], training
    )


@functools.lru_cache(maxsize=1)
def load_support_model() -> SupportModel:
    """The model shipped in the package (read once).

    Raises:
        ConfigError: the shipped file is missing or malformed.
    """
    try:
        data = importlib.resources.files("dahl.adapters").joinpath(_RESOURCE).read_bytes()
    except OSError as exc:
        raise ConfigError(f"support model {_RESOURCE} not found in the package: {exc}") from exc
    return parse_support_model(data)
