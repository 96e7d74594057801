"""Sample pairing: a blend of each sample with another sample of the batch, as two taps of ``tap_mix``."""

from __future__ import annotations

import torch
from torch import Tensor

from augnet.ops.dispatch import host_readable
from augnet.ops.taps import Taps
from augnet.transforms._ranges import at_most_one
from augnet.transforms.base import Range, draw, uniform
from augnet.transforms.image._common import _ImageTransform

__all__ = ["SamplePairing"]


class SamplePairing(_ImageTransform):
    """Blend with another sample of the batch, with weight up to ``max_blend`` (default 0.5).

    ``out = (1 - l) * x_b + l * x_partner`` with ``l = mu * max_blend * u``,
    ``u ~ U(0, 1)``, and the partner a uniformly drawn other sample of the
    batch (the sample itself when the batch has one sample).
    Parameters: ``blend`` (N,), ``partner`` (N,) int64 index into the batch, ``own`` (N,) int64 index
    of the row's own sample.

    Args:
        max_blend: the largest weight ``l`` of the partner at magnitude 1 (in (0, 1], default 0.5; 1 can
            replace a sample by its partner).

    Raises:
        ValueError: a ``max_blend`` that is not a number in (0, 1] (a weight above 1 extrapolates past the
            partner, with a negative weight on the sample itself). Params applied (``params=``, ``apply_transform``)
            to a batch of another number of samples than they were drawn for, read on the CPU (``own`` is not
            ``row % B``: params of 3 samples x 2 copies on 6 samples x 1 copy blended samples 3 to 5 away).
    """

    mixes_samples = True
    resamples = True

    def __init__(self, max_blend: float = 0.5) -> None:
        super().__init__()
        self.max_blend = at_most_one(
            "max_blend",
            max_blend,
            "a blend weight above 1 extrapolates past the partner (a negative weight on "
            "the sample itself), no blend of the two",
        )

    def sample(self, x, magnitude, generator=None, copies=1):
        b = x.shape[0]
        n = b * copies
        blend = magnitude * self.max_blend * uniform(n, x, generator, 0.0, 1.0)
        own = torch.arange(n, device=x.device) % max(b, 1)
        if b > 1:
            offset = draw(torch.randint, 1, b, (n,), generator=generator, device=x.device)
            partner = (own + offset) % b
        else:
            partner = own
        return {"blend": blend, "partner": partner, "own": own}

    def apply_transform(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        own = params.get("own") if isinstance(params, dict) else None
        if isinstance(own, Tensor) and own.dim() == 1 and host_readable(own) and len(x):  # elsewhere: as given
            b = x.shape[0]
            if not bool(torch.equal(own.detach().long(), torch.arange(len(own), device=own.device) % b)):
                drawn = int(own.max()) + 1 if own.numel() and not own.is_floating_point() else None
                said = f"a batch of {drawn} samples" if drawn is not None and drawn != b else "another batch"
                raise ValueError(
                    f"SamplePairing: params were drawn for {said} (their 'own' indices are not row % {b}), but x "
                    f"has {b} samples (shape {tuple(x.shape)}): each row would blend another sample than its own; "
                    "draw the params for x (draw_params(x, ..., copies=...))"
                )
        return super().apply_transform(x, params)

    def taps(self, params):
        lam = params["blend"]
        weight = torch.stack([1.0 - lam, lam], 1)
        src = torch.stack([params["own"], params["partner"]], 1)
        return Taps(weight, src=src)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude) * self.max_blend, "blend")

    def extra_repr(self):
        return f"max_blend={self.max_blend}"
