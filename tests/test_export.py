"""augnet.export: a learned policy as a kornia or torchvision pipeline.

What is checked:
- the support table (every transform classed, the doc's table the same);
- every export classed *exact* computes augnet's output at equal parameters (the library's own draw, read
  back and handed to augnet);
- statistically, at fixed seeds: the pipelines draw the transforms with the learned weights (chi-square
  against the weights, and between augnet's layer in evaluation mode and each pipeline), apply the layers
  in order, and draw parameters in the learned ranges (rotation angles and shifts recovered from a probe
  image, brightness changes, bit counts and thresholds: extremes, quantiles and Kolmogorov-Smirnov tests
  against augnet's own draws);
- shapes, dtypes and input types; warnings for approximate exports; errors for transforms without a
  counterpart and for malformed policies; the doc's snippet runs.
"""

import math
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import PIL.Image
import pytest
import torch
from helpers import gen
from scipy import stats
from torchvision import tv_tensors
from transform_cases import images

import augnet
from augnet.export import LIBRARIES, KorniaPolicy, export_support, to_kornia, to_torchvision
from augnet.layers import Policy
from augnet.transforms import image as T
from augnet.transforms import signal as S

ROOT = Path(__file__).resolve().parents[1]
F64 = torch.float64
#: Significance level of the statistical tests (their seeds are fixed: they pass or fail deterministically).
ALPHA = 1e-3


def module_of(*layers) -> augnet.AugmentationModule:
    """A module whose layers hold ``(transform, weight, magnitude)`` triples, in evaluation mode."""
    built = []
    for layer in layers:
        transforms, weights, magnitudes = zip(*layer, strict=True)
        aug = augnet.AugmentationLayer(list(transforms), init_magnitude=list(magnitudes))
        with torch.no_grad():
            aug.weight_logits.copy_(torch.tensor(weights).log())
        built.append(aug)
    return augnet.AugmentationModule(built).eval()


def export(library: str, policy, size=None):
    """The pipeline of ``policy`` in ``library``, approximate-export warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return (to_kornia if library == "kornia" else to_torchvision)(policy, size)


def ops_of(library: str, pipeline, layer: int = 0) -> list:
    """The library ops of one layer of an exported pipeline."""
    if library == "kornia":
        return list(pipeline.layers[layer].ops)
    return list(pipeline.transforms[layer].transforms)


def single_op(library: str, transform, magnitude: float):
    """The library op of ``transform`` alone at ``magnitude``."""
    (op,) = ops_of(library, export(library, module_of([(transform, 1.0, magnitude)]).policy()))
    return op


def draws(library: str, pipeline_or_module, probe: torch.Tensor, n: int, seed: int = 0) -> torch.Tensor:
    """``n`` augmented copies of ``probe`` (Ch, H, W): by augnet's module in evaluation mode, or by a pipeline
    (kornia: one batch of ``n``; torchvision: ``n`` calls, one image each)."""
    torch.manual_seed(seed)
    if library == "augnet":
        with torch.no_grad():
            return pipeline_or_module(probe[None], copies=n, generator=gen(seed))
    if library == "kornia":
        return pipeline_or_module(probe.expand(n, *probe.shape))
    return torch.stack([pipeline_or_module(probe) for _ in range(n)])


def samples(module, probe, n, seed=0) -> dict[str, torch.Tensor]:
    """Draws of augnet's module and of both exported pipelines."""
    policy = module.policy(tuple(probe.shape[-2:]))
    out = {"augnet": draws("augnet", module, probe, n, seed)}
    for library in LIBRARIES:
        out[library] = draws(library, export(library, policy), probe, n, seed)
    return out


def classify(outputs: torch.Tensor, candidates: torch.Tensor, tol: float) -> torch.Tensor:
    """For each output, the index of the candidate it equals (within ``tol``); fails if it equals none."""
    distance = (outputs[:, None] - candidates[None]).flatten(2).abs().amax(2)  # (N, K)
    best = distance.argmin(1)
    worst = float(distance.gather(1, best[:, None]).max())
    assert worst < tol, f"an output matches no candidate (closest at {worst:.3g})"
    return best


# ------------------------------------------------------------------------- the table


def public_transforms() -> set[str]:
    from augnet.layers import transform_classes

    return {name for name in transform_classes() if not name.endswith("Transform")}


def test_support_table_classes_every_transform():
    table = export_support()
    assert set(table) == public_transforms()
    for name, row in table.items():
        assert set(row) == set(LIBRARIES), name
        assert set(row.values()) <= {"exact", "approximate", "none"}, name
    assert table["Rotate"] == {"kornia": "exact", "torchvision": "exact"}
    assert table["SamplePairing"] == {"kornia": "none", "torchvision": "none"}
    assert table["ShearX"] == {"kornia": "approximate", "torchvision": "approximate"}
    assert table["TranslateX"] == {"kornia": "exact", "torchvision": "approximate"}
    for name in ("TimeReverse", "BandStop", "LowPass", "SensorsRotationZ"):
        assert table[name] == {"kornia": "none", "torchvision": "none"}
    # every image transform but sample pairing has a counterpart in both libraries
    image = {n for n in T.__all__ if isinstance(getattr(T, n), type)}
    assert {n for n in image if "none" in table[n].values()} == {"SamplePairing"}


def doc_table() -> dict[str, dict[str, str]]:
    """The rows ``| transform | kornia | torchvision |`` of docs/export.md, levels only."""
    rows = {}
    for line in (ROOT / "docs" / "export.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`\w+`", cells[0]):
            level = [re.match(r"\*?\*?(exact|approximate|none)", c).group(1) for c in cells[1:3]]
            rows[cells[0].strip("`")] = dict(zip(LIBRARIES, level, strict=True))
    return rows


def test_doc_table_is_the_support_table():
    table, doc = export_support(), doc_table()
    image = {n for n in T.__all__ if isinstance(getattr(T, n), type)}
    assert set(doc) == image
    assert doc == {n: table[n] for n in image}


# ------------------------------------------------------- exact exports at equal parameters


def _kornia_affine(name, **kwargs):
    """(library output, augnet output) for a warp, from kornia's RandomAffine's own draw."""
    x = images(b=4, h=10, w=17, dtype=F64)
    cls = getattr(T, name)
    t = cls(**kwargs)
    op = single_op("kornia", t, 0.6).double()
    out = op(x)
    p = op._params
    aspect = torch.full((4,), 10 / 17, dtype=F64)
    if name == "TranslateX":
        params = {"shift": p["translations"][:, 0].double() / 17}
    elif name == "TranslateY":
        params = {"shift": p["translations"][:, 1].double() / 10}
    else:  # kornia turns clockwise on screen for a positive angle, augnet counter-clockwise
        params = {"angle": -torch.deg2rad(p["angle"].double()), "aspect": aspect}
    return out, t.apply_transform(x, params)


def _kornia_brightness():
    x = images(dtype=F64)
    op = single_op("kornia", T.Brightness(), 0.6)
    out = op(x)
    shift = op._params["brightness_factor"].to(F64) - 1
    return out, T.Brightness().apply_transform(x, {"shift": shift[:, None].expand(5, 3)})


def _kornia_solarize():
    x = images(dtype=F64)
    op = single_op("kornia", T.Solarize(), 0.7)
    out = op(x)
    return out, T.Solarize().apply_transform(x, {"threshold": op._params["thresholds"].to(F64)})


def _kornia_posterize():
    # every bit count the export holds, on float images that are not 8-bit levels
    x = images(b=3)
    t = T.Posterize(max_bits=8)
    outs, wants = [], []
    for op in ops_of("kornia", export("kornia", module_of([(t, 1.0, 1.0)]).policy())):
        outs.append(op(x))
        kept = 8 if isinstance(op, torch.nn.Identity) else int(op._params["bits_factor"][0])
        wants.append(t.apply_transform(x, {"bits": torch.full((3,), 8.0 - kept), "dither": torch.zeros(3)}))
    assert len(outs) == 9
    return torch.stack(outs), torch.stack(wants)


def _at_one(library, cls, x=None):
    """(library output, augnet output) of a transform applied with probability 1."""
    x = images(dtype=torch.float32) if x is None else x
    op = single_op(library, cls(), 1.0)
    return op(x), cls()(x, 1.0, generator=gen(0))


def _torchvision_rotate():
    x = images(b=1, h=10, w=17, dtype=F64)[0]
    op = single_op("torchvision", T.Rotate(), 0.4)
    params = op.make_params([x])
    out = op.transform(x, params)
    angle = torch.tensor([math.radians(params["angle"])], dtype=F64)
    return out, T.Rotate().apply_transform(x[None], {"angle": angle, "aspect": torch.tensor([10 / 17], dtype=F64)})[0]


def _torchvision_solarize():
    x = images(b=1, dtype=F64)[0]
    op = single_op("torchvision", T.Solarize(min_threshold=0.3), 1.0)
    params = op.make_params([x])
    assert 0.3 <= params["threshold"] <= 1.0
    out = op.transform(x, params)
    threshold = torch.tensor([params["threshold"]], dtype=F64)
    return out, T.Solarize().apply_transform(x[None], {"threshold": threshold})[0]


def _eight_bit():
    return torch.randint(0, 256, (5, 3, 16, 16), generator=gen(0)).float() / 255


#: For each export classed exact: ``() -> (library output, augnet output)`` at equal parameters.
EXACT = {
    ("kornia", "TranslateX"): lambda: _kornia_affine("TranslateX"),
    ("kornia", "TranslateY"): lambda: _kornia_affine("TranslateY"),
    ("kornia", "Rotate"): lambda: _kornia_affine("Rotate"),
    ("kornia", "HorizontalFlip"): lambda: _at_one("kornia", T.HorizontalFlip),
    ("kornia", "VerticalFlip"): lambda: _at_one("kornia", T.VerticalFlip),
    ("kornia", "Brightness"): _kornia_brightness,
    ("kornia", "Invert"): lambda: _at_one("kornia", T.Invert),
    ("kornia", "Gray"): lambda: _at_one("kornia", T.Gray),
    ("kornia", "Solarize"): _kornia_solarize,
    ("kornia", "Posterize"): _kornia_posterize,
    ("torchvision", "Rotate"): _torchvision_rotate,
    ("torchvision", "HorizontalFlip"): lambda: _at_one("torchvision", T.HorizontalFlip),
    ("torchvision", "VerticalFlip"): lambda: _at_one("torchvision", T.VerticalFlip),
    ("torchvision", "Invert"): lambda: _at_one("torchvision", T.Invert),
    ("torchvision", "Gray"): lambda: _at_one("torchvision", T.Gray),  # (red weight 0.2989: 1e-4 apart)
    ("torchvision", "AutoContrast"): lambda: _at_one("torchvision", T.AutoContrast),
    ("torchvision", "Solarize"): _torchvision_solarize,
    ("torchvision", "Equalize"): lambda: _at_one("torchvision", T.Equalize, images(b=3, h=16, w=16)),
}


def test_every_exact_export_is_compared_at_equal_parameters():
    table = export_support()
    exact = {(lib, name) for name, row in table.items() for lib, level in row.items() if level == "exact"}
    assert exact == set(EXACT)


@pytest.mark.parametrize("key", sorted(EXACT), ids=lambda k: f"{k[0]}-{k[1]}")
def test_exact_export_computes_augnets_output(key):
    out, want = EXACT[key]()
    # torchvision's red weight is 0.2989, augnet's (and kornia's) 0.299: grey levels differ by 1e-4 times the red
    # value (at most 1), plus float rounding of the sums.
    tol = dict(rtol=0, atol=1e-4 + 1e-6) if key == ("torchvision", "Gray") else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.to(want.dtype), want, **tol)


@pytest.mark.parametrize("padding", ["border", "reflection"])
def test_kornia_warps_keep_the_padding(padding):
    out, want = _kornia_affine("Rotate", padding=padding)
    torch.testing.assert_close(out, want)
    with pytest.warns(UserWarning, match=f"Rotate.*torchvision.*pads with 0, not '{padding}'"):
        to_torchvision(module_of([(T.Rotate(padding=padding), 1.0, 0.5)]).policy())


def test_equalize_of_8_bit_images_is_exact_in_kornia_too():
    x = _eight_bit()
    out, want = _at_one("kornia", T.Equalize, x)
    torch.testing.assert_close(out, want)


# ----------------------------------------------------------------- choices (statistics)


def chi_square_agrees(counts: dict[str, np.ndarray], probs: np.ndarray) -> None:
    """Each source's counts fit ``probs``, and each library's counts fit augnet's (contingency table)."""
    for source, c in counts.items():
        p = stats.chisquare(c, c.sum() * probs).pvalue
        assert p > ALPHA, f"{source}: frequencies {c / c.sum()} against weights {probs}, p = {p:.2g}"
    for library in LIBRARIES:
        both = np.stack([counts["augnet"], counts[library]])
        p = stats.chi2_contingency(both[:, both.sum(0) > 0]).pvalue
        assert p > ALPHA, f"augnet {counts['augnet']} and {library} {counts[library]} differ, p = {p:.2g}"


def test_each_sample_draws_one_transform_with_the_learned_weights():
    weights = np.array([0.4, 0.3, 0.2, 0.1])
    transforms = [T.HorizontalFlip(), T.VerticalFlip(), T.Invert(), T.Gray()]
    module = module_of([(t, w, 1.0) for t, w in zip(transforms, weights, strict=True)])
    probe = images(b=1, h=6, w=7)[0]  # asymmetric and coloured: the four outputs differ
    candidates = torch.stack([t(probe[None], 1.0)[0] for t in transforms])
    n = 3000
    out = samples(module, probe, n)
    counts = {}
    for source, y in out.items():
        which = classify(y, candidates, tol=2e-4)  # (torchvision's grey is 1e-4 from augnet's)
        counts[source] = np.bincount(which.numpy(), minlength=4)
        if source == "kornia":  # the container records the draws: they are what was applied
            kornia = export("kornia", module.policy())
            torch.manual_seed(0)
            kornia(probe.expand(n, *probe.shape))
            assert torch.equal(kornia.layers[0].last_choice, which)
    chi_square_agrees(counts, weights)
    assert all(c.min() > 0 for c in counts.values())  # per sample: every transform within one batch


def test_layers_apply_in_order_each_with_its_own_draws():
    # Layer 0 stretches the contrast; layer 1 draws Gray (applied with probability 0.4) or a vertical
    # flip. Gray after AutoContrast is not AutoContrast after Gray, so the outputs show the order.
    module = module_of(
        [(T.AutoContrast(), 1.0, 1.0)],
        [(T.Gray(), 0.5, 0.4), (T.VerticalFlip(), 0.5, 1.0)],
    )
    probe = 0.2 + 0.6 * images(b=1, h=6, w=7)[0]
    ac, gray, flip = T.AutoContrast(), T.Gray(), T.VerticalFlip()
    stretched = ac(probe[None], 1.0)
    candidates = torch.cat([stretched, gray(stretched, 1.0), flip(stretched, 1.0)])
    assert (gray(stretched, 1.0) - ac(gray(probe[None], 1.0), 1.0)).abs().max() > 0.05
    counts = {s: np.bincount(classify(y, candidates, 2e-4).numpy(), minlength=3) for s, y in samples(
        module, probe, 3000).items()}  # fmt: skip
    chi_square_agrees(counts, np.array([0.5 * 0.6, 0.5 * 0.4, 0.5]))


# ------------------------------------------------------------------ ranges (statistics)


def uniform_quantiles_agree(values: np.ndarray, low: float, high: float, tol: float, source: str) -> None:
    """Extremes inside ``[low, high]`` (within ``tol``) and reaching its ends, quantiles those of U(low, high)."""
    qs = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
    got, want = np.quantile(values, qs), low + qs * (high - low)
    assert values.min() >= low - tol and values.max() <= high + tol, f"{source}: [{values.min()}, {values.max()}]"
    assert values.min() < low + 0.03 * (high - low) + tol and values.max() > high - 0.03 * (high - low) - tol
    assert np.abs(got - want).max() < 0.03 * (high - low) + tol, f"{source}: quantiles {got} against {want}"


def centroids(y: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of the intensity centroid of channel 0 of each image."""
    w = y[:, 0].double()
    rows = torch.arange(w.shape[1], dtype=F64)[:, None]
    cols = torch.arange(w.shape[2], dtype=F64)[None]
    mass = w.sum((1, 2))
    return ((w * rows).sum((1, 2)) / mass).numpy(), ((w * cols).sum((1, 2)) / mass).numpy()


def test_rotation_angles_fill_the_learned_range():
    # Rotate at magnitude 0.25 turns by up to ±45 degrees; a blob 12 px right of the centre shows the angle.
    module = module_of([(T.Rotate(), 1.0, 0.25)])
    probe = torch.zeros(3, 41, 41)
    probe[:, 19:22, 31:34] = 1.0
    angles = {}
    for source, y in samples(module, probe, 1500).items():
        r, c = centroids(y)
        angles[source] = np.degrees(np.arctan2(-(r - 20), c - 20))
        uniform_quantiles_agree(angles[source], -45.0, 45.0, tol=0.5, source=source)
        assert stats.kstest(angles[source], stats.uniform(-45, 90).cdf).pvalue > ALPHA, source
    for library in LIBRARIES:
        assert stats.ks_2samp(angles["augnet"], angles[library]).pvalue > ALPHA, library


def test_shifts_fill_the_learned_range():
    # TranslateX at magnitude 0.5 with max_shift 0.5 shifts by up to ±25 % of the width: ±10 px at width 40.
    module = module_of([(T.TranslateX(max_shift=0.5), 1.0, 0.5)])
    probe = torch.zeros(3, 9, 40)
    probe[:, 3:6, 19:22] = 1.0
    shifts = {}
    for source, y in samples(module, probe, 1500).items():
        shifts[source] = centroids(y)[1] - 20
        uniform_quantiles_agree(shifts[source], -10.0, 10.0, tol=0.55, source=source)
    # kornia's shifts are augnet's; torchvision's RandomAffine rounds them to whole pixels (approximate)
    assert stats.ks_2samp(shifts["augnet"], shifts["kornia"]).pvalue > ALPHA
    assert np.abs(shifts["torchvision"] - np.round(shifts["torchvision"])).max() < 1e-3
    assert np.abs(np.round(shifts["augnet"]) - shifts["augnet"]).max() > 0.4


def test_brightness_changes_of_mid_grey_fill_the_learned_range():
    # Brightness at magnitude 0.4 adds up to ±0.2. torchvision's multiplicative factor in [0.6, 1.4] changes a
    # grey level 0.5 by the same amounts (the export's choice), so at 0.5 all three agree.
    module = module_of([(T.Brightness(), 1.0, 0.4)])
    probe = torch.full((3, 4, 4), 0.5)
    changes = {}
    for source, y in samples(module, probe, 1500).items():
        changes[source] = (y.double().mean((1, 2, 3)) - 0.5).numpy()
        uniform_quantiles_agree(changes[source], -0.2, 0.2, tol=1e-6, source=source)
    for library in LIBRARIES:
        assert stats.ks_2samp(changes["augnet"], changes[library]).pvalue > ALPHA, library


def test_solarize_thresholds_fill_the_learned_range():
    # Solarize at magnitude 0.6 draws thresholds in [0.4, 1]: on a ramp of every 8-bit level, the lowest
    # inverted level shows the threshold (to 1/255).
    module = module_of([(T.Solarize(), 1.0, 0.6)])
    probe = (torch.arange(256.0) / 255).view(1, 16, 16).expand(3, 16, 16)
    thresholds = {}
    for source, y in samples(module, probe, 1500).items():
        inverted = (y[:, 0] - probe[0]).abs() > 1e-6
        lowest = torch.where(inverted, probe[0], torch.ones_like(probe[0])).flatten(1).amin(1)
        thresholds[source] = lowest.numpy()
        uniform_quantiles_agree(thresholds[source], 0.4, 1.0, tol=1 / 255 + 1e-6, source=source)
    for library in LIBRARIES:
        assert stats.ks_2samp(thresholds["augnet"], thresholds[library]).pvalue > ALPHA, library


def test_posterize_bit_counts_have_the_learned_distribution():
    # Posterize at magnitude 0.7 (up to 4 bits) removes 0 to 3 bits; white (255) shows how many: 256 - 2^k.
    t = T.Posterize()
    module = module_of([(t, 1.0, 0.7)])
    probs = np.array(list(t.bits_distribution(0.7).values()))
    probe = torch.ones(3, 2, 2)
    policy = module.policy()
    levels = {
        "augnet": draws("augnet", module, probe, 3000) * 255,
        "kornia": draws("kornia", export("kornia", policy), probe, 3000) * 255,
        # torchvision's float posterize is another definition (approximate): its uint8 one is augnet's
        "torchvision": draws("torchvision", export("torchvision", policy), (probe * 255).to(torch.uint8), 3000),
    }
    counts = {}
    for source, v in levels.items():
        k = torch.log2(256 - v[:, 0, 0, 0].double().round())
        assert torch.equal(k, k.round()), source
        counts[source] = np.bincount(k.long().numpy(), minlength=4)
    chi_square_agrees(counts, probs)


# ------------------------------------------------------------------- running the pipelines


def every_exportable_transform(magnitude: float = 0.5) -> augnet.AugmentationModule:
    transforms = [cls() for cls in (getattr(T, n) for n in T.__all__ if n != "GEOMETRIC") if cls is not T.SamplePairing]
    return module_of([(t, 1.0, magnitude) for t in transforms], [(T.Rotate(), 0.5, 0.2), (T.Invert(), 0.5, 0.5)])


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_kornia_pipeline_runs_on_batches_and_single_images(dtype):
    pipeline = export("kornia", every_exportable_transform().policy())
    assert isinstance(pipeline, KorniaPolicy) and len(pipeline.layers) == 2
    x = images(b=64, h=16, w=16, dtype=dtype)
    before = x.clone()
    out = pipeline(x)
    assert out.shape == x.shape and out.dtype == dtype and torch.isfinite(out).all()
    assert torch.equal(x, before)
    assert len(pipeline.layers[0].last_choice.unique()) > 5  # the batch's samples drew different transforms
    single = pipeline(x[0])
    assert single.shape == (3, 16, 16) and single.dtype == dtype
    assert pipeline(x[:0]).shape == (0, 3, 16, 16)


def test_torchvision_pipeline_runs_on_every_image_type():
    pipeline = export("torchvision", every_exportable_transform().policy())
    x = images(b=4, h=16, w=16)
    for _ in range(20):  # several draws of every kind
        out = pipeline(x[0])
        assert type(out) is torch.Tensor and out.shape == (3, 16, 16) and out.dtype == torch.float32
        u8 = pipeline((x[0] * 255).to(torch.uint8))
        assert u8.shape == (3, 16, 16) and u8.dtype == torch.uint8
        image = pipeline(tv_tensors.Image(x[0]))
        assert isinstance(image, tv_tensors.Image) and image.shape == (3, 16, 16)
        pil = pipeline(PIL.Image.fromarray((x[0].permute(1, 2, 0) * 255).to(torch.uint8).numpy()))
        assert isinstance(pil, PIL.Image.Image) and pil.size == (16, 16)
        batch = pipeline(x)  # one draw for the whole batch
        assert batch.shape == x.shape and batch.dtype == x.dtype


def test_pipelines_pickle_for_dataloader_workers():
    policy = every_exportable_transform().policy()
    for library in LIBRARIES:
        pipeline = pickle.loads(pickle.dumps(export(library, policy)))
        assert pipeline(images(b=2, h=8, w=8)[0]).shape == (3, 8, 8)


def test_size_is_checked_when_given():
    policy = module_of([(T.Rotate(), 1.0, 0.5)]).policy()
    for library in LIBRARIES:
        pipeline = export(library, policy, size=(8, 8))
        assert pipeline(images(b=1, h=8, w=8)[0]).shape == (3, 8, 8)
        with pytest.raises(ValueError, match=r"size \(8, 8\), got \(9, 8\)"):
            pipeline(images(b=1, h=9, w=8)[0])
        with pytest.raises(TypeError, match="size"):
            export(library, policy, size=8)
        with pytest.raises(ValueError, match="size must be positive"):
            export(library, policy, size=(0, 8))


def test_kornia_pipeline_rejects_what_it_cannot_take():
    pipeline = export("kornia", module_of([(T.Rotate(), 1.0, 0.5)]).policy())
    with pytest.raises(TypeError, match="floating-point"):
        pipeline(torch.zeros(2, 3, 8, 8, dtype=torch.uint8))
    with pytest.raises(ValueError, match="shape"):
        pipeline(torch.zeros(8, 8))


def test_policy_methods_and_policy_files_export_the_same():
    module = module_of([(T.Rotate(max_angle=1.0), 0.7, 0.4), (T.Solarize(min_threshold=0.2), 0.3, 0.5)])
    policy = module.policy()
    again = Policy.from_json(policy.to_json())
    for library in LIBRARIES:
        direct = export(library, policy)
        for other in (export(library, again), export(library, policy.to_json()), getattr(policy, f"to_{library}")()):
            assert repr(other) == repr(direct)


# ------------------------------------------------------------------- warnings and errors


@pytest.mark.parametrize("library", LIBRARIES)
def test_approximate_exports_warn_once_per_transform(library):
    policy = module_of([(T.ShearX(), 0.5, 0.5), (T.Rotate(), 0.5, 0.5)], [(T.ShearX(), 1.0, 0.2)]).policy()
    with pytest.warns(UserWarning) as record:
        (to_kornia if library == "kornia" else to_torchvision)(policy)
    messages = [str(w.message) for w in record if "augnet.export" in str(w.message)]
    assert len(messages) == 1 and "ShearX" in messages[0] and library in messages[0] and "angle" in messages[0]


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("route", ["function", "method", "json"])
def test_an_approximate_export_warning_points_at_the_callers_line(library, route):
    policy = module_of([(T.ShearX(), 0.5, 0.5)]).policy()
    function = to_kornia if library == "kornia" else to_torchvision
    calls = {
        "function": lambda: function(policy),
        "method": lambda: getattr(policy, f"to_{library}")(),
        "json": lambda: function(policy.to_json()),
    }
    with pytest.warns(UserWarning, match="augnet.export") as record:
        calls[route]()
    assert {Path(w.filename).name for w in record if "augnet.export" in str(w.message)} == {Path(__file__).name}


@pytest.mark.parametrize("library", LIBRARIES)
def test_exact_exports_do_not_warn(library):
    table = export_support()
    exact = [getattr(T, n)() for n in table if n in T.__all__ and table[n][library] == "exact"]
    policy = module_of([(t, 1.0, 0.5) for t in exact]).policy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        (to_kornia if library == "kornia" else to_torchvision)(policy)


@pytest.mark.parametrize("library", LIBRARIES)
def test_transforms_without_a_counterpart_raise(library):
    fn = to_kornia if library == "kornia" else to_torchvision
    pairing = module_of([(T.Rotate(), 0.5, 0.5), (T.SamplePairing(), 0.5, 0.3)]).policy()
    with pytest.raises(ValueError, match=f"SamplePairing cannot be exported to {library}: it blends"):
        fn(pairing)
    signal = module_of([(S.TimeReverse(), 1.0, 0.5)]).policy()
    with pytest.raises(ValueError, match=f"TimeReverse cannot be exported to {library}: it is not an image"):
        fn(signal)


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_transform_at_magnitude_zero_is_exported_as_the_identity(library):
    # SamplePairing at magnitude 0 is the identity, which every library has.
    module = module_of([(T.SamplePairing(), 0.5, 0.0), (T.ShearX(), 0.5, 0.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # and the identity is exact
        pipeline = (to_kornia if library == "kornia" else to_torchvision)(module.policy())
    x = images(b=1)[0]
    assert torch.equal(pipeline(x), x)


@pytest.mark.parametrize(
    "policy, error, match",
    [
        ("rotate", TypeError, "Policy"),
        (Policy([]), ValueError, "no layers"),
        (Policy([[{"transform": "Twirl", "weight": 1.0, "magnitude": 0.5}]]), ValueError, "unknown transform 'Twirl'"),
        (Policy([[{"transform": "Rotate", "weight": -1.0, "magnitude": 0.5}]]), ValueError, "weight -1.0"),
        (Policy([[{"transform": "Rotate", "weight": 1.0, "magnitude": 1.5}]]), ValueError, "magnitude 1.5"),
        ({"format": "other"}, ValueError, "not an augnet policy"),
    ],
)
def test_malformed_policies_raise(policy, error, match):
    for fn in (to_kornia, to_torchvision):
        with pytest.raises(error, match=match):
            fn(policy)


def test_a_hand_written_policy_without_args_uses_the_default_ranges():
    entry = {"transform": "Rotate", "weight": 1.0, "magnitude": 0.5, "transform_magnitude": 0.5}
    (op,) = ops_of("torchvision", export("torchvision", Policy([[entry]])))
    assert list(op.degrees) == [-90.0, 90.0]


# ------------------------------------------------------------------------------- the doc


def test_doc_snippet_runs():
    text = (ROOT / "docs" / "export.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "docs/export.md has no python block"
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        exec(compile(blocks[0], "docs/export.md", "exec"), namespace)
    assert namespace["images"].shape == namespace["augmented"].shape


@pytest.mark.parametrize("library", LIBRARIES)
def test_an_augerino_policy_is_refused_naming_augerino(library):
    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    policy = augnet.Augerino(trunk, init_width=0.2).policy()
    export = to_kornia if library == "kornia" else to_torchvision
    with pytest.raises(ValueError, match="one of Augerino's generators, not an augnet transform"):
        export(policy)
    with pytest.raises(ValueError, match="no layer settings"):
        augnet.AugmentationModule.from_policy(policy)


def test_an_augerino_policy_is_a_policy_file_that_saves_and_loads(tmp_path):
    # What the exporters and from_policy refuse (above) is still a policy file: saved and read back, it is equal.
    model = augnet.Augerino(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2)), init_width=0.2)
    model(torch.rand(2, 3, 8, 8))
    policy = model.policy()
    assert augnet.Policy.load(policy.save(tmp_path / "augerino.json")) == policy
    assert augnet.Policy.from_json(policy.to_json()) == policy


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_layer_evaluated_as_a_mix_is_exported_with_a_warning_that_it_draws_one_transform(library):
    # eval_mode="mix" blends every transform's output; an export draws one per sample (eval_mode="sample"): said.
    export = to_kornia if library == "kornia" else to_torchvision
    mixed = augnet.AugmentationModule([augnet.AugmentationLayer([T.Invert(), T.HorizontalFlip()], eval_mode="mix")])
    with pytest.warns(UserWarning, match=r"policy layer\(s\) \[0\] evaluate as a mix"):
        export(mixed.policy((8, 8)))
    drawn = augnet.AugmentationModule([augnet.AugmentationLayer([T.Invert(), T.HorizontalFlip()])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        export(drawn.policy((8, 8)))
