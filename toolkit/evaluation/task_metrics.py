"""Task metrics on labelled data: top-1 for classifiers, ROC AUC for anomaly detection."""

from __future__ import annotations

import numpy as np


def top1(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.asarray(logits).reshape(len(labels), -1).argmax(axis=1) == labels))


def reconstruction_scores(inputs: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    """The MLPerf Tiny anomaly score: per clip, the mean squared reconstruction error over its
    windows; inputs and outputs (N, W, features) or (N, features)."""
    n = len(inputs)
    error = (
        np.asarray(inputs, np.float64).reshape(n, -1)
        - np.asarray(outputs, np.float64).reshape(n, -1)
    ) ** 2
    return error.mean(axis=1)


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of scores (higher: more anomalous) for labels 1 (anomalous)
    against 0: the probability that an anomalous clip scores above a normal one, ties half."""
    scores, labels = np.asarray(scores, np.float64), np.asarray(labels)
    positive, negative = scores[labels != 0], scores[labels == 0]
    if not len(positive) or not len(negative):
        return float("nan")
    order = np.argsort(np.concatenate([positive, negative]), kind="mergesort")
    ranks = np.empty(len(order))
    values = np.concatenate([positive, negative])[order]
    ranks[order] = np.arange(1, len(order) + 1)
    for value in np.unique(values[np.r_[False, values[1:] == values[:-1]]]):  # average tied ranks
        tied = np.concatenate([positive, negative]) == value
        ranks[tied] = ranks[tied].mean()
    u = ranks[: len(positive)].sum() - len(positive) * (len(positive) + 1) / 2
    return float(u / (len(positive) * len(negative)))
