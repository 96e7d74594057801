"""The six probe defects of issue 26, measured: run it on the code before and after the fix.

    PYTHONPATH=. python benchmarks/probe_defects.py [--out benchmarks/results/probe_defects_after.json]

Each measurement prints one line and goes into the JSON (``{defect: {figure: value}}``); an
exception is recorded as its message, since raising (or not) is what some defects are about.
Peak memory is read from ``/proc/self/status`` (``VmHWM``, reset through ``/proc/self/clear_refs``
before each measurement), so the figures are the process's extra resident memory, in MB.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from pathlib import Path

import torch
import torchvision

from augnet import probes
from augnet.transforms import image as T


def peak_mb() -> float:
    return int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024


def rss_mb() -> float:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024


def measure(fn):
    """(result or error message, extra peak MB, seconds)."""
    Path("/proc/self/clear_refs").write_text("5")
    base = rss_mb()
    start = time.perf_counter()
    try:
        out = fn()
    except Exception as err:  # the error is the figure
        out = f"{type(err).__name__}: {str(err)[:300]}"
    return out, round(peak_mb() - base, 1), round(time.perf_counter() - start, 2)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def reused_modules() -> dict:
    torch.manual_seed(0)
    r18 = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    x = torch.rand(8, 3, 64, 64, generator=gen(0))
    out: dict = {}
    feats, _, _ = measure(lambda: probes.features(r18, x, ["layer1.0.relu", "layer1.0"]))
    if isinstance(feats, dict):
        out["features_relu_is_block_output"] = bool(torch.equal(feats["layer1.0.relu"], feats["layer1.0"]))
    else:
        out["features_relu"] = feats
    torch.manual_seed(0)
    r50 = torchvision.models.resnet50(weights=None, num_classes=10).eval()
    y = torch.arange(8) % 10
    flip = T.HorizontalFlip()
    res, _, _ = measure(lambda: probes.select_tau(r50, "layer1.0.relu", x, y, taus=[0.0, 0.5], transform=flip))
    out["select_tau_resnet50_layer1.0.relu"] = res if isinstance(res, str) else {"tau": res["tau"]}
    res, _, _ = measure(lambda: probes.select_tau(r50, "layer1.0.relu#2", x, y, taus=[0.0, 0.5], transform=flip))
    out["select_tau_resnet50_layer1.0.relu#2"] = res if isinstance(res, str) else {"tau": res["tau"]}
    return out


def nan_maps() -> dict:
    z = torch.randn(100, 5, generator=gen(1)).double()
    z_t = z.roll(1, dims=1)
    out = {}
    held = probes.fit_equivariance_map(z, z_t).test_index[0].item()
    train = probes.fit_equivariance_map(z, z_t).train_index[0].item()
    for where, row in (("held_out_row", held), ("training_row", train)):
        bad = z.clone()
        bad[row, 0] = math.nan
        res, _, _ = measure(lambda bad=bad: probes.equivariance_report(bad, z_t)["scores"])
        out[where] = res if isinstance(res, str) else {k: round(v, 6) for k, v in res.items()}
    return out


def memory() -> dict:
    out: dict = {}
    n, d = 1000, 64
    z = torch.randn(n, d, generator=gen(2))
    y = torch.arange(n) % 10
    res, mb, s = measure(lambda: probes.similarity_change(z, z + 0.1, y))
    pairs = len(res["pairs"]) if isinstance(res, dict) else res
    out["similarity_change_default"] = {"n": n, "pairs": pairs, "extra_mb": mb, "seconds": s}
    res, mb, s = measure(lambda: probes.similarity_change(z, z + 0.1, y, pairs_per_class=None))
    pairs = len(res["pairs"]) if isinstance(res, dict) else res
    bytes_per_pair = round(mb * 2**20 / pairs) if isinstance(pairs, int) else None
    out["similarity_change_all_pairs"] = {"pairs": pairs, "extra_mb": mb, "bytes_per_pair": bytes_per_pair}
    big = torch.zeros(5000, dtype=torch.long)
    res, mb, s = measure(lambda: probes.same_class_pairs(big, pairs_per_class=100, generator=gen(0)))
    out["same_class_pairs_k5000_100"] = {"pairs": len(res) if not isinstance(res, str) else res, "extra_mb": mb}
    a = torch.rand(500, 64, 16, 16, generator=gen(3)).relu_()
    a_t = a.flip(-1)
    res, mb, s = measure(lambda: probes.neuron_invariance(a, a_t, 0.2))
    entries = a[0].numel() * len(a)
    out["neuron_invariance_500x16384"] = {"extra_mb": mb, "bytes_per_input_unit": round(mb * 2**20 / entries, 1)}
    res, mb, s = measure(lambda: probes.neuron_invariance(a, a_t, 0.2, per_input=False))
    out["neuron_invariance_500x16384_per_input_false"] = (
        res if isinstance(res, str) else {"extra_mb": mb, "bytes_per_input_unit": round(mb * 2**20 / entries, 2)}
    )
    return out


def train_mode() -> dict:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.rand(16, 3, 32, 32, generator=gen(4))
    res, _, _ = measure(lambda: probes.invariance_curve(model, x, T.Rotate(), [0.0, 0.5]))
    after = model.state_dict()
    stats = [k for k in before if k.endswith(("running_mean", "running_var"))]
    changed = max(float((after[k] - before[k]).abs().max()) for k in stats)
    batches = max(int(after[k] - before[k]) for k in before if k.endswith("num_batches_tracked"))
    return {
        "max_running_stat_change": changed,
        "num_batches_tracked_added": batches,
        "still_training": model.training,
        "error": res if isinstance(res, str) else None,
    }


def zero_rows() -> dict:
    g = gen(5)
    z = torch.randn(200, 16, generator=g).relu()
    z_t = (z + 0.3 * torch.randn(200, 16, generator=g)).relu()
    y = torch.arange(200) % 4
    zero = torch.arange(200) % 5 == 0  # every fifth embedding is all zeros (a dead ReLU layer on those inputs)
    z0, zt0 = z.clone(), z_t.clone()
    z0[zero] = 0
    zt0[zero] = 0
    out = {}
    with_zero = probes.similarity_change(z0, zt0, y, pairs_per_class=None)["overall"]
    without = probes.similarity_change(z[~zero], z_t[~zero], y[~zero], pairs_per_class=None)["overall"]
    out["mean_change_with_zero_rows"] = round(with_zero["mean_change"], 4)
    out["mean_change_without_zero_rows"] = round(without["mean_change"], 4)
    out["n_undefined_with_zero_rows"] = with_zero["n_undefined"]
    # Signed, zero-mean features (as logits are): pairs whose clean cosine is near 0 dominate the mean of
    # per-pair percents.
    g = gen(6)
    logits = torch.randn(160, 10, generator=g)
    moved = logits + 0.3 * torch.randn(160, 10, generator=g)
    yl = torch.arange(160) % 4
    sc = probes.similarity_change(logits, moved, yl, pairs_per_class=None)
    pct = sc["percent"]
    out["signed_max_abs_pair_percent"] = round(float(pct[~pct.isnan()].abs().max()), 1)
    per = {}
    for c, stats in sc["per_class"].items():
        median = float(pct[(sc["label"] == c) & ~pct.isnan()].median())
        per[c] = {"percent_change": round(stats["percent_change"], 2), "median_pair": round(median, 2)}
        if "median_percent_change" in stats:
            per[c]["reported_median"] = round(stats["median_percent_change"], 2)
    out["signed_per_class"] = per
    return out


def scale() -> dict:
    g = gen(8)
    z = torch.randn(64, 32, generator=g).double()
    z_t = z + 0.2 * torch.randn(64, 32, generator=g).double()
    perm = probes.derangement(64, gen(0))
    out = {}
    for kind in ("l2", "cosine"):
        ref = probes.invariance_score(z, z_t, kind, permutation=perm).median()
        tiny = probes.invariance_score(z * 1e-13, z_t * 1e-13, kind, permutation=perm)
        out[f"invariance_score_{kind}"] = {
            "unit_scale": round(float(ref), 3),
            "scaled_1e-13": round(float(tiny.median()), 3),
        }
    offset = probes.invariance_score(z + 1e6, z_t + 1e6, "cosine", permutation=perm)
    out["invariance_score_cosine_offset_1e6"] = {"nan_fraction": float(offset.isnan().double().mean())}
    m_a, m_b = torch.rand(400, generator=g), torch.rand(400, generator=g)
    noise = torch.randn(400, 4, generator=g)
    za = torch.cat([m_a[:, None], noise[:, :2]], 1).double()
    zb = torch.cat([m_b[:, None], noise[:, 2:]], 1).double()
    acc = probes.ranking_probe(za, zb, m_a, m_b, generator=gen(0))["accuracy"]
    acc_tiny = probes.ranking_probe(za * 1e-13, zb * 1e-13, m_a, m_b, generator=gen(0))["accuracy"]
    out["ranking_probe_accuracy"] = {"unit_scale": round(acc, 3), "scaled_1e-13": round(acc_tiny, 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/probe_defects.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {}
    for name, fn in [
        ("reused_modules", reused_modules),
        ("nan_in_maps", nan_maps),
        ("memory", memory),
        ("train_mode", train_mode),
        ("zero_rows_and_percent", zero_rows),
        ("absolute_thresholds", scale),
    ]:
        results[name] = fn()
        print(name, json.dumps(results[name], default=str))
    results["augnet"] = probes.__file__
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
