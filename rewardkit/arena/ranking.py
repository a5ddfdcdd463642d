"""Bradley-Terry with soft outcomes (Reasoning Arena eq. 9-10), win-rate rewards (eq. 8), and checks.

Style follows choix: functions are named ``<algorithm>_<data>`` and take ``(n_items, data, ...)``; data
are matches ``(i, j, o_ij)`` where ``o_ij`` in [0, 1] is the soft outcome for item ``i`` (eq. 7).
Numpy in, numpy out. ``bradley_terry(n_items, data)`` is the public name of ``opt_soft_pairwise``
(the same arguments). The tournament schedules that produce the matches live in ``rewardkit.arena.tournaments``
(their names stay importable from here).

A note on mirroring (eq. 10): the mirrored match ``(j, i, 1 - o)`` contributes exactly the same
cross-entropy term as ``(i, j, o)``, so with the soft cross-entropy the mirror doubles the data term
relative to the L2 penalty; it does not change which strengths the data prefer. We implement the
equation as written (``mirror=True`` by default) and keep ``mirror=False`` for the plain loss.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import optimize
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import expit

__all__ = [
    "NoMLEError",
    "NotConvergedError",
    "as_matches",
    "bradley_terry",
    "minmax_normalize",
    "mle_problem",
    "opt_soft_pairwise",
    "newton_soft_pairwise_batched",
    "win_rate_pairwise",
    "bt_log_likelihood",
    "cyclic_triad_fraction",
]


class NoMLEError(ValueError):
    """The unregularised (l2=0) Bradley-Terry MLE does not exist for these matches."""


class NotConvergedError(RuntimeError):
    """The Bradley-Terry fit stopped at its iteration cap before its gradient tolerance: its strengths are not
    eq. 10's optimum, so they are not returned as if they were."""


def as_matches(data: Sequence[Sequence[float]] | np.ndarray, n_items: int | None = None) -> np.ndarray:
    """Validate matches and return them as a float array of shape [M, 3] (columns i, j, o_ij)."""
    arr = np.asarray(data, dtype=np.float64)
    if arr.size == 0:
        return np.zeros((0, 3))
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"ranking: matches must have shape [M, 3] as (i, j, o_ij), got {arr.shape}")
    ij = arr[:, :2]
    if not np.all(np.isfinite(arr)):
        raise ValueError("ranking: matches contain NaN or inf (drop invalid matches before fitting)")
    if np.any(ij != np.round(ij)) or np.any(ij < 0):
        raise ValueError("ranking: item indices must be non-negative integers")
    if n_items is not None and np.any(ij >= n_items):
        raise ValueError(f"ranking: item index {int(ij.max())} out of range for n_items={n_items}")
    if np.any(arr[:, 0] == arr[:, 1]):
        raise ValueError("ranking: a match pits an item against itself")
    o = arr[:, 2]
    if np.any((o < 0) | (o > 1)):
        raise ValueError("ranking: soft outcomes o_ij must lie in [0, 1] (eq. 7)")
    return arr


def _mirrored(arr: np.ndarray) -> np.ndarray:
    """Eq. 10's symmetrised match set: every (i, j, o) plus (j, i, 1 - o)."""
    return np.concatenate([arr, np.stack([arr[:, 1], arr[:, 0], 1.0 - arr[:, 2]], axis=1)])


def _loss_grad(beta: np.ndarray, i: np.ndarray, j: np.ndarray, o: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """Eq. 10: soft cross-entropy of sigma(beta_i - beta_j) against o, plus l2/2 ||beta||^2, and its gradient."""
    d = beta[i] - beta[j]
    # -[o log s(d) + (1-o) log s(-d)] = o*softplus(-d) + (1-o)*softplus(d), computed stably
    loss = float(np.sum(o * np.logaddexp(0.0, -d) + (1.0 - o) * np.logaddexp(0.0, d))) + 0.5 * l2 * float(beta @ beta)
    r = expit(d) - o  # d loss / d d
    grad = l2 * beta + np.bincount(i, r, minlength=len(beta)) - np.bincount(j, r, minlength=len(beta))
    return loss, grad


def bt_log_likelihood(beta: np.ndarray, data: Sequence[Sequence[float]] | np.ndarray) -> float:
    """Soft log-likelihood sum o log s(b_i - b_j) + (1 - o) log s(b_j - b_i) of matches under ``beta``."""
    arr = as_matches(data, len(beta))
    i, j, o = arr[:, 0].astype(int), arr[:, 1].astype(int), arr[:, 2]
    return -_loss_grad(np.asarray(beta, float), i, j, o, 0.0)[0]


def mle_problem(n_items: int, data: Sequence[Sequence[float]] | np.ndarray) -> str | None:
    """Why the unregularised MLE does not exist (None when it exists and is unique up to a shift).

    It exists iff the directed graph with an edge i -> j whenever i took some outcome mass from j is
    strongly connected (Zermelo / Ford's condition, with soft outcomes as fractional wins).
    """
    arr = as_matches(data, n_items)
    if n_items <= 1:
        return None
    i, j, o = arr[:, 0].astype(int), arr[:, 1].astype(int), arr[:, 2]
    played = np.zeros(n_items, bool)
    played[i] = played[j] = True
    if not played.all():
        return f"items {np.flatnonzero(~played).tolist()} have no match"
    wins = np.zeros(n_items)
    losses = np.zeros(n_items)
    np.add.at(wins, i, o)
    np.add.at(wins, j, 1 - o)
    np.add.at(losses, i, 1 - o)
    np.add.at(losses, j, o)
    only_win = np.flatnonzero(losses == 0)
    only_lose = np.flatnonzero(wins == 0)
    if len(only_win) or len(only_lose):
        parts = []
        if len(only_win):
            parts.append(f"items {only_win.tolist()} only win (strength -> +inf)")
        if len(only_lose):
            parts.append(f"items {only_lose.tolist()} only lose (strength -> -inf)")
        return "; ".join(parts)
    und = coo_matrix((np.ones(len(i)), (i, j)), shape=(n_items, n_items))
    n_comp, _ = connected_components(und, directed=False)
    if n_comp > 1:
        return f"the comparison graph is disconnected ({n_comp} components): relative strengths across them are undefined"
    src = np.concatenate([i[o > 0], j[o < 1]])  # winner -> loser edges carrying positive outcome mass
    dst = np.concatenate([j[o > 0], i[o < 1]])
    g = coo_matrix((np.ones(len(src)), (src, dst)), shape=(n_items, n_items))
    n_strong, _ = connected_components(g, directed=True, connection="strong")
    if n_strong > 1:
        return "a subset of items beats every item outside it (win graph not strongly connected): strengths diverge"
    return None


def opt_soft_pairwise(
    n_items: int,
    data: Sequence[Sequence[float]] | np.ndarray,
    l2: float = 1.0,
    mirror: bool = True,
    gtol: float = 1e-9,
    max_iter: int = 1000,
) -> np.ndarray:
    """Log-strengths minimising eq. 10 with scipy L-BFGS-B and the analytic gradient.

    ``l2 = 0`` gives the plain MLE, centred to mean 0; raises ``NoMLEError`` when it does not exist, and
    ``NotConvergedError`` when L-BFGS-B reaches ``max_iter`` iterations short of ``gtol``.
    """
    if l2 < 0:
        raise ValueError(f"ranking: l2 must be >= 0, got {l2}")
    arr = as_matches(data, n_items)
    if l2 == 0:
        why = mle_problem(n_items, arr)
        if why is not None:
            raise NoMLEError(f"Bradley-Terry MLE (l2=0) does not exist: {why}; use l2 > 0")
    if mirror and len(arr):
        arr = _mirrored(arr)
    if len(arr) == 0 or n_items == 0:
        return np.zeros(n_items)
    i, j, o = arr[:, 0].astype(int), arr[:, 1].astype(int), arr[:, 2]
    res = optimize.minimize(
        _loss_grad, np.zeros(n_items), args=(i, j, o, l2), jac=True, method="L-BFGS-B",
        options={"maxiter": max_iter, "ftol": 1e-15, "gtol": gtol},
    )
    if res.status == 1:  # L-BFGS-B's iteration/evaluation cap, not its tolerance, ended the fit
        raise NotConvergedError(
            f"Bradley-Terry fit of {n_items} items on {len(arr)} matches (l2={l2}) stopped after {res.nit} "
            f"iterations with max |gradient| {np.abs(res.jac).max():.3g} > gtol {gtol}; raise max_iter")
    beta = res.x
    if l2 == 0:
        beta = beta - beta.mean()  # the MLE is defined up to a shift (eq. 9 depends on differences only)
    return beta


def bradley_terry(
    n_items: int, data: Sequence[Sequence[float]] | np.ndarray, *, l2: float = 1.0, mirror: bool = True
) -> np.ndarray:
    """Log-strengths beta of ``n_items`` from soft matches ``(i, j, o_ij)`` (eq. 9-10), via L-BFGS-B.

    Item 0 beat item 1 in three of four matches, item 1 beat item 2 twice out of two:

    >>> beta = bradley_terry(3, [(0, 1, 1), (0, 1, 1), (0, 1, 1), (0, 1, 0), (1, 2, 1), (1, 2, 1)])
    >>> [int(i) for i in np.argsort(-beta)]
    [0, 1, 2]
    """
    return opt_soft_pairwise(n_items, data, l2=l2, mirror=mirror)


def newton_soft_pairwise_batched(
    n_items: int,
    data: np.ndarray,
    mask: np.ndarray | None = None,
    l2: float = 1.0,
    mirror: bool = True,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> np.ndarray:
    """Eq. 10 for many groups at once: vectorised damped Newton on padded matches [G, M, 3] -> beta [G, N].

    ``mask`` [G, M] marks real matches (padding is ignored). Requires ``l2 > 0`` (a unique optimum in
    every group, including items with no match, which get beta = 0). Reaches the same optimum as
    ``opt_soft_pairwise``: the loss is strictly convex and each Newton step is backtracked until it
    decreases; iteration stops when every group's max |gradient| < ``tol``.
    """
    if l2 <= 0:
        raise ValueError("ranking: the batched fitter needs l2 > 0; use opt_soft_pairwise for the MLE")
    data = np.asarray(data, dtype=np.float64)
    if data.ndim != 3 or data.shape[2] != 3:
        raise ValueError(f"ranking: batched matches must have shape [G, M, 3], got {data.shape}")
    G, M, _ = data.shape
    mask = np.ones((G, M), bool) if mask is None else np.asarray(mask, bool)
    i = np.where(mask, data[..., 0], 0).astype(np.int64)
    j = np.where(mask, data[..., 1], 0).astype(np.int64)
    o = np.where(mask, data[..., 2], 0.5)
    if np.any(mask & ((i < 0) | (i >= n_items) | (j < 0) | (j >= n_items) | (i == j))):
        raise ValueError("ranking: batched matches have out-of-range or self-paired item indices")
    if np.any(mask & ((o < 0) | (o > 1) | ~np.isfinite(o))):
        raise ValueError("ranking: soft outcomes o_ij must lie in [0, 1] (eq. 7)")
    w = mask.astype(np.float64) * (2.0 if mirror else 1.0)  # the mirror repeats the same loss term
    eye = np.eye(n_items)
    B = eye[i] - eye[j]  # [G, M, N] incidence: d = B @ beta
    beta = np.zeros((G, n_items))

    f = _masked_loss(B, o, w, beta, l2)
    active = np.ones(G, bool)
    for _ in range(max_iter):
        d = np.einsum("gmn,gn->gm", B, beta)
        s = expit(d)
        g = np.einsum("gmn,gm->gn", B, w * (s - o)) + l2 * beta
        active = np.abs(g).max(-1) >= tol
        if not active.any():
            break
        H = np.einsum("gmn,gm,gmk->gnk", B[active], (w * s * (1 - s))[active], B[active]) + l2 * eye
        try:
            step = -np.linalg.solve(H, g[active][..., None])[..., 0]
        except np.linalg.LinAlgError as e:  # l2 too small to keep a separable group's Hessian invertible in fp64
            raise NotConvergedError(f"batched Bradley-Terry fit: Newton's Hessian is singular at l2={l2} (a group "
                                    "whose items only win or only lose is held by the l2 term alone); use a "
                                    "larger l2, or opt_soft_pairwise") from e
        t = np.ones(int(active.sum()))
        b0, f0 = beta[active], f[active]
        for _ in range(30):  # backtracking: halve where the loss did not decrease
            cand = b0 + t[:, None] * step
            fc = _masked_loss(B[active], o[active], w[active], cand, l2)
            bad = fc > f0 + 1e-14 * np.abs(f0)
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
        beta[active] = cand
        f[active] = fc
    return beta


def _masked_loss(B: np.ndarray, o: np.ndarray, w: np.ndarray, b: np.ndarray, l2: float) -> np.ndarray:
    d = np.einsum("gmn,gn->gm", B, b)
    ce = o * np.logaddexp(0.0, -d) + (1.0 - o) * np.logaddexp(0.0, d)
    return (w * ce).sum(-1) + 0.5 * l2 * (b * b).sum(-1)


def minmax_normalize(beta: np.ndarray, equal: float = 0.5) -> np.ndarray:
    """Min-max scale strengths to [0, 1] (Sec. 4, last step); all-equal (or one) finite values map to ``equal``.

    NaN entries (items without a valid match) stay NaN and are ignored for the min and max.
    """
    b = np.asarray(beta, dtype=np.float64)
    out = np.full_like(b, np.nan)
    ok = np.isfinite(b)
    if not ok.any():
        return out
    lo, hi = b[ok].min(), b[ok].max()
    span = hi - lo
    if span <= 1e-12 * max(1.0, abs(hi), abs(lo)):
        out[ok] = equal  # no preference information: every item gets the same reward (zero advantage)
    else:
        out[ok] = (b[ok] - lo) / span
    return out


def win_rate_pairwise(n_items: int, data: Sequence[Sequence[float]] | np.ndarray, normalize: str = "played") -> np.ndarray:
    """Win-rate reward (eq. 8): each item's mean soft outcome over its matches (NaN when it has none).

    ``normalize="n-1"`` divides by N-1 exactly as eq. 8 (a complete round robin gives the same number);
    ``"played"`` divides by the matches the item actually played (used when invalid matches were dropped).
    """
    arr = as_matches(data, n_items)
    i, j, o = arr[:, 0].astype(int), arr[:, 1].astype(int), arr[:, 2]
    score = np.bincount(i, o, minlength=n_items) + np.bincount(j, 1.0 - o, minlength=n_items)
    if normalize == "n-1":
        return score / max(n_items - 1, 1)
    if normalize != "played":
        raise ValueError(f"ranking: normalize must be 'played' or 'n-1', got {normalize!r}")
    games = np.bincount(i, minlength=n_items) + np.bincount(j, minlength=n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(games > 0, score / np.maximum(games, 1), np.nan)


def cyclic_triad_fraction(n_items: int, data: Sequence[Sequence[float]] | np.ndarray) -> float:
    """Share of fully observed triads whose majority preferences form a cycle (judge intransitivity).

    A pair's preference is the sign of its mean outcome minus 1/2 (ties make the triad undecided and it is
    skipped). NaN when no triad has all three pairs decided.
    """
    arr = as_matches(data, n_items)
    s = np.zeros((n_items, n_items))
    c = np.zeros((n_items, n_items))
    for a, b, o in arr:
        a, b = int(a), int(b)
        s[a, b] += o - 0.5
        s[b, a] += 0.5 - o
        c[a, b] += 1
        c[b, a] += 1
    pref = np.sign(s) * (c > 0)
    cyc = tot = 0
    for a in range(n_items):
        for b in range(a + 1, n_items):
            for k in range(b + 1, n_items):
                p1, p2, p3 = pref[a, b], pref[b, k], pref[k, a]
                if p1 == 0 or p2 == 0 or p3 == 0:
                    continue
                tot += 1
                cyc += p1 == p2 == p3
    return cyc / tot if tot else float("nan")

