"""The pictures of the probe page's per-unit, per-class and grid views, on an untrained resnet18.

    PYTHONPATH=. python benchmarks/probe_views.py [--n 64] [--size 32] [--out docs/results/probes]

An untrained torchvision resnet18 (``weights=None``, seeded) and seeded random 3x32x32 images, half
of them (class 0) made left-right symmetric, so that a flip leaves them as they are, and half (class
1) not. Three figures, each from :func:`augnet.probes.report`:

- ``units.png``: the normalised variance of every channel of each block under a grid of 9 rotations
  and under a flip (``per_unit=True``, :meth:`~augnet.probes.report.ProbeReport.units_plot`);
- ``by_class.png``: the normalised variance of each block for each class (``by_class``): class 0
  is exactly invariant to the flip (its images do not change), class 1 is not, and both move
  under rotations;
- ``grid.png``: the normalised variance of each block under rotations read four ways: one random
  draw per image or the 9-angle grid, each with the maps pooled first or measured per position.

Also writes ``views.json`` with the values drawn. Needs torchvision and matplotlib.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "results" / "probes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="images (default: %(default)s)")
    parser.add_argument("--size", type=int, default=32, help="image side (default: %(default)s)")
    parser.add_argument("--out", default=str(OUT), help="folder of the figures (default: %(default)s)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch
    import torchvision

    from augnet import probes
    from augnet.viz import require_matplotlib, save_figure

    plt = require_matplotlib()
    out = Path(args.out)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    raw = torch.rand(args.n, 3, args.size, args.size, generator=torch.Generator().manual_seed(0))
    half = args.n // 2
    x = torch.cat([(raw[:half] + raw[:half].flip(-1)) / 2, raw[half:]])  # class 0: left-right symmetric
    labels = torch.tensor([0] * half + [1] * (args.n - half))
    common = {"magnitudes": [1.0], "lie": False}
    transforms = ["Rotate", "HorizontalFlip"]

    grid = probes.report(model, x, transforms, transformations="grid", per_unit=True, by_class=labels, **common)
    layers = grid.layers
    grid.units_plot(out / "units.png", "normalized_variance")

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), squeeze=False)
    values = {}
    for ax, t in zip(axes.flat, transforms, strict=True):
        for k in grid.classes():
            nv = [grid.value("normalized_variance", layer, t, cls=k) for layer in layers]
            values[f"{t} class {k}"] = nv
            ax.plot(range(len(layers)), nv, marker="o", label=f"class {k}" + (" (symmetric)" if k == 0 else ""))
        ax.set_xticks(range(len(layers)), layers, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{t}, grid", fontsize=9)
        ax.set_ylabel("normalised variance (0: invariant)", fontsize=8)
        ax.legend(fontsize=8)
    fig.suptitle("resnet18 (untrained): each class measured apart (by_class)", fontsize=10)
    save_figure(fig, out / "by_class.png")

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for mode in ("random", "grid"):
        for aggregation in ("pool", "positions"):
            rep = probes.report(model, x, ["Rotate"], layers, transformations=mode, aggregation=aggregation, **common)
            nv = [rep.value("normalized_variance", layer, "Rotate") for layer in layers]
            values[f"Rotate {mode} {aggregation}"] = nv
            ax.plot(range(len(layers)), nv, marker="o", label=f"{mode}, {aggregation}")
    ax.set_xticks(range(len(layers)), layers, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("normalised variance (0: invariant)", fontsize=8)
    ax.set_title("Rotate: one random draw or a grid of 9 angles; pooled or per position", fontsize=9)
    ax.legend(fontsize=8)
    save_figure(fig, out / "grid.png")
    (out / "views.json").write_text(json.dumps({"layers": layers, "normalized_variance": values}, indent=1))
    print(f"saved {out / 'units.png'}, {out / 'by_class.png'}, {out / 'grid.png'}, {out / 'views.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
