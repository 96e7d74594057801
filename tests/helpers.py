"""Shared test helpers (imported by the test modules, and by triton_parity.py run as a script)."""

import torch

F32, F64 = torch.float32, torch.float64

#: Every tolerance of a comparison between two computations, in one table: what is compared -> dtype ->
#: keyword arguments of ``torch.testing.assert_close``.
TOLERANCES = {
    # Two computations of the same value in one dtype: a batch against its samples, compiled against eager,
    # a fused layer against its transforms one by one.
    "same": {F32: dict(rtol=1e-5, atol=1e-5), F64: dict(rtol=1e-10, atol=1e-10)},
    # The backends of tap_mix against tap_mix_reference (backend parity):
    # C++ (csrc/tap_mix.cpp), both in the dtype under test;
    "cpp": {F32: dict(rtol=1e-4, atol=1e-4), F64: dict(rtol=1e-9, atol=1e-9)},
    # Triton (interpreted on CPU), against the float64 reference on the same rounded inputs, so that only
    # the kernels' own rounding counts;
    "triton": {F32: dict(rtol=1e-5, atol=1e-5), F64: dict(rtol=1e-10, atol=1e-10)},
    # CUDA, both in the dtype under test (float32: reordered sums and atomics, warps of spread 1).
    "cuda": {F32: dict(rtol=2e-4, atol=2e-4), F64: dict(rtol=1e-9, atol=1e-9)},
    # One rounding to a low-precision dtype of values in [-2, 2] (two units in the last place of 1).
    "rounding": {torch.bfloat16: dict(rtol=0, atol=2.0**-8 * 2), torch.float16: dict(rtol=0, atol=2.0**-11 * 2)},
}

#: The tolerances of two computations of the same value, by dtype (``TOLERANCES["same"]``).
TOL = TOLERANCES["same"]


def tol(kind: str, dtype: torch.dtype) -> dict:
    """``assert_close`` keyword arguments for comparing ``kind`` (a row of :data:`TOLERANCES`) in ``dtype``."""
    return dict(TOLERANCES[kind][dtype])


def gen(seed: int = 0, device: str = "cpu") -> torch.Generator:
    """A seeded generator."""
    return torch.Generator(device=device).manual_seed(seed)


LAYOUTS = ("contiguous", "channels_last", "strided")


def tap_mix_inputs(
    b: int = 3,
    ch: int = 3,
    h: int = 7,
    w: int = 9,
    n: int = 8,
    k: int = 5,
    dtype: torch.dtype = F64,
    *,
    color: bool = True,
    layout: str = "contiguous",
    seed: int = 0,
    spread: float = 0.4,
    signed_weight: bool = False,
    device: str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Random arguments ``(x, src, affine, color, weight)`` of ``tap_mix``, the same for every backend test.

    The defaults: odd 7x9 images, N = 8 rows (not a multiple of B = 3) from K = 5 taps each.

    Args:
        b, ch, h, w: ``x`` is (b, ch, h, w), uniform in [0, 1).
        n, k: ``n`` output rows of ``k`` taps; ``src`` (n, k) reads any of the ``b`` samples.
        color: ``color`` (n, k, ch, ch + 1) is ``[I | 0]`` plus N(0, 0.2²) noise, or ``None``. It is drawn
            either way, so the other inputs do not depend on ``color``.
        layout: the memory layout of ``x`` (the same values in each): ``"contiguous"``, ``"channels_last"``,
            or ``"strided"``, a transposed view of every other channel of a larger buffer (no dimension
            of stride 1 where a contiguous tensor has it).
        spread: ``affine`` (n, k, 2, 3) is the identity plus N(0, spread²) noise: near the identity
            at 0.3 to 0.5, sampling far outside the image (several reflections) at 2.
        signed_weight: ``weight`` (n, k) from N(0, 1) instead of U(0, 1).
        device: where the tensors go (drawn on CPU, so the values do not depend on it).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    g = gen(seed)
    x = torch.rand(b, ch, h, w, generator=g, dtype=dtype)
    src = torch.randint(0, b, (n, k), generator=g)
    affine = torch.eye(2, 3, dtype=dtype) + spread * torch.randn(n, k, 2, 3, generator=g, dtype=dtype)
    col = torch.eye(ch, ch + 1, dtype=dtype) + 0.2 * torch.randn(n, k, ch, ch + 1, generator=g, dtype=dtype)
    weight = (torch.randn if signed_weight else torch.rand)(n, k, generator=g, dtype=dtype)
    x = x.to(device)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "strided":
        buffer = torch.zeros(b, 2 * ch, w, h, dtype=dtype, device=device)
        view = buffer[:, ::2].transpose(2, 3)
        view.copy_(x)
        x = view
    return x, src.to(device), affine.to(device), col.to(device) if color else None, weight.to(device)


class Listed(torch.utils.data.Dataset):
    """A map-style data set of the given items (``(x, y)`` pairs, ...), as a user's own would be."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def probe_model_file(tmp_path, monkeypatch, name, forward="return self.net(x)"):
    """A module ``name`` in ``tmp_path`` (on ``sys.path``) defining a small image CNN ``Net`` whose forward runs
    ``forward``; returns the arguments of a quick ``augnet probe`` of it (two layers, no plots of its own)."""
    (tmp_path / f"{name}.py").write_text(
        "import torch\nfrom torch import nn\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        torch.manual_seed(0)\n"
        "        self.net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),\n"
        "                                 nn.Flatten(), nn.Linear(4, 2))\n\n"
        "    def forward(self, x):\n"
        f"        {forward}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return ["probe", "--model", f"{name}:Net", "--fake", "--n", "8", "--size", "8", "--transforms", "Rotate",
            "--magnitudes", "1", "--no-lie", "--no-progress", "--layers", "net.1", "logits"]  # fmt: skip
