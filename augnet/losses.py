"""Training losses that are not regularisers.

:class:`EquivarianceLoss` is Tensmeyer & Martinez eq. 7, ``L = L_d + lambda_3 L_e``,
with eq. 6's ``L_e`` built from learned equivariance maps
(:mod:`augnet.probes.maps`), one per transformation.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augnet._checks import array_number, check_bool
from augnet._instance_checks import check_class_indices
from augnet._labels import host_int64_labels
from augnet.probes.maps import KINDS, AffineMap, ResidualReLUMap, _check_tensor

__all__ = ["EquivarianceLoss"]


class EquivarianceLoss(nn.Module):
    """Cross-entropy with learned equivariance maps (Tensmeyer & Martinez eqs. 5-7).

    For clean features ``z = phi(x)``, features ``z_t[j] = phi(g_j x)`` of J
    transformations, labels ``y`` and the classifier ``head`` on top of
    ``phi``::

        L   = L_d + lambda_3 L_e                                        (eq. 7)
        L_d = CE(head(z), y)                                             (eq. 5)
        L_e = mean_{i, j} [ CE(head(m_ij), y_i)                          (eq. 6)
                            + lambda_1 ||m_ij - z_i||^2 / D
                            + lambda_2 ||z_t[j]_i - z_i||^2 / D ],   m_ij = M_j(z_t[j]_i)

    The first term of ``L_e`` classifies the mapped transformed features, the
    second makes ``phi`` equivariant (``M_j`` undoes ``g_j``), the third
    invariant. The squared distances are divided by the feature size ``D``,
    so the defaults ``lambda_1 = 50``, ``lambda_2 = 25`` are the paper's
    ``50 / 4096`` and ``25 / 4096`` for its D = 4096 features, and
    ``lambda_3 = 0.3`` is its value. With ``transformed_weight = 0`` the loss
    is plain cross-entropy. Each map ``M_j`` is ``r + W_j r + b_j`` (eq. 8,
    ``kind="linear"``) or ``ResidualReLUMap`` (``"residual_relu"``),
    starting at the identity, optionally followed by a ReLU (``output_relu``,
    eq. 8's sigma, for post-ReLU features); they are trained with ``phi``, so
    put this module's parameters in the optimiser.

    Args:
        dim: the feature size D.
        num_transforms: J, the number of maps.
        equivariance_weight: lambda_1.
        invariance_weight: lambda_2.
        transformed_weight: lambda_3.
        kind: ``"linear"`` or ``"residual_relu"``.
        hidden: hidden width of ``"residual_relu"`` maps, an int >= 1 (default ``dim``); ``None`` for
            ``"linear"`` maps.
        output_relu: apply a ReLU to each map's output (a bool).
        generator: draws the ``"residual_relu"`` maps' first layers (a ``torch.Generator`` or ``None``).

    Raises:
        ValueError, TypeError: a ``kind`` not in ``KINDS``; ``dim``, ``num_transforms`` or ``hidden`` not an
            int >= 1 (a float, a bool); ``hidden`` with ``"linear"`` maps; a weight that is not a finite
            number >= 0; ``output_relu`` not a bool; ``generator`` not a ``torch.Generator``.

    Shape:
        - z: (B, D) clean features.
        - z_t: (J', B, D), or a sequence of J' (B, D) tensors, with J' = J or ``len(maps)``.
        - y: (B,) class indices.
        - Output: a scalar.

    Examples:
        >>> head = nn.Linear(8, 3)
        >>> z, z_t, y = torch.randn(4, 8), torch.randn(2, 4, 8), torch.tensor([0, 2, 1, 0])
        >>> loss = EquivarianceLoss(8, num_transforms=2, transformed_weight=0.0)
        >>> torch.allclose(loss(z, z_t, y, head), F.cross_entropy(head(z), y))
        True
    """

    def __init__(
        self,
        dim: int,
        num_transforms: int = 1,
        equivariance_weight: float = 50.0,
        invariance_weight: float = 25.0,
        transformed_weight: float = 0.3,
        kind: str = "linear",
        hidden: int | None = None,
        output_relu: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        ints = [("dim", dim), ("num_transforms", num_transforms)] + ([("hidden", hidden)] if hidden is not None else [])
        for name, n in ints:
            try:  # an int, a numpy integer, a 0-d integer tensor; 8.7 was truncated to 8
                boolean = isinstance(n, bool) or (isinstance(n, Tensor) and n.dtype == torch.bool)
                index = None if boolean else operator.index(n)
            except TypeError:
                index = None
            if index is None:
                raise TypeError(f"{name} must be an int, got {type(n).__name__}: {n!r}")
            if index < 1:
                raise ValueError(f"{name} must be >= 1, got {n}")
        weights = {}
        for name, w in [
            ("equivariance_weight", equivariance_weight),
            ("invariance_weight", invariance_weight),
            ("transformed_weight", transformed_weight),
        ]:
            w = array_number(w)  # a 0-d NumPy array: the number it holds (was refused as "not a number")
            if isinstance(w, Tensor) and w.dim() == 0 and w.dtype != torch.bool and not w.is_complex():
                if w.device.type == "meta":
                    raise ValueError(f"{name} is a tensor on meta, which holds no value: give a number")
                w = w.item()  # a 0-d tensor of a number
            if isinstance(w, bool) or not isinstance(w, numbers.Real):
                raise TypeError(f"{name} must be a number, got {type(w).__name__}: {w!r}")
            if not 0 <= w < math.inf:
                raise ValueError(f"{name} must be finite and >= 0, got {w}")
            weights[name] = float(w)
        if hidden is not None and kind == "linear":
            raise ValueError(f"hidden={hidden!r} is the width of 'residual_relu' maps; 'linear' maps have none")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        self.dim, self.kind, self.output_relu = int(dim), kind, check_bool("output_relu", output_relu)
        self.equivariance_weight = weights["equivariance_weight"]
        self.invariance_weight = weights["invariance_weight"]
        self.transformed_weight = weights["transformed_weight"]
        self.maps = nn.ModuleList(
            AffineMap(self.dim, self.dim, residual=True)
            if kind == "linear"
            else ResidualReLUMap(self.dim, None if hidden is None else int(hidden), generator=generator)
            for _ in range(int(num_transforms))
        )

    def map(self, j: int, z_t: Tensor) -> Tensor:
        """``M_j(z_t)``, differentiable.

        Raises:
            TypeError, ValueError: ``j`` not the index (an int, not a bool) of one of the maps (torch's
                IndexError); negative ones count from the end, as in a list.
        """
        try:
            index = None if isinstance(j, bool) or (isinstance(j, Tensor) and j.dtype == torch.bool) \
                else operator.index(j)  # fmt: skip
        except TypeError:
            index = None
        if index is None:
            raise TypeError(f"map: j must be the index of a map (an int), got {j!r}")
        if not -len(self.maps) <= index < len(self.maps):
            raise ValueError(f"map: j must index the {len(self.maps)} maps (0 to {len(self.maps) - 1}), got {j!r}")
        out = self.maps[index](z_t)
        return F.relu(out) if self.output_relu else out

    def forward(
        self,
        z: Tensor,
        z_t: Tensor | Sequence[Tensor],
        y: Tensor,
        head: Callable[[Tensor], Tensor],
        maps: Sequence[int] | None = None,
        logits: Tensor | None = None,
        return_terms: bool = False,
    ) -> Tensor | tuple[Tensor, dict[str, float]]:
        """Eq. 7 on a batch.

        Args:
            z, z_t, y: see the class docstring.
            head: features -> logits (the rest of the network).
            maps: which map each entry of ``z_t`` goes through, ints (default ``0, ..., J - 1``).
            logits: ``head(z)`` if already computed.
            return_terms: (a bool) also return the detached terms ``{"clean", "transformed",
                "equivariance", "invariance", "total"}`` (``transformed``, ``equivariance`` and
                ``invariance`` before weighting, means over samples and transformations).

        ``y`` may hold the class indices in any integer dtype (int8 to int64, uint8 to uint64: NumPy's labels), read
        as int64 as :func:`augnet.training.fit` reads them; -100 is cross-entropy's ``ignore_index`` (the sample
        counts in the equivariance and invariance terms only; a batch with no other label gives cross-entropy
        terms of 0, not NaN).

        Raises:
            ValueError, TypeError: features that are not tensors of the shapes above, no transformed
                batch, ``maps`` that are not one index (an int, not a bool) of a map per transformed
                batch, ``y`` not a (B,) tensor of integers (on the CPU, too: uint64 labels past int64's range, a
                label below 0 other than -100 or past the head's classes, where torch raised an IndexError),
                ``z_t`` one (B, D) tensor rather than (J, B, D),
                ``logits`` not a tensor of B rows (or, where ``head`` runs, not shaped as its outputs: other classes),
                ``return_terms`` not a bool, ``head`` not callable; a ``z_t`` entry of another dtype than its
                map's parameters (float64 features for float32 maps: a TypeError naming both dtypes, where the
                maps run, outside autocast, which casts them).
        """
        _check_tensor("z", z)
        if z.dim() != 2 or z.shape[1] != self.dim:
            raise ValueError(f"z must have shape (B, {self.dim}), got {tuple(z.shape)}")
        if isinstance(z_t, Tensor) and z_t.dim() == z.dim():  # one transformed batch, unbound into B rows
            raise ValueError(f"z_t must stack the transformed features as (J, B, {self.dim}), or be a sequence of "
                             f"(B, {self.dim}) tensors, got one tensor of shape {tuple(z_t.shape)}: for one "
                             "transformation pass z_t[None] or [z_t]")  # fmt: skip
        zs = list(z_t.unbind(0)) if isinstance(z_t, Tensor) else list(z_t)
        if not zs:
            raise ValueError("z_t must hold the features of at least one transformation")
        for k, zk in enumerate(zs):
            _check_tensor(f"z_t[{k}]", zk)
            if zk.shape != z.shape:
                raise ValueError(f"z_t[{k}] must have z's shape {tuple(z.shape)}, got {tuple(zk.shape)}")
        idx = list(range(len(zs))) if maps is None else _indices(maps)
        if len(idx) != len(zs):
            raise ValueError(f"maps names {len(idx)} map(s) for {len(zs)} transformed batch(es)")
        bad = [j for j in idx if not 0 <= j < len(self.maps)]
        if bad:
            raise ValueError(f"maps must index the {len(self.maps)} maps, got {bad}")
        if not isinstance(y, Tensor) or y.shape != (len(z),):
            shape = tuple(y.shape) if isinstance(y, Tensor) else type(y).__name__
            raise ValueError(f"y must be a tensor of shape ({len(z)},), got {shape}")
        if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
            raise TypeError(f"y must hold integer class indices, got dtype {y.dtype}")
        y = host_int64_labels(y, "y")  # int32 / uint16 labels: cross_entropy takes int64 (a dtype read, no value)
        if not callable(head):
            raise TypeError(f"head must be a callable (features -> logits), got {type(head).__name__}")
        check_bool("return_terms", return_terms)
        if return_terms and z.device.type == "meta":  # float() of a term raised torch's RuntimeError
            raise ValueError("return_terms=True reads the terms' values, which tensors on meta do not hold")
        if logits is not None and not isinstance(logits, Tensor):
            raise TypeError(f"logits must be head(z), a tensor, got {type(logits).__name__}")
        if logits is not None and (logits.dim() == 0 or len(logits) != len(z)):
            raise ValueError(f"logits must be head(z), {len(z)} rows (one per sample), got shape {tuple(logits.shape)}")
        if self.transformed_weight != 0.0 or return_terms:  # the maps run: each on its features' dtype
            self._check_map_dtypes(idx, zs)
        clean_logits = head(z) if logits is None else logits
        if isinstance(clean_logits, Tensor):  # labels past the head's classes: torch's IndexError
            check_class_indices(y, clean_logits)
        labelled = (y != _IGNORE).any()  # no value read back: a batch of -100 labels has CE terms of 0, not NaN
        clean = _cross_entropy(clean_logits, y, labelled)
        if self.transformed_weight == 0.0 and not return_terms:
            return clean
        ce, eq, inv = [], [], []
        for j, zk in zip(idx, zs):
            m = self.map(j, zk)
            out = head(m)
            if logits is not None and out.shape[1:] != logits.shape[1:]:  # its classes were read as head's
                raise ValueError(
                    f"logits must be head(z), shaped as head's outputs {tuple(out.shape)}, got shape "
                    f"{tuple(logits.shape)}"
                )
            ce.append(_cross_entropy(out, y, labelled))
            eq.append((m - z).square().mean(1).mean())
            inv.append((zk - z).square().mean(1).mean())
        ce_t, eq_t, inv_t = torch.stack(ce).mean(), torch.stack(eq).mean(), torch.stack(inv).mean()
        l_e = ce_t + self.equivariance_weight * eq_t + self.invariance_weight * inv_t
        total = clean + self.transformed_weight * l_e
        if not return_terms:
            return total
        terms = {
            "clean": float(clean.detach()),
            "transformed": float(ce_t.detach()),
            "equivariance": float(eq_t.detach()),
            "invariance": float(inv_t.detach()),
            "total": float(total.detach()),
        }
        return total, terms

    def _check_map_dtypes(self, idx: list[int], zs: list[Tensor]) -> None:
        """The TypeError for transformed features of another dtype than their map's parameters (torch's matmul
        takes one dtype; its error named neither), outside autocast, which casts them to one."""
        for k, (j, zk) in enumerate(zip(idx, zs, strict=True)):
            p = next(self.maps[j].parameters(), None)
            if p is not None and zk.dtype != p.dtype and not _autocast_on(zk.device.type):
                raise TypeError(
                    f"z_t[{k}] has dtype {zk.dtype} and its map ({j}) has parameters of dtype {p.dtype}: give "
                    f"features of the maps' dtype, or cast the loss to theirs (loss.to({zk.dtype}))"
                )

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, kind={self.kind!r}, lambda_1={self.equivariance_weight}, "
            f"lambda_2={self.invariance_weight}, lambda_3={self.transformed_weight}, output_relu={self.output_relu}"
        )


#: Cross-entropy's ``ignore_index``: a sample with this label counts in the equivariance and invariance terms only.
_IGNORE = -100


def _cross_entropy(logits: Tensor, y: Tensor, labelled: Tensor) -> Tensor:
    """``F.cross_entropy(logits, y)``, or 0 (with a zero gradient) where no sample is ``labelled`` (every label
    ``-100``), whose mean over no sample was NaN and made the whole loss, and every gradient, NaN."""
    ce = F.cross_entropy(logits, y)
    return torch.where(labelled, ce, ce.new_zeros(()))


def _indices(maps) -> list[int]:
    """``maps`` as a list of ints, or the TypeError naming it (``1.7`` and ``True`` were read as map 1)."""
    if isinstance(maps, (str, bytes)) or not isinstance(maps, Iterable) or getattr(maps, "ndim", 1) == 0:
        raise TypeError(f"maps must be a sequence of map indices (ints), got {maps!r}")
    out = []
    for j in maps:
        try:
            out.append(None if isinstance(j, bool) or (isinstance(j, Tensor) and j.dtype == torch.bool)
                       else operator.index(j))  # fmt: skip
        except TypeError:
            out.append(None)
        if out[-1] is None:
            raise TypeError(f"maps must be map indices (ints), got {j!r} in {list(maps)!r}")
    return out


def _autocast_on(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` (no device type autocast knows, ``meta``: off)."""
    try:
        return torch.is_autocast_enabled(device_type)
    except RuntimeError:
        return False
