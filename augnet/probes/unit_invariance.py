"""Per-unit invariance on the inputs that activate each unit (Zaidi et al., section 2.2, eq. 1).

Here live what a unit of a layer is (``UNITS``, :func:`layer_units`), each
unit's normaliser (:func:`unit_scale`) and the invariance coefficients
:func:`neuron_invariance`, computed from given activations. The measure is
described in :mod:`augnet.probes.neurons`, which re-exports everything here.
"""

from __future__ import annotations

import numbers

import torch
from torch import Tensor

from augnet._checks import check_bool, is_int, number
from augnet.probes._common import summary

__all__ = [
    "UNITS",
    "UnitInvariance",
    "layer_units",
    "neuron_invariance",
    "unit_scale",
]

#: What a unit of a layer is: each element after the batch axis, or each channel (mean over positions).
UNITS = ("element", "channel")


def _check_tau(tau, name: str = "tau") -> float:
    """``tau`` as a float in [0, 1]: a real number, a NumPy one or a 0-d tensor or array (the value it holds)."""
    tau = number(name, tau)  # a 0-d tensor (e.g. an element of torch.linspace) is the number it holds
    if isinstance(tau, bool) or not isinstance(tau, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(tau).__name__}")
    tau = float(tau)
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1] (activities are normalised to a maximum of 1), got {tau}")
    return tau


def _check_units(units) -> str:
    if units not in UNITS:
        raise ValueError(f"units must be one of {UNITS}, got {units!r}")
    return units


def _pool(a: Tensor, units: str) -> Tensor:
    """(B, ...) -> (B, units): flatten every element, or average each channel over its positions."""
    if units == "channel" and a.dim() > 2:
        return a.flatten(2).mean(2)
    return a.flatten(1)


def layer_units(a: Tensor, units: str = "element") -> Tensor:
    """A layer's activity as (B, units) under the chosen reading of a unit (see :mod:`augnet.probes.neurons`).

    ``units="element"`` flattens every axis after the batch axis; ``units="channel"``
    averages each channel (axis 1) over the remaining axes. A (B, units) input
    is returned as is by both. An integer tensor's channel means are float64 (its elements, under
    ``"element"``, keep its dtype).

    Shape:
        - a: (B, C, ...) with B >= 1.
        - output: (B, C * ...) for ``"element"``, (B, C) for ``"channel"``.

    Raises:
        TypeError: ``a`` is not a tensor, or holds bools or complex numbers (no activity the measures read).
        ValueError: ``a`` has fewer than 2 dimensions, an unknown ``units``, or with ``"channel"`` channels
            of no position (an axis of size 0 after the channels: no mean).

    Examples:
        >>> a = torch.arange(8.0).reshape(1, 2, 2, 2)
        >>> layer_units(a).shape, layer_units(a, "channel").tolist()
        (torch.Size([1, 8]), [[1.5, 5.5]])
    """
    _check_units(units)
    if not isinstance(a, Tensor):
        raise TypeError(f"a must be a tensor, got {type(a).__name__}")
    if a.dim() < 2:
        raise ValueError(f"a must have shape (B, units) or (B, C, ...), got {tuple(a.shape)}")
    _check_real(a, "a")
    if units == "channel" and a.dim() > 2 and a.shape[2:].numel() == 0:  # torch's mean of no position was NaN
        raise ValueError(f"a has channels of no position (shape {tuple(a.shape)}): a channel's mean needs one")
    if units == "channel" and a.dim() > 2 and not a.is_floating_point():
        a = a.double()  # an integer mean (torch refuses one) read in float64, as the measures read activity
    return _pool(a, units)


def _check_real(a: Tensor, name: str) -> None:
    if a.dtype == torch.bool or a.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")


def _check_activation_shape(a, name: str) -> None:
    """A layer's output: a tensor (B, units) or (B, C, ...) with at least one row."""
    if not isinstance(a, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(a).__name__}")
    if a.dim() < 2:
        raise ValueError(
            f"{name} must have shape (B, units) or (B, C, ...) (a layer's output, read with units='element' "
            f"or 'channel'), got {tuple(a.shape)}"
        )
    if a.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (shape {tuple(a.shape)})")
    if a.numel() == 0:  # torch's min() of no value was a RuntimeError; a channel of no position has no mean
        raise ValueError(f"{name} has no unit: a layer's output with an axis of size 0 (shape {tuple(a.shape)})")


def _check_pair(a, a_t, rows=None) -> None:
    """A batch of clean and transformed activations of the same shape (row ``i`` of ``a_t`` the transformed
    version of row ``i`` of ``a``), and ``rows`` a (b,) bool mask of them, else the error naming the argument."""
    _check_activation_shape(a, "a")
    _check_activation_shape(a_t, "a_t")
    if a.shape != a_t.shape:
        raise ValueError(f"a and a_t must have the same shape, got {tuple(a.shape)} and {tuple(a_t.shape)}")
    if rows is not None:
        if not isinstance(rows, Tensor) or rows.dtype != torch.bool:
            raise TypeError(f"rows must be a bool tensor, got {type(rows).__name__} {getattr(rows, 'dtype', '')}")
        if rows.shape != (a.shape[0],):
            raise ValueError(f"rows must have shape ({a.shape[0]},), got {tuple(rows.shape)}")


def _check_activations(a, name: str, units: str = "element", offset: int = 0) -> Tensor:
    _check_activation_shape(a, name)
    _check_real(a, name)
    a = a.detach().double()
    bad = ~torch.isfinite(a)
    if bool(bad.any()):
        rows = (torch.nonzero(bad.flatten(1).any(1)).flatten() + offset).tolist()
        raise ValueError(
            f"{name} holds non-finite values (NaN or inf) in input(s) {rows[:10]}{' ...' if len(rows) > 10 else ''}; "
            "they would turn the scale, and so every score, of their units into NaN: drop those inputs first"
        )
    low = float(a.min())
    if low < 0:
        raise ValueError(
            f"{name} holds negative activations (minimum {low:.4g}); the measure needs non-negative ones: "
            "probe a layer after its ReLU, or pass a.clamp_min(0) if that is what the next layer sees"
        )
    return _pool(a, units)


def unit_scale(a: Tensor, a_t: Tensor | None = None, units: str = "element") -> Tensor:
    """Each unit's maximum over the clean (and transformed) inputs: the normaliser of the measure.

    Shape:
        - a, a_t: (B, units) or (B, C, ...), non-negative, read as ``units``
          (see :func:`layer_units`); ``a_t`` may hold another number of rows, its shape after the batch
          axis is ``a``'s.
        - output: (units,) float64; 0 for a unit that is never active.

    Examples:
        >>> unit_scale(torch.tensor([[1.0, 0.0], [3.0, 0.0]]), torch.tensor([[2.0, 0.0], [0.0, 0.0]]))
        tensor([3., 0.], dtype=torch.float64)
    """
    units = _check_units(units)
    if a_t is not None:
        _check_activation_shape(a, "a")
        _check_activation_shape(a_t, "a_t")
        if a_t.shape[1:] != a.shape[1:]:  # (B, 4) and (B, 2, 2) have as many elements, not the same units
            raise ValueError(f"a and a_t must have the same units, got shapes {tuple(a.shape)} and {tuple(a_t.shape)}")
    a = _check_activations(a, "a", units)
    m = a.amax(0)
    if a_t is not None:
        m = torch.maximum(m, _check_activations(a_t, "a_t", units).amax(0))
    return m


def _row_step(units: int) -> int:
    """Rows per chunk, so that a chunk holds about 2^20 (input, unit) values (8 MB in float64)."""
    return max(1, 2**20 // max(units, 1))


class UnitInvariance:
    """Zaidi et al.'s eq. 1, accumulated over batches of inputs in two passes (the engine of :func:`neuron_invariance`).

    Pass 1, :meth:`observe`, finds each unit's maximum over clean and transformed activity; pass 2,
    :meth:`score`, adds each batch's scores ``h_k`` to the units' sums over their active inputs.
    Only per-unit sums (and, with ``per_input``, the (N, units) scores and active sets) are kept, so
    any number of inputs is measured within the memory of one batch. Batches may come in any order;
    the result equals :func:`neuron_invariance` on all the activations at once.
    """

    def __init__(self, tau: float, units: str = "element", n_rows: int | None = None, per_input: bool = False):
        if n_rows is not None and (not is_int(n_rows) or n_rows < 1):  # a negative one failed in the first score
            raise ValueError(f"n_rows must be an int >= 1 (the number of inputs) or None, got {n_rows!r}")
        self.tau, self.units = _check_tau(tau), _check_units(units)
        self.n_rows = None if n_rows is None else int(n_rows)
        self.per_input = check_bool("per_input", per_input)
        if self.per_input and n_rows is None:
            raise ValueError("per_input needs n_rows, the number of inputs")
        self.scale: Tensor | None = None
        self._sums: dict | None = None

    def observe(self, a: Tensor, a_t: Tensor, start: int = 0) -> None:
        """Pass 1: a batch of clean and transformed activations, (b, ...) each, non-negative.

        ``start`` is the batch's first input, for the error messages.

        Raises:
            TypeError, ValueError: ``a`` and ``a_t`` are not tensors of the same shape (b, ...), b >= 1, of real,
                finite, non-negative values, or the batch's units differ from an earlier batch's.
        """
        _check_pair(a, a_t)  # a shorter a_t was read as far as it went, a longer one's extra rows left unread
        step = _row_step(a[0].numel())
        for lo in range(0, len(a), step):
            pa = _check_activations(a[lo : lo + step], "a", self.units, start + lo)
            pt = _check_activations(a_t[lo : lo + step], "a_t", self.units, start + lo)
            m = torch.maximum(pa.amax(0), pt.amax(0))
            if self.scale is not None and self.scale.shape != m.shape:
                raise ValueError(f"a batch has {m.numel()} units, an earlier one {self.scale.numel()}")
            self.scale = m if self.scale is None else torch.maximum(self.scale, m)

    def score(self, start: int, a: Tensor, a_t: Tensor, rows: Tensor | None = None) -> None:
        """Pass 2: the batch of inputs ``start : start + len(a)``; ``rows`` (b,) bool keeps some in the means.

        Raises:
            RuntimeError: no batch was observed (pass 1) yet.
            TypeError, ValueError: ``a`` and ``a_t`` as :meth:`observe` refuses them, or ``rows`` not a (b,)
                bool tensor (a (1,) mask was broadcast over the batch); ``start`` not an int >= 0, or the
                batch past ``n_rows``.
        """
        if self.scale is None:
            raise RuntimeError("observe every batch (pass 1) before scoring any")
        _check_pair(a, a_t, rows)
        if not is_int(start) or start < 0 or (self.n_rows is not None and start + len(a) > self.n_rows):
            # past n_rows torch raised a RuntimeError; a negative start wrote its counts to the wrong rows
            within = "" if self.n_rows is None else f" with start + len(a) <= n_rows ({self.n_rows})"
            raise ValueError(f"start must be an int >= 0{within}, got start={start!r} for {len(a)} inputs")
        live = self.scale > 0
        div = torch.where(live, self.scale, torch.ones_like(self.scale))
        step = _row_step(div.numel())
        for lo in range(0, len(a), step):
            f = _check_activations(a[lo : lo + step], "a", self.units, start + lo)
            if f.shape[1] != div.numel():  # a batch of one unit was broadcast over every observed unit
                raise ValueError(f"a batch has {f.shape[1]} units, the observed ones {div.numel()}")
            f = f / div
            f_t = _check_activations(a_t[lo : lo + step], "a_t", self.units, start + lo) / div
            total = f + f_t
            nonzero = total > 0
            scores = torch.where(
                nonzero, 1.0 - (f_t - f).abs() / torch.where(nonzero, total, torch.ones_like(total)), torch.nan
            )
            above, above_t = f > self.tau, f_t > self.tau
            active = above | above_t
            if rows is not None:
                active = active & rows[lo : lo + step, None].to(active.device)
            self._add(start + lo, scores, active, above, above_t)

    def _add(self, start, scores, active, above, above_t) -> None:
        if self._sums is None:
            units = scores.shape[1]
            self._sums = {
                "n_active": torch.zeros(units, dtype=torch.int64, device=scores.device),
                "kept": torch.zeros(units, dtype=torch.float64, device=scores.device),
                "above": 0,
                "count": 0,
                "units_per_input": torch.zeros(self.n_rows, dtype=torch.int64, device=scores.device)
                if self.n_rows is not None
                else {},
            }
            if self.per_input:
                self._sums["scores"] = torch.full(
                    (self.n_rows, units), torch.nan, dtype=torch.float64, device=scores.device
                )
                self._sums["active"] = torch.zeros(self.n_rows, units, dtype=torch.bool, device=scores.device)
        s = self._sums
        s["n_active"] += active.sum(0)
        s["kept"] += torch.where(active, scores, torch.zeros_like(scores)).sum(0)
        s["above"] += int(above.sum()) + int(above_t.sum())
        s["count"] += 2 * above.numel()
        if self.n_rows is not None:  # written in place: a small tensor kept per chunk would fragment the heap
            s["units_per_input"][start : start + len(active)] = active.sum(1)
        else:
            s["units_per_input"][start] = active.sum(1)
        if self.per_input:
            s["scores"][start : start + len(scores)] = scores
            s["active"][start : start + len(scores)] = active

    def result(self) -> dict:
        """The dict of :func:`neuron_invariance` (``"scores"`` and ``"active"`` only with ``per_input``)."""
        if self._sums is None:
            raise RuntimeError("no batch was scored")
        s = self._sums
        n_active = s["n_active"]
        invariance = torch.where(n_active > 0, s["kept"] / n_active.clamp_min(1), torch.nan)
        stats = summary(invariance)
        stats["n_units"] = int(invariance.numel())
        stats["n_never_active"] = int((n_active == 0).sum())
        out = {"invariance": invariance}
        if self.per_input:
            out.update(scores=s["scores"], active=s["active"])
        out.update(
            n_active=n_active,
            units_per_input=s["units_per_input"]
            if isinstance(s["units_per_input"], Tensor)
            else torch.cat([s["units_per_input"][k] for k in sorted(s["units_per_input"])]),
            active_fraction=s["above"] / max(s["count"], 1),
            scale=self.scale,
            units=self.units,
            summary=stats,
        )
        return out


def neuron_invariance(
    a: Tensor, a_t: Tensor, tau: float, rows: Tensor | None = None, units: str = "element", per_input: bool = True
) -> dict:
    """Per-unit invariance coefficients ``I_k`` of Zaidi et al. (eq. 1, see :mod:`augnet.probes.neurons`).

    The activations are processed in chunks of rows (about 2^20 values at a time), so the memory
    beyond the inputs is that of the per-unit results, plus with ``per_input`` the (B, units)
    ``"scores"`` and ``"active"`` (9 bytes per input and unit); ``per_input=False`` leaves them out
    for large layers (at resnet18's ``layer1`` on 20,000 inputs they would take 2.9 GB).

    Args:
        a: activations on the clean inputs, ``f(x)``; non-negative (negative
            values raise a ValueError: probe the layer after its ReLU; NaN or
            inf raise a ValueError too).
        a_t: activations on the transformed inputs, ``f(T(x))``, row ``i`` the
            transformed version of row ``i`` of ``a``.
        tau: activity threshold in [0, 1] on the normalised activity (see
            :func:`select_tau`, which must be given the same ``units``).
        rows: optional (B,) bool mask (a tensor or a NumPy array) of the inputs that enter the units'
            means, e.g. the samples of the seen-transformed categories; the
            normalisation still uses every row, so scores of different groups
            are on the same scale.
        units: what a unit is, ``"element"`` or ``"channel"`` (see
            :func:`layer_units`); the same for a (B, units) input.
        per_input: also return the per-(input, unit) ``"scores"`` and ``"active"``.

    Returns:
        A dict with

        - ``"invariance"``: (units,) float64, ``I_k`` in [0, 1]; NaN for a unit
          with an empty active set (never above ``tau``, e.g. a dead unit).
        - ``"scores"`` (with ``per_input``): (B, units) float64, ``h_k(x)`` for every pair where the
          clean or the transformed activity is non-zero; NaN where both are 0.
        - ``"active"`` (with ``per_input``): (B, units) bool, ``x in A_k`` (and in ``rows``).
        - ``"n_active"``: (units,) int64, the size of each active set.
        - ``"units_per_input"``: (B,) int64, how many units each input activates (0 for an input outside ``rows``).
        - ``"active_fraction"``: the fraction of the normalised activities, of
          every unit on every clean and every transformed input, ``rows`` or not, above ``tau``
          (what :func:`select_tau` reports for the same ``tau``, ``units`` and inputs: a statistic
          of the threshold, like the normaliser, not of the group that ``rows`` selects; the
          group's own counts are ``"n_active"`` and ``"units_per_input"``).
        - ``"scale"``: (units,) float64, each unit's maximum (the normaliser).
        - ``"units"``: the reading of a unit used.
        - ``"summary"``: :func:`summary` of ``"invariance"`` over the units that
          are not NaN, plus ``"n_units"`` and ``"n_never_active"``.

    Shape:
        - a, a_t: (B, units) or (B, C, ...), B >= 1, the same shape.
        - rows: (B,).

    Examples:
        >>> a = torch.tensor([[1.0, 0.0], [0.5, 0.0]])
        >>> out = neuron_invariance(a, torch.tensor([[1.0, 0.0], [0.0, 0.0]]), tau=0.1)
        >>> out["invariance"]
        tensor([0.5000,    nan], dtype=torch.float64)
        >>> out["summary"]["n"], out["summary"]["n_never_active"]
        (1, 1)
    """
    tau = _check_tau(tau)
    units = _check_units(units)
    check_bool("per_input", per_input)
    if type(rows).__module__ == "numpy" and str(getattr(rows, "dtype", "")) == "bool":
        rows = torch.from_numpy(rows.copy())  # a NumPy bool mask (e.g. np.isin(labels, seen)) reads as one
    _check_pair(a, a_t, rows)
    if rows is not None:
        rows = rows.to(a.device)
    acc = UnitInvariance(tau, units, len(a), per_input)
    acc.observe(a, a_t)
    acc.score(0, a, a_t, rows)
    return acc.result()
