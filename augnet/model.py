"""AugNet: augment C copies, run the trunk once on the B*C rows, aggregate.

Axis legend: B samples, C copies, N = B * C rows (copy-major).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from einops import rearrange
from torch import Tensor, nn

from augnet.layers import AugmentationLayer, AugmentationModule, Policy
from augnet.transforms.base import check_copies, draw

__all__ = ["AGGREGATES", "LIE_GENERATORS", "AugNet", "Augerino", "LieAugmentation", "aggregate"]

AGGREGATES = ("log_softmax", "softmax", "mean")


def aggregate(out: Tensor, copies: int, how: str = "log_softmax") -> Tensor:
    """Average trunk outputs over the copy axis.

    Args:
        out: trunk outputs for ``N = B * copies`` rows, copy-major.
        copies: the number of copies C.
        how: ``"log_softmax"`` (mean of log-probabilities, the default for
            classification), ``"softmax"`` (log of the mean probability) or
            ``"mean"`` (plain mean, for regression and embeddings).

    Shape:
        - out: :math:`(B \\cdot C, ...)`; for the softmax kinds
          :math:`(B \\cdot C, \\text{classes}, ...)`
        - output: :math:`(B, ...)`; log-probabilities for the softmax kinds.
    """
    if how not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {how!r}")
    if not isinstance(out, Tensor):
        raise TypeError(f"the trunk must return a tensor to aggregate, got {type(out).__name__}")
    if out.dim() == 0 or out.shape[0] % copies != 0:
        raise ValueError(
            f"the trunk returned shape {tuple(out.shape)}; expected one row per augmented copy "
            f"(a first dimension that is a multiple of copies={copies})"
        )
    if not out.is_floating_point():
        raise TypeError(f"the trunk must return floating-point outputs to aggregate, got {out.dtype}")
    if how != "mean" and out.dim() < 2:
        raise ValueError(
            f"aggregate={how!r} needs a class dimension, but the trunk returned shape {tuple(out.shape)}; "
            "use aggregate='mean' for regression outputs"
        )
    per_copy = rearrange(out, "(c b) ... -> c b ...", c=copies)
    if how == "mean":
        return per_copy.mean(0)
    logp = per_copy.log_softmax(2)
    if how == "log_softmax":
        return logp.mean(0)
    return torch.logsumexp(logp, 0) - math.log(copies)


class AugNet(nn.Module):
    r"""A model made invariant by averaging its trunk over learned augmentations.

    .. math:: \tilde f(x) = \frac{1}{C} \sum_{c=1}^{C} f(g_c x)

    The input is copied C times by the augmentation module, the trunk runs
    once on the ``B * C`` rows, and the C predictions are aggregated.

    Args:
        trunk: any model mapping a batch of (augmented) inputs to outputs.
        augment: an :class:`AugmentationModule`, one :class:`AugmentationLayer`
            or a sequence of layers.
        train_copies: copies C in training (default 1).
        eval_copies: copies C in evaluation (default 4).
        aggregate: ``"log_softmax"``, ``"softmax"`` or ``"mean"`` (see
            :func:`aggregate`).

    Shape:
        - input: :math:`(B, ...)`
        - output: :math:`(B, ...)`, the aggregated trunk output.

    Examples:
        >>> from augnet.transforms import image as T
        >>> trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
        >>> layer = AugmentationLayer([T.Rotate(), T.TranslateX()], init_magnitude=0.1)
        >>> model = AugNet(trunk, layer, eval_copies=4).eval()
        >>> model(torch.rand(5, 3, 8, 8)).shape
        torch.Size([5, 10])
    """

    def __init__(
        self,
        trunk: nn.Module,
        augment: AugmentationModule | AugmentationLayer | Sequence[AugmentationLayer],
        train_copies: int = 1,
        eval_copies: int = 4,
        aggregate: str = "log_softmax",
    ) -> None:
        super().__init__()
        if not isinstance(trunk, nn.Module):
            raise TypeError(f"trunk must be an nn.Module, got {type(trunk).__name__}")
        if not isinstance(augment, AugmentationModule):
            augment = AugmentationModule(augment)
        check_copies(train_copies)
        check_copies(eval_copies)
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
        self.trunk = trunk
        self.augment = augment
        self.train_copies = train_copies
        self.eval_copies = eval_copies
        self.aggregate = aggregate

    def forward(self, x: Tensor, copies: int | None = None, generator: torch.Generator | None = None) -> Tensor:
        """Aggregated prediction over ``copies`` augmented copies of each sample.

        Args:
            x: input batch.
            copies: overrides ``train_copies`` / ``eval_copies``.
            generator: source of randomness for the augmentations.
        """
        if not isinstance(x, Tensor):
            raise TypeError(f"AugNet expects a tensor input, got {type(x).__name__}")
        c = copies if copies is not None else (self.train_copies if self.training else self.eval_copies)
        check_copies(c)
        rows = self.augment(x, copies=c, generator=generator)
        return aggregate(self.trunk(rows), c, self.aggregate)

    def policy(self, size: tuple[int, ...] | None = None) -> Policy:
        """Per layer, each transform's weight, magnitude and range in natural units."""
        return self.augment.policy(size)

    def extra_repr(self) -> str:
        return f"train_copies={self.train_copies}, eval_copies={self.eval_copies}, aggregate={self.aggregate!r}"


# --------------------------------------------------------------------------- Augerino

#: Generators of the affine Lie algebra aff(2), in normalised image coordinates:
#: translations, rotation, uniform scale, stretch and shear (Benton et al., 2020).
LIE_GENERATORS: dict[str, tuple[tuple[float, ...], ...]] = {
    "translate_x": ((0, 0, 1), (0, 0, 0), (0, 0, 0)),
    "translate_y": ((0, 0, 0), (0, 0, 1), (0, 0, 0)),
    "rotate": ((0, -1, 0), (1, 0, 0), (0, 0, 0)),
    "scale": ((1, 0, 0), (0, 1, 0), (0, 0, 0)),
    "stretch": ((1, 0, 0), (0, -1, 0), (0, 0, 0)),
    "shear": ((0, 1, 0), (1, 0, 0), (0, 0, 0)),
}


class LieAugmentation(nn.Module):
    r"""Augerino's augmentation: random affine warps drawn uniformly within learnable widths.

    Each copy draws coefficients :math:`\epsilon_k \sim U(-\theta_k, \theta_k)`
    of the six generators :math:`G_k` of aff(2) and warps the image by the
    matrix exponential :math:`\exp(\sum_k \epsilon_k G_k)` (normalised
    coordinates, output to input, computed on the input's device), through
    :func:`augnet.ops.tap_mix`. The widths are :math:`\theta = \mathrm{softplus}(\rho)`
    with learnable :math:`\rho`; widths of 0 give the identity.

    Args:
        init_width: initial width of every generator (> 0), or one per generator.
        padding: ``tap_mix`` padding mode.
        backend: ``tap_mix`` backend.

    Shape:
        - input: :math:`(B, Ch, H, W)`
        - output: :math:`(B \cdot C, Ch, H, W)`, copy-major.
    """

    def __init__(self, init_width: float | Sequence[float] = 0.1, padding: str = "zeros", backend: str = "auto"):
        super().__init__()
        k = len(LIE_GENERATORS)
        widths = [float(init_width)] * k if isinstance(init_width, (int, float)) else [float(w) for w in init_width]
        if len(widths) != k or any(not math.isfinite(w) or w <= 0 for w in widths):
            raise ValueError(f"init_width must be one positive width or {k} of them, got {init_width!r}")
        # softplus^-1(w) = log(expm1(w))
        self.raw_width = nn.Parameter(torch.tensor([math.log(math.expm1(w)) for w in widths]))
        self.register_buffer("generators", torch.tensor(list(LIE_GENERATORS.values())), persistent=False)
        self.padding = padding
        self.backend = backend
        self.last_size: tuple[int, ...] | None = None

    @property
    def widths(self) -> Tensor:
        """(6,) widths of the uniform distributions, in the order of :data:`LIE_GENERATORS`."""
        return nn.functional.softplus(self.raw_width)

    def matrices(self, n: int, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """(n, 3, 3) random warps for ``n`` rows, drawn on ``x``'s device."""
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        u = draw(torch.rand, n, len(LIE_GENERATORS), generator=generator, device=x.device, dtype=dtype) * 2 - 1
        coeffs = u * self.widths.to(dtype)
        algebra = torch.einsum("nk,kij->nij", coeffs, self.generators.to(device=x.device, dtype=dtype))
        return torch.linalg.matrix_exp(algebra)

    def forward(self, x: Tensor, copies: int = 1, generator: torch.Generator | None = None) -> Tensor:
        from augnet.ops.dispatch import tap_mix

        if not isinstance(x, Tensor) or x.dim() != 4:
            raise ValueError(f"Augerino expects (B, Ch, H, W) images, got {tuple(getattr(x, 'shape', ()))}")
        if not x.is_floating_point():
            raise TypeError(f"Augerino expects floating-point images, got {x.dtype}")
        check_copies(copies)
        self.last_size = tuple(x.shape[2:])
        n = x.shape[0] * copies
        dtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        with torch.autocast(device_type=x.device.type, enabled=False):  # warps in full precision
            affine = self.matrices(n, x, generator)[:, None, :2, :].to(dtype)
        src = (torch.arange(n, device=x.device) % max(x.shape[0], 1))[:, None]
        weight = torch.ones(n, 1, dtype=dtype, device=x.device)
        return tap_mix(x, src, affine, None, weight, padding=self.padding, backend=self.backend)

    def policy(self, size: tuple[int, ...] | None = None) -> list[dict]:
        """Each generator's width, with the range it allows in natural units."""
        size = size if size is not None else self.last_size
        with torch.no_grad():
            widths = self.widths.tolist()
        entries = []
        for (name, _), w in zip(LIE_GENERATORS.items(), widths, strict=True):
            if name == "rotate":
                rng = (-math.degrees(w), math.degrees(w), "deg")
            elif name.startswith("translate") and size is not None:
                extent = size[-1] if name == "translate_x" else size[-2]
                rng = (-w * extent / 2, w * extent / 2, "px")
            elif name in ("scale", "stretch"):
                rng = (math.exp(-w), math.exp(w), "x")
            else:
                rng = (-w, w, "")
            entries.append({"generator": name, "width": w, "range": rng})
        return entries


class Augerino(nn.Module):
    """The Augerino baseline (Benton et al., 2020): a trunk averaged over learned affine warps.

    Copies and aggregation are those of :class:`AugNet`; the augmentation is a
    :class:`LieAugmentation` (uniform widths over the Aff(2) generators).
    Train it with :func:`augnet.augerino_regularizer` (``-||width||_2``).

    Args:
        trunk: any image model.
        init_width: initial width of every generator.
        train_copies, eval_copies, aggregate: as for :class:`AugNet`.
        padding, backend: of the warps.

    Examples:
        >>> trunk = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
        >>> model = Augerino(trunk, init_width=0.2).eval()
        >>> model(torch.rand(5, 3, 8, 8)).shape
        torch.Size([5, 10])
    """

    def __init__(
        self,
        trunk: nn.Module,
        init_width: float | Sequence[float] = 0.1,
        train_copies: int = 1,
        eval_copies: int = 4,
        aggregate: str = "log_softmax",
        padding: str = "zeros",
        backend: str = "auto",
    ) -> None:
        super().__init__()
        if not isinstance(trunk, nn.Module):
            raise TypeError(f"trunk must be an nn.Module, got {type(trunk).__name__}")
        check_copies(train_copies)
        check_copies(eval_copies)
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
        self.trunk = trunk
        self.augment = LieAugmentation(init_width, padding, backend)
        self.train_copies, self.eval_copies, self.aggregate = train_copies, eval_copies, aggregate

    def forward(self, x: Tensor, copies: int | None = None, generator: torch.Generator | None = None) -> Tensor:
        c = copies if copies is not None else (self.train_copies if self.training else self.eval_copies)
        check_copies(c)
        return aggregate(self.trunk(self.augment(x, copies=c, generator=generator)), c, self.aggregate)

    def policy(self, size: tuple[int, ...] | None = None) -> list[dict]:
        """The learned width of each generator (see :meth:`LieAugmentation.policy`)."""
        return self.augment.policy(size)
