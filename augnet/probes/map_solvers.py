"""The maps ``M`` of :mod:`augnet.probes.maps` and the solvers that fit them (Tensmeyer & Martinez, section 5.2).

Here live the map modules (:class:`AffineMap`, ``ResidualReLUMap``) and
their formulas (:func:`map_form`), the solvers' names and default settings
(``SOLVERS``, ``SOLVER_DEFAULTS``) and their checks, and the solvers
themselves: closed-form ridge regression, Adam with a cosine-decayed learning
rate, and the paper's online SGD. :func:`augnet.probes.maps.fit_equivariance_map`
chooses among them; the map forms and the solvers are described in
:mod:`augnet.probes.maps`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augnet._checks import NotANumberError, is_int, is_real, number

__all__ = [
    "KINDS",
    "SOLVERS",
    "SOLVER_DEFAULTS",
    "AffineMap",
    "ResidualReLUMap",
    "map_form",
]

KINDS = ("linear", "residual_relu")
SOLVERS = ("ridge", "adam_cosine", "sgd_paper")
#: Each iterative solver's settings when ``epochs``, ``lr``, ``batch_size``, ``weight_decay``, ``momentum``
#: are left as ``None`` (``batch_size=None`` in the table: full batch).
SOLVER_DEFAULTS = {
    "adam_cosine": {"epochs": 500, "lr": 3e-2, "batch_size": None, "weight_decay": 0.0, "momentum": None},
    "sgd_paper": {"epochs": 10, "lr": 1e-3, "batch_size": 1, "weight_decay": 1e-5, "momentum": 0.9},
}
_RENAMED = {
    "sgd": "solver='sgd' was Adam with a cosine schedule and is now named 'adam_cosine'; the paper's "
    "online SGD (10 epochs, lr 1e-3, momentum 0.9, weight decay 1e-5) is 'sgd_paper'"
}


# --------------------------------------------------------------------------- maps


class AffineMap(nn.Module):
    """``x W^T + b``, or ``x + x W^T + b`` when ``residual`` (then the identity at W = 0, b = 0).

    With ``output_relu`` the result goes through ``max(., 0)``: ``sigma((W + I) x + b)``
    for a residual map (Tensmeyer & Martinez eq. 8), ``sigma(W x + b)`` otherwise (their E, section 5.3).

    Shape:
        - Input: (B, d_in).
        - Output: (B, d_out).
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        residual: bool = False,
        dtype: torch.dtype | None = None,
        device=None,
        output_relu: bool = False,
    ) -> None:
        super().__init__()
        if residual and d_in != d_out:
            raise ValueError(f"a residual map needs d_in == d_out, got {d_in} and {d_out}")
        self.residual = bool(residual)
        self.output_relu = bool(output_relu)
        self.weight = nn.Parameter(torch.zeros(d_out, d_in, dtype=dtype, device=device))
        self.bias = nn.Parameter(torch.zeros(d_out, dtype=dtype, device=device))

    def forward(self, x: Tensor) -> Tensor:
        out = F.linear(x, self.weight, self.bias)
        out = x + out if self.residual else out
        return F.relu(out) if self.output_relu else out

    def extra_repr(self) -> str:
        d_out, d_in = self.weight.shape
        return f"d_in={d_in}, d_out={d_out}, residual={self.residual}, output_relu={self.output_relu}"


class ResidualReLUMap(nn.Module):
    """``x + W_2 relu(W_1 x + b_1) + b_2``: the identity at initialisation (``W_2 = 0``, ``b_2 = 0``).

    ``W_1`` is drawn from ``N(0, 1 / dim)`` with ``generator``. With ``output_relu``
    the result goes through ``max(., 0)`` (the paper's ``sigma(r + R(r))``, section 5.2).

    Shape:
        - Input: (B, dim).
        - Output: (B, dim).

    Raises:
        ValueError: a ``hidden`` that is not an integer >= 1 (a 0-d integer tensor or array counts as one; a
            non-number raises ``NotANumberError``, a ValueError and a TypeError).
    """

    def __init__(
        self,
        dim: int,
        hidden: int | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device=None,
        output_relu: bool = False,
    ) -> None:
        super().__init__()
        hidden = dim if hidden is None else _setting("hidden", hidden)
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        dtype = torch.get_default_dtype() if dtype is None else dtype
        w1 = torch.randn(hidden, dim, generator=generator, dtype=dtype) / math.sqrt(dim)
        self.output_relu = bool(output_relu)
        self.w1 = nn.Parameter(w1.to(device))
        self.b1 = nn.Parameter(torch.zeros(hidden, dtype=dtype, device=device))
        self.w2 = nn.Parameter(torch.zeros(dim, hidden, dtype=dtype, device=device))
        self.b2 = nn.Parameter(torch.zeros(dim, dtype=dtype, device=device))

    def forward(self, x: Tensor) -> Tensor:
        out = x + F.linear(F.relu(F.linear(x, self.w1, self.b1)), self.w2, self.b2)
        return F.relu(out) if self.output_relu else out

    def extra_repr(self) -> str:
        return f"dim={self.w1.shape[1]}, hidden={self.w1.shape[0]}, output_relu={self.output_relu}"


def map_form(kind: str, output: str, residual: bool = True) -> str:
    """The formula of a map, e.g. ``"sigma((W + I) r + b)"`` (eq. 8) for ``("linear", "relu")``.

    Examples:
        >>> map_form("linear", "relu"), map_form("linear", "identity", residual=False)
        ('sigma((W + I) r + b)', 'W r + b')
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if output not in ("relu", "identity"):
        raise ValueError(f"output must be 'relu' or 'identity' here, got {output!r}")
    inner = "r + W_2 relu(W_1 r + b_1) + b_2"
    if kind == "linear":
        inner = "(W + I) r + b" if residual else "W r + b"
    return f"sigma({inner})" if output == "relu" else inner


# --------------------------------------------------------------------------- solvers


def _solver_settings(
    solver: str,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    weight_decay: float | None = None,
    momentum: float | None = None,
) -> dict:
    """The iterative solver's settings, ``None`` replaced by ``SOLVER_DEFAULTS``, checked."""
    if solver in _RENAMED:
        raise ValueError(_RENAMED[solver])
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if solver == "ridge":
        return {}
    given = {"epochs": epochs, "lr": lr, "batch_size": batch_size, "weight_decay": weight_decay}
    if momentum is not None and solver != "sgd_paper":
        raise ValueError(f"momentum applies to solver='sgd_paper' only, got momentum={momentum} with {solver!r}")
    given["momentum"] = momentum
    s = {k: _setting(k, SOLVER_DEFAULTS[solver][k] if v is None else v) for k, v in given.items()}
    if s["epochs"] < 1:
        raise ValueError(f"epochs must be >= 1, got {s['epochs']}")
    if not 0 < s["lr"] < math.inf:
        raise ValueError(f"lr must be a finite number > 0, got {s['lr']}")
    if s["batch_size"] is not None and s["batch_size"] < 1:
        raise ValueError(f"batch_size must be >= 1, got {s['batch_size']}")
    if not 0 <= s["weight_decay"] < math.inf:
        raise ValueError(f"weight_decay must be a finite number >= 0, got {s['weight_decay']}")
    if s["momentum"] is not None and not 0 <= s["momentum"] < 1:
        raise ValueError(f"momentum must be in [0, 1), got {s['momentum']}")
    return s


_INTEGER_SETTINGS = ("epochs", "batch_size", "hidden")


def _setting(name: str, value):
    """An iterative solver's setting (or ``hidden``), read as the number it holds (a 0-d tensor or array too): an
    int for ``epochs``, ``batch_size`` and ``hidden``, a float for the others; ``None`` stays ``None``.

    Raises:
        NotANumberError: not a number (``lr="1e-3"``, ``True``), naming the setting (a TypeError and a ValueError).
        ValueError: a fraction for an integer setting (``epochs=2.5``).
    """
    if value is None:
        return None
    value = number(name, value)
    if not is_real(value):
        raise NotANumberError(f"{name} must be a number, got {value!r}")
    if name in _INTEGER_SETTINGS:
        if not is_int(value):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        return int(value)
    return float(value)


def _ridge(x: Tensor, y: Tensor, ridge: float, residual: bool) -> AffineMap:
    """Closed-form ridge regression of ``y`` (minus ``x`` when residual) on ``x``, unpenalised intercept."""
    n, d_in = x.shape
    t = y - x if residual else y
    mx, mt = x.mean(0), t.mean(0)
    xc, tc = x - mx, t - mt
    lam = ridge * float(xc.square().sum()) / d_in
    if lam > 0 and n >= d_in:  # primal: (Xc^T Xc + lam I)^-1 Xc^T Tc
        gram = xc.T @ xc + lam * torch.eye(d_in, dtype=x.dtype, device=x.device)
        w = torch.linalg.solve(gram, xc.T @ tc)
    elif lam > 0:  # dual: Xc^T (Xc Xc^T + lam I)^-1 Tc, cheaper when B < D
        gram = xc @ xc.T + lam * torch.eye(n, dtype=x.dtype, device=x.device)
        w = xc.T @ torch.linalg.solve(gram, tc)
    else:  # minimum-norm least squares (also covers features that are constant)
        w = torch.linalg.pinv(xc) @ tc
    module = AffineMap(d_in, t.shape[1], residual=residual, dtype=x.dtype, device=x.device)
    with torch.no_grad():
        module.weight.copy_(w.T)
        module.bias.copy_(mt - mx @ w)
    return module.requires_grad_(False)


def _adam(
    x: Tensor,
    y: Tensor,
    kind: str,
    residual: bool,
    relu: bool,
    hidden: int | None,
    generator: torch.Generator | None,
    epochs: int,
    lr: float,
    batch_size: int | None,
    weight_decay: float,
    momentum: None = None,
) -> tuple[nn.Module, list[float]]:
    """Adam with a cosine-decayed lr on standardised coordinates (``solver="adam_cosine"``).

    The correction ``y - x`` (or ``y``) is fitted with inputs and targets standardised per
    dimension, through the output ReLU when ``relu``; the scalings are folded into the map.
    """
    n, d_in = x.shape
    keeps_input = residual or kind == "residual_relu"
    t = y - x if keeps_input else y
    mu, sd = _standardiser(x)
    mt, st = _standardiser(t)
    xs = (x - mu) / sd
    if kind == "linear":
        delta = AffineMap(d_in, t.shape[1], dtype=x.dtype, device=x.device)
        decayed, free = [delta.weight], [delta.bias]
    else:
        delta = ResidualReLUMap(d_in, hidden, generator=generator, dtype=x.dtype, device=x.device)
        decayed, free = [delta.w1, delta.w2], [delta.b1, delta.b2]

    def predict(idx: Tensor) -> Tensor:
        # ResidualReLUMap adds its input; in standardised coordinates only the correction is wanted.
        corr = delta(xs[idx]) if kind == "linear" else delta(xs[idx]) - xs[idx]
        pre = st * corr + mt + (x[idx] if keeps_input else 0.0)
        return F.relu(pre) if relu else pre

    opt = torch.optim.Adam(
        [{"params": decayed, "weight_decay": float(weight_decay)}, {"params": free, "weight_decay": 0.0}], lr=lr
    )
    step = n if batch_size is None else min(int(batch_size), n)
    total, k = int(epochs) * math.ceil(n / step), 0
    losses = []
    with torch.enable_grad():
        for _ in range(int(epochs)):
            order = torch.randperm(n, generator=generator) if step < n else torch.arange(n)
            order = order.to(x.device)
            running = 0.0
            for start in range(0, n, step):
                idx = order[start : start + step]
                for group in opt.param_groups:
                    group["lr"] = lr * 0.5 * (1.0 + math.cos(math.pi * k / total))
                loss = ((predict(idx) - y[idx]) / st).square().mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                running += float(loss.detach()) * len(idx)
                k += 1
            losses.append(running / n)
    with torch.no_grad():
        if kind == "linear":
            module = AffineMap(d_in, t.shape[1], residual=residual, dtype=x.dtype, device=x.device)
            module.weight.copy_(st[:, None] * delta.weight / sd)
            module.bias.copy_(st * (delta.bias - delta.weight @ (mu / sd)) + mt)
        else:
            module = ResidualReLUMap(d_in, delta.w1.shape[0], dtype=x.dtype, device=x.device)
            module.w1.copy_(delta.w1 / sd)
            module.b1.copy_(delta.b1 - delta.w1 @ (mu / sd))
            module.w2.copy_(st[:, None] * delta.w2)
            module.b2.copy_(st * delta.b2 + mt)
    module.output_relu = relu
    return module.requires_grad_(False), losses


def _sgd_paper(
    x: Tensor,
    y: Tensor,
    kind: str,
    residual: bool,
    relu: bool,
    hidden: int | None,
    generator: torch.Generator | None,
    epochs: int,
    lr: float,
    batch_size: int | None,
    weight_decay: float,
    momentum: float,
) -> tuple[nn.Module, list[float]]:
    """Tensmeyer & Martinez's optimiser (section 5.2): online SGD with momentum and weight decay.

    Minimises ``1/2 ||M(x_i) - y_i||^2`` (Caffe's Euclidean loss; mean over a mini-batch) in the
    features' own units, one row at a time by default, with a static learning rate. The map starts
    at the identity (``W = 0, b = 0``); a non-residual linear map starts at ``W = 0`` and ``b`` the
    mean target, so that a ReLU output does not start with zero gradient.
    """
    n, d_in = x.shape
    if kind == "linear":
        module = AffineMap(d_in, y.shape[1], residual=residual, dtype=x.dtype, device=x.device, output_relu=relu)
        if not residual:
            with torch.no_grad():
                module.bias.copy_(y.mean(0))
    else:
        module = ResidualReLUMap(d_in, hidden, generator=generator, dtype=x.dtype, device=x.device, output_relu=relu)
    opt = torch.optim.SGD(module.parameters(), lr=lr, momentum=float(momentum), weight_decay=float(weight_decay))
    step = n if batch_size is None else min(int(batch_size), n)
    losses = []
    with torch.enable_grad():
        for epoch in range(int(epochs)):
            order = torch.randperm(n, generator=generator).to(x.device)
            running = 0.0
            for start in range(0, n, step):
                idx = order[start : start + step]
                loss = 0.5 * (module(x[idx]) - y[idx]).square().sum(1).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                running += float(loss.detach()) * len(idx)
            if not math.isfinite(running) or not all(bool(p.isfinite().all()) for p in module.parameters()):
                raise ValueError(
                    f"solver='sgd_paper' diverged in epoch {epoch + 1} (lr={lr} is too large for features of "
                    f"squared norm up to {float(x.square().sum(1).max()):.3g}); scale the features down, lower lr, "
                    "or use solver='ridge' or 'adam_cosine'"
                )
            losses.append(running / n)
    return module.requires_grad_(False), losses


def _standardiser(a: Tensor) -> tuple[Tensor, Tensor]:
    """Per-column mean and standard deviation of ``a`` (1 where a column is constant)."""
    sd = a.std(0, unbiased=False)
    return a.mean(0), torch.where(sd > 0, sd, torch.ones_like(sd))
