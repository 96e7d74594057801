"""augnet's normalised variance and ANOVA against tmeasures' own classes, on the same activations.

    PYTHONPATH=. python benchmarks/probe_peer_check.py [--n 64] [--size 32] [--angles 9] [--out FILE]

Not a test: tmeasures (Quiroga et al.'s library of invariance measures) is no dependency of augnet.
Without it the script says so and exits 0. With it, the script builds an untrained torchvision
resnet18 (``weights=None``, seeded; a small convolutional network if torchvision is missing) and
seeded random images, reads the channel-pooled output of each top-level block under a fixed grid
of ``--angles`` rotations (augnet's ``Rotate``, every image under every angle), and hands the same
(T, N, U) activations to augnet (:mod:`augnet.probes.measures`) and to tmeasures' numpy measures
(``tmeasures.np``, through a minimal activations iterator over the arrays). It prints, per layer,
the largest absolute difference; then runs augnet's report on the same model, images and grid and
prints the ranking of the layers by every measure with its Spearman correlation against
tmeasures' normalised variance; and writes it all to ``--out`` (default
``benchmarks/results/probe_peer_check.json``).

Where the definitions coincide:

- ``NormalizedVarianceInvariance`` against ``normalized_variance(a, spread="std")``: tmeasures 1.2
  averages standard deviations (ddof 1) across transformations and across samples, not variances;
  augnet's default (``spread="variance"``) averages variances, so the two differ by design there.
  A unit that is constant everywhere is 1 in tmeasures and NaN in augnet: those units are left out
  of the comparison (and counted).
- ``ANOVAFInvariance`` against ``anova_invariance(a)["f"]``: the same F statistic on
  ``(T - 1, T (N - 1))`` degrees of freedom. tmeasures' decision (``ANOVAInvariance``) compares F
  with ``scipy.stats.f.ppf(alpha / units)`` for its ``alpha = 0.99``, a lower quantile; augnet
  rejects where the Bonferroni- (or Benjamini-Hochberg-) corrected p-value is at most ``alpha``:
  the decisions are not compared.
- ``NormalizedDistanceInvariance`` (a ``DistanceAggregation`` of each unit alone) against
  ``distance_invariance(a)["normalized_distance"]``: tmeasures averages the distances between the
  samples of each batch only, so the two coincide when one batch holds every sample, as here; with
  smaller batches tmeasures' sample distance is that of the pairs within a batch.
- Goodfellow et al.'s firing rates are not compared: tmeasures sets each unit's threshold on at most
  20 batches per transformation and takes the local rate over every sample and transformation,
  where augnet (as Goodfellow et al.) sets it on the clean inputs and takes the local rate over the
  transformed versions of the inputs that make the unit fire.
- Same-equivariance is not compared: tmeasures' is the normalised variance of the maps transformed
  back (their spread across transformations over that across samples), augnet's each map
  transformed back against the clean input's (mean squared difference over the channel's variance).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "probe_peer_check.json"


def _arrays_iterator(tnp, acts: dict, batch: int = 16):
    """A tmeasures numpy activations iterator over ``{layer: (T, N, U) array}``, ``batch`` samples a batch."""
    import numpy as np

    names = list(acts)
    t, n = next(iter(acts.values())).shape[:2]

    class Arrays(tnp.activations_iterator.ActivationsIterator):
        def get_transformations(self):
            return list(range(t))

        def layer_names(self):
            return names

        def transformations_first(self):
            for i in range(t):  # the inputs themselves are not needed: placeholders of the batch's length
                yield i, ((np.zeros((min(batch, n - s), 1)), [acts[k][i, s : s + batch] for k in names])
                          for s in range(0, n, batch))  # fmt: skip

        def samples_first(self):
            for j in range(n):
                yield np.zeros((1, 1)), iter([(np.zeros((t, 1)), [acts[k][:, j] for k in names])])

        def get_inverted_activations_iterator(self):
            return self

        def get_both_iterator(self):
            return self

        def get_normal_activations_iterator(self):
            return self

    return Arrays()


def activations(n: int, size: int, angles: int) -> tuple[str, object, object, dict]:
    """``(model name, model, images, {layer: (T, N, U) float64 tensor})``: pooled block outputs under a grid of
    rotations."""
    import torch
    from torch import nn

    from augnet import probes
    from augnet.probes.families import grid_values
    from augnet.transforms import image as T

    torch.manual_seed(0)
    try:
        import torchvision

        model, name = torchvision.models.resnet18(weights=None, num_classes=10).eval(), "resnet18"
    except ImportError:
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2), nn.ReLU(), nn.Flatten()
        ).eval()
        name = "small convolutional network"
    x = torch.rand(n, 3, size, size, generator=torch.Generator().manual_seed(0))
    layers = probes.auto_layers(model, x)
    rotate = T.Rotate()
    views = []
    for angle in grid_values(rotate, 1.0, angles, (size, size)):
        params = {"angle": torch.full((n,), angle), "aspect": torch.ones(n)}
        views.append(probes.features(model, rotate(x, 1.0, params=params), layers, reduce="mean"))
    return name, model, x, {k: torch.stack([v[k] for v in views]).double() for k in layers}


def rankings(model, x, angles: int, reference: dict) -> dict:
    """Every measure of augnet's report on the same model, images and grid, as a ranking of the layers.

    Rank 1 is the layer closest to invariant (the highest value of a measure whose invariant value
    is 1, or 1 / G, the lowest of one whose invariant value is 0 or 0.5 (chance)); measures without
    such a direction (``importance``, ``sample_variance``, ``goodfellow_global``) are left out.
    ``reference`` (``{layer: value}``, lower is more invariant) adds each ranking's Spearman
    correlation with it.
    """
    import torch

    from augnet import probes
    from augnet.probes.report import MEASURES
    from augnet.transforms import image as T

    layers = list(reference)
    rep = probes.report(
        model, x, {"Rotate": T.Rotate()}, layers, [1.0], lie=True, transformations="grid", grid_points=angles
    )

    def ranks(values: list[float], higher_is_invariant: bool) -> list[int]:
        order = sorted(range(len(values)), key=lambda i: -values[i] if higher_is_invariant else values[i])
        out = [0] * len(values)
        for r, i in enumerate(order, 1):
            out[i] = r
        return out

    def spearman(a: list[int], b: list[int]) -> float:
        ta, tb = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
        ta, tb = ta - ta.mean(), tb - tb.mean()
        return float((ta * tb).sum() / (ta.norm() * tb.norm()))

    ref = ranks([reference[k] for k in layers], False)
    table = {"layers": layers, "tmeasures_nv": ref, "measures": {}}
    for measure, (_, _, invariant) in MEASURES.items():
        if invariant == "-":
            continue
        values = [rep.value(measure, layer, "Rotate") for layer in layers]
        if not all(math.isfinite(v) for v in values):
            continue
        r = ranks(values, invariant in ("1", "1/G"))
        table["measures"][measure] = {"values": values, "ranks": r, "spearman_vs_tmeasures_nv": spearman(r, ref)}
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="images (default: %(default)s)")
    parser.add_argument("--size", type=int, default=32, help="image side (default: %(default)s)")
    parser.add_argument("--angles", type=int, default=9, help="rotations of the grid (default: %(default)s)")
    parser.add_argument("--out", default=str(OUT), help="results file (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        import tmeasures.np as tnp
    except ImportError as err:
        print(f"tmeasures is not importable ({err}): nothing to compare against; pip install tmeasures to run this.")
        return 0
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from augnet.probes.measures import anova_invariance, distance_invariance, normalized_variance

    model, net, x, acts = activations(args.n, args.size, args.angles)
    arrays = {k: v.numpy() for k, v in acts.items()}
    nv_theirs = tnp.NormalizedVarianceInvariance().eval(_arrays_iterator(tnp, arrays)).layers
    f_theirs = tnp.ANOVAFInvariance().eval(_arrays_iterator(tnp, arrays)).layers
    aggregation = tnp.DistanceAggregation(normalize=False, keep_shape=False)
    d_theirs = tnp.NormalizedDistanceInvariance(aggregation).eval(_arrays_iterator(tnp, arrays, args.n)).layers
    rows = []
    for (layer, a), nv_t, f_t, d_t in zip(acts.items(), nv_theirs, f_theirs, d_theirs, strict=True):
        nv = normalized_variance(a, spread="std")["normalized_variance"].numpy()
        nv_var = normalized_variance(a)["normalized_variance"].numpy()
        f = anova_invariance(a)["f"].numpy()
        both = np.isfinite(nv) & np.isfinite(np.asarray(nv_t, dtype=float))
        fboth = np.isfinite(f) & np.isfinite(np.asarray(f_t, dtype=float))
        d = distance_invariance(a)["normalized_distance"].numpy()
        d_t = np.asarray(d_t, dtype=float).reshape(-1)
        dboth = np.isfinite(d) & np.isfinite(d_t)
        rows.append(
            {
                "layer": layer,
                "units": int(a.shape[-1]),
                "units_compared": int(both.sum()),
                "nv_std_max_abs_diff": float(np.abs(nv[both] - np.asarray(nv_t)[both]).max()) if both.any() else None,
                "f_max_abs_diff": float(np.abs(f[fboth] - np.asarray(f_t)[fboth]).max()) if fboth.any() else None,
                "f_max_rel_diff": float((np.abs(f[fboth] - np.asarray(f_t)[fboth]) / np.maximum(1, f[fboth])).max())
                if fboth.any()
                else None,
                "distance_max_abs_diff": float(np.abs(d[dboth] - d_t[dboth]).max()) if dboth.any() else None,
                "nv_mean_augnet_variance": float(np.nanmean(nv_var)),
                "nv_mean_augnet_std": float(np.nanmean(nv)),
                "nv_mean_tmeasures": float(np.nanmean(np.asarray(nv_t, dtype=float))),
            }
        )
    from importlib.metadata import PackageNotFoundError, version

    try:
        tm_version = version("tmeasures")
    except PackageNotFoundError:
        tm_version = "?"
    result = {
        "model": model,
        "n_images": args.n,
        "size": args.size,
        "rotations": args.angles,
        "tmeasures": tm_version,
        "layers": rows,
    }
    print(f"{model}, {args.n} images {args.size}x{args.size}, {args.angles} rotations; tmeasures {result['tmeasures']}")
    print(f"{'layer':<10} {'units':>6} {'NV (std) |diff|':>16} {'F |diff|':>10} {'dist |diff|':>11} {'NV var':>8} "
          f"{'NV std':>8}")  # fmt: skip
    for r in rows:
        print(
            f"{r['layer']:<10} {r['units']:>6} {r['nv_std_max_abs_diff']:>16.2e} {r['f_max_abs_diff']:>10.2e} "
            f"{r['distance_max_abs_diff']:>11.2e} "
            f"{r['nv_mean_augnet_variance']:>8.4f} {r['nv_mean_augnet_std']:>8.4f}"
        )
    worst = max(max(r["nv_std_max_abs_diff"] or 0, r["f_max_rel_diff"] or 0, r["distance_max_abs_diff"] or 0)
                for r in rows)  # fmt: skip
    print(f"largest difference (NV and distance absolute, F relative): {worst:.2e} "
          f"({'within' if worst <= 1e-6 else 'above'} 1e-6)")  # fmt: skip
    reference = {r["layer"]: r["nv_mean_augnet_std"] for r in rows}  # = tmeasures' NV, to the digits above
    table = rankings(net, x, args.angles, reference)
    result["rankings"] = table
    print("\nper-layer ranks (1: closest to invariant) under the same grid; Spearman against tmeasures' NV")
    print(f"{'measure':<26} " + " ".join(f"{k:>7}" for k in table["layers"]) + "  Spearman")
    print(f"{'tmeasures NV':<26} " + " ".join(f"{v:>7}" for v in table["tmeasures_nv"]))
    for measure, entry in table["measures"].items():
        cells = " ".join(f"{v:>7}" for v in entry["ranks"])
        print(f"{measure:<26} {cells}  {entry['spearman_vs_tmeasures_nv']:>8.2f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=lambda v: None if math.isnan(v) else v))
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
