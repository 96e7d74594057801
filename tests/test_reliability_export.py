"""A user's sweep of augnet.export: each image transform exported to kornia and torchvision, against augnet's layer.

What is checked (beyond tests/test_export.py):
- every image transform exports (SamplePairing refused by both libraries), and at magnitude 1 each op's range is
  the transform's own range in the library's units (degrees, fractions of the size, turns, factors);
- the approximate exports compute augnet's output at equal parameters, up to what the docs say differs (kornia's
  shear, zoom, contrast, saturation and sharpness exactly; torchvision's also, but for its grey weights);
- statistically, at fixed seeds, 2,000 draws each: the probability of the gated transforms (flips, Invert, Gray,
  AutoContrast, Equalize) is the magnitude, in kornia and in torchvision on uint8 images (binomial test); the
  contrast, saturation and sharpness factors fill 1 ± max_delta·m uniformly (Kolmogorov-Smirnov), as augnet's do;
  the hue shift is uniform in ±max_angle·m / 2π turns; TranslateY, the shears and the zoom stay in their range
  and reach its ends;
- integer images other than uint8 (uint16, as 16-bit PNGs decode) solarize at the dtype's range.

Every statistical test runs at a fixed seed, so it passes or fails deterministically. ALPHA is the false-failure
rate of each of its 30 p-values (18 binomial, 12 Kolmogorov-Smirnov) at a random seed: about 3 % that one of them
fails by chance at some other seed. The range checks (ends reached within 3 % of the range at 2,000 draws) fail by
chance with probability below 1e-26.
"""

import math
import warnings

import numpy as np
import pytest
import torch
from helpers import gen
from kornia.color import rgb_to_hsv
from scipy import stats

import augnet
from augnet.export import to_kornia, to_torchvision
from augnet.transforms import image as T

F64 = torch.float64
ALPHA = 1e-3
N = 2000
NAMES = [n for n in T.__all__ if isinstance(getattr(T, n), type)]
EXPORTED = [n for n in NAMES if n != "SamplePairing"]


def policy_of(transform, magnitude: float):
    layer = augnet.AugmentationLayer([transform], init_magnitude=[magnitude])
    return augnet.AugmentationModule([layer]).eval().policy()


def export(library: str, policy):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return (to_kornia if library == "kornia" else to_torchvision)(policy)


def op_of(library: str, transform, magnitude: float):
    pipeline = export(library, policy_of(transform, magnitude))
    ops = list(pipeline.layers[0].ops) if library == "kornia" else list(pipeline.transforms[0].transforms)
    return ops[0]


def augnet_draws(transform, magnitude: float, probe: torch.Tensor, n: int = N, seed: int = 0) -> torch.Tensor:
    layer = augnet.AugmentationLayer([transform], init_magnitude=[magnitude]).eval()
    with torch.no_grad():
        return layer(probe[None].expand(n, *probe.shape).contiguous(), generator=gen(seed))


def library_draws(library: str, transform, magnitude: float, probe: torch.Tensor, n: int = N, seed: int = 0):
    pipeline = export(library, policy_of(transform, magnitude))
    torch.manual_seed(seed)
    if library == "kornia":
        return pipeline(probe[None].expand(n, *probe.shape).contiguous())
    return torch.stack([pipeline(probe) for _ in range(n)])


# ------------------------------------------------------------------------------------------ the 20 transforms


@pytest.mark.parametrize("library", ["kornia", "torchvision"])
def test_every_image_transform_exports_and_sample_pairing_is_refused(library):
    x = torch.rand(2, 3, 12, 13)
    for name in EXPORTED:
        pipeline = export(library, policy_of(getattr(T, name)(), 0.5))
        y = pipeline(x) if library == "kornia" else pipeline(x[0])[None]
        assert y.shape[1:] == x.shape[1:] and y.dtype == x.dtype, name
    with pytest.raises(ValueError, match=f"SamplePairing cannot be exported to {library}"):
        export(library, policy_of(T.SamplePairing(), 0.5))


def test_ranges_at_magnitude_one_are_the_transforms_ranges_in_the_libraries_units():
    # Non-default arguments, so that a default hard-coded in an exporter would show.
    m = 1.0
    rot = T.Rotate(max_angle=1.2)
    deg = math.degrees(1.2)
    assert op_of("torchvision", rot, m).degrees == pytest.approx([-deg, deg])
    assert list(op_of("kornia", rot, m)._param_generator.degrees) == pytest.approx([-deg, deg])
    for name, axis in (("TranslateX", 0), ("TranslateY", 1)):
        want = [0.0, 0.0]
        want[axis] = 0.4
        assert op_of("torchvision", getattr(T, name)(max_shift=0.4), m).translate == pytest.approx(want)
        kornia = op_of("kornia", getattr(T, name)(max_shift=0.4), m)._param_generator
        assert list(kornia.translate) == pytest.approx(want)
    d = math.degrees(math.atan(0.5))
    assert op_of("torchvision", T.ShearX(max_shear=0.5), m).shear == pytest.approx([-d, d, 0.0, 0.0])
    assert op_of("torchvision", T.ShearY(max_shear=0.5), m).shear == pytest.approx([0.0, 0.0, -d, d])
    assert op_of("torchvision", T.Scale(max_zoom=3.0), m).scale == pytest.approx((1 / 3, 3.0))
    for cls in (T.HorizontalFlip, T.VerticalFlip, T.Invert, T.Gray, T.AutoContrast, T.Equalize):
        assert op_of("torchvision", cls(), 0.35).p == pytest.approx(0.35), cls.__name__
        assert float(op_of("kornia", cls(), 0.35).p) == pytest.approx(0.35), cls.__name__
    solarize = op_of("torchvision", T.Solarize(min_threshold=0.2), m)
    assert (solarize.low, solarize.high) == pytest.approx((0.2, 1.0))
    hue = op_of("torchvision", T.Hue(max_angle=1.0), m).hue
    assert hue == pytest.approx((-1 / (2 * math.pi), 1 / (2 * math.pi)))


# ------------------------------------------------------------------- approximate exports at equal parameters


def _image(b=4, h=10, w=17):
    g = torch.Generator().manual_seed(3)
    return 0.3 + 0.4 * torch.rand(b, 3, h, w, generator=g, dtype=F64)  # in [0.3, 0.7]: no clipping below


def test_kornia_approximate_exports_compute_augnets_output_at_equal_parameters():
    # Only the draw differs (angle for shear, linear zoom); at the drawn parameter the output is augnet's.
    x = _image()
    aspect = torch.full((4,), 10 / 17, dtype=F64)
    for name, key in (("ShearX", "shear_x"), ("ShearY", "shear_y")):
        t = getattr(T, name)()
        op = op_of("kornia", t, 0.8).double()
        out = op(x)
        coefficient = torch.tan(torch.deg2rad(op._params[key].double()))
        torch.testing.assert_close(out, t.apply_transform(x, {"shear": coefficient, "aspect": aspect}))
    op = op_of("kornia", T.Scale(), 0.8).double()
    out = op(x)
    torch.testing.assert_close(out, T.Scale().apply_transform(x, {"zoom": op._params["scale"][:, 0].double()}))
    for name in ("Contrast", "Saturation"):
        t = getattr(T, name)()
        op = op_of("kornia", t, 0.3).double()
        out = op(x)
        params = t.sample(x, 0.3)
        params["factor"] = op._params[f"{name.lower()}_factor"].double()
        torch.testing.assert_close(out, t.apply_transform(x, params))
    op = op_of("kornia", T.Sharpness(), 0.5).double()
    out = op(x)
    torch.testing.assert_close(out, T.Sharpness().apply_transform(x, {"factor": op._params["sharpness"].double()}))


def test_torchvision_approximate_exports_compute_augnets_output_at_equal_parameters():
    x = _image(b=1)[0]
    for seed in range(3):
        torch.manual_seed(seed)
        for name in ("TranslateX", "TranslateY", "ShearX", "ShearY", "Scale"):
            t = getattr(T, name)()
            op = op_of("torchvision", t, 0.8)
            p = op.make_params([x])
            out = op.transform(x, p)
            if name == "TranslateX":
                params = {"shift": torch.tensor([p["translate"][0] / 17], dtype=F64)}  # whole pixels
            elif name == "TranslateY":
                params = {"shift": torch.tensor([p["translate"][1] / 10], dtype=F64)}
            elif name == "Scale":
                params = {"zoom": torch.tensor([p["scale"]], dtype=F64)}
            else:
                angle = p["shear"][0] if name == "ShearX" else p["shear"][1]
                params = {"shear": torch.tensor([math.tan(math.radians(angle))], dtype=F64),
                          "aspect": torch.tensor([10 / 17], dtype=F64)}  # fmt: skip
            torch.testing.assert_close(out, t.apply_transform(x[None], params)[0], msg=name)
        for name in ("Contrast", "Saturation", "Sharpness"):
            t = getattr(T, name)()
            op = op_of("torchvision", t, 0.3)
            p = op.make_params([x])
            out = op.transform(x, p)
            params = t.sample(x[None], 0.3)
            params["factor"] = torch.tensor([p["factor" if name == "Sharpness" else f"{name.lower()}_factor"]],
                                            dtype=F64)  # fmt: skip
            # torchvision's grey is 0.2989 R + 0.587 G + 0.114 B (augnet's red weight 0.299): 1e-4 of a level
            torch.testing.assert_close(out, t.apply_transform(x[None], params)[0], rtol=0, atol=1e-4, msg=name)


# ---------------------------------------------------------------------------------------- statistics


def _binomial_ok(k: int, n: int, p: float, what: str) -> None:
    pvalue = stats.binomtest(k, n, p).pvalue
    assert pvalue > ALPHA, f"{what}: applied {k} / {n} times, expected probability {p}, p = {pvalue:.2g}"


@pytest.mark.parametrize("name", ["HorizontalFlip", "VerticalFlip", "Invert", "Gray", "AutoContrast", "Equalize"])
def test_gated_transforms_apply_with_probability_the_magnitude(name):
    # At magnitude 0.3 each is applied with probability 0.3: augnet's gate, kornia's p, torchvision's p (on uint8
    # images, a DataLoader's usual input). Two-sided binomial test per source.
    m = 0.3
    t = getattr(T, name)()
    g = torch.Generator().manual_seed(1)
    # 8-bit levels, asymmetric; over 255 pixels with repeated levels, so that equalising (PIL's) changes them
    probe = (torch.randint(100, 140, (3, 16, 17), generator=g).double() / 255).float()
    applied = t(probe[None], 1.0)[0]
    assert (applied - probe).abs().max() > 0.05
    changed = {
        "augnet": augnet_draws(t, m, probe),
        "kornia": library_draws("kornia", t, m, probe, seed=1),
        "torchvision": library_draws("torchvision", t, m, (probe * 255).round().to(torch.uint8), seed=2).float() / 255,
    }
    for source, y in changed.items():
        near = (y - applied).flatten(1).abs().amax(1) < 2 / 255 + 1e-5  # uint8 rounding, torchvision's grey
        plain = (y - probe).flatten(1).abs().amax(1) < 1e-5
        assert bool((near ^ plain).all()), f"{source}: an output is neither the input nor the transformed input"
        _binomial_ok(int(near.sum()), N, m, f"{name} in {source}")


def _ks_uniform(values: np.ndarray, low: float, high: float, what: str) -> None:
    p = stats.kstest(values, stats.uniform(low, high - low).cdf).pvalue
    seen = f"[{values.min():.4g}, {values.max():.4g}]"
    assert p > ALPHA, f"{what}: not uniform in [{low:.4g}, {high:.4g}] (drawn in {seen}), p = {p:.2g}"


def test_contrast_saturation_and_sharpness_factors_fill_the_learned_range():
    # At magnitude 0.4 (max_delta 0.9) each factor is uniform in [0.64, 1.36]. A low-contrast probe keeps the
    # outputs inside [0, 1] (the libraries clip), so the factor reads back as the ratio of deviations.
    m, r = 0.4, 0.9 * 0.4
    g = torch.Generator().manual_seed(4)
    probe = 0.45 + 0.1 * torch.rand(3, 6, 7, generator=g, dtype=F64)
    grey_mean = (torch.tensor([0.299, 0.587, 0.114], dtype=F64)[:, None, None] * probe).sum(0).mean()
    grey = (torch.tensor([0.299, 0.587, 0.114], dtype=F64)[:, None, None] * probe).sum(0, keepdim=True)
    smooth = T.Sharpness().apply_transform(probe[None], {"factor": torch.zeros(1, dtype=F64)})[0]
    reference = {"Contrast": grey_mean, "Saturation": grey, "Sharpness": smooth}
    for name, ref in reference.items():
        t = getattr(T, name)()
        dev = (probe - ref).expand(N, *probe.shape)
        mask = dev.abs() > 0.02  # pixels that show the factor (the sharpness border keeps the input)
        for seed, source in enumerate(("augnet", "kornia", "torchvision")):
            y = (augnet_draws(t, m, probe) if source == "augnet"
                 else library_draws(source, t, m, probe, seed=seed)).double()  # fmt: skip
            ratio = torch.where(mask, (y - ref) / dev.where(mask, torch.ones_like(dev)), torch.nan)
            factor = ratio.flatten(1).nanmedian(1).values.numpy()
            spread = (ratio.flatten(1).nan_to_num(1.0) - torch.tensor(factor)[:, None]).where(mask.flatten(1), 0.0)
            assert float(spread.abs().max()) < 5e-3, f"{name} in {source}: not one factor per image"
            _ks_uniform(factor, 1 - r, 1 + r, f"{name} in {source}")


def _hsv_hue(rgb: torch.Tensor) -> torch.Tensor:
    return rgb_to_hsv(rgb.float())[..., 0, :, :].double() / (2 * math.pi)  # kornia's hue in radians: in turns


@pytest.mark.parametrize("source", ["augnet", "kornia", "torchvision"])
def test_hue_shifts_are_in_turns_of_the_learned_angle(source):
    # Hue(max_angle=pi) at magnitude 0.4 rotates colours by up to ±72 degrees about the grey axis (augnet); the
    # libraries shift the HSV hue by up to ±0.2 turns. On a saturated probe both are uniform in ±0.2 turns.
    m, turns = 0.4, 0.4 * math.pi / (2 * math.pi)
    probe = torch.tensor([0.7, 0.3, 0.3], dtype=F64)[:, None, None].expand(3, 2, 2).contiguous()
    cross = torch.tensor([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]], dtype=F64) / math.sqrt(3)
    y = (augnet_draws(T.Hue(), m, probe) if source == "augnet"
         else library_draws(source, T.Hue(), m, probe, seed=1)).double()[:, :, 0, 0]  # fmt: skip
    if source == "augnet":  # the rotation angle about the grey axis
        c0 = probe[:, 0, 0] - probe[:, 0, 0].mean()
        c1 = y - y.mean(1, keepdim=True)
        sin = (c1 @ cross.T * c0).sum(1) / c0.norm() ** 2  # (cross c0) . c1 / |c0|^2
        shift = torch.atan2(sin, (c1 * c0).sum(1) / c0.norm() ** 2).numpy() / (2 * math.pi)
    else:
        delta = _hsv_hue(y[:, :, None, None])[:, 0, 0] - float(_hsv_hue(probe[None])[0, 0, 0])
        shift = ((delta + 0.5) % 1.0 - 0.5).numpy()
    _ks_uniform(shift, -turns, turns, f"hue shift (turns) in {source}")


def _centroid(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    w = y[:, 0].double()
    rows = torch.arange(w.shape[1], dtype=F64)[:, None]
    cols = torch.arange(w.shape[2], dtype=F64)[None]
    mass = w.sum((1, 2))
    return (w * rows).sum((1, 2)) / mass, (w * cols).sum((1, 2)) / mass


#: Per warp: (transform, magnitude, its parameter read from the blob's centroid (row, column), the range's top).
#: The blob of a 17 x 21 image is centred at (4, 14): 4 rows above and 4 columns right of the image centre (8, 10).
WARPS = {
    "TranslateY": (T.TranslateY(), 0.6, lambda r, c: r - 4, 0.25 * 0.6 * 17),
    "ShearX": (T.ShearX(), 0.8, lambda r, c: (c - 14) / 4, 0.3 * 0.8),  # reads (x + s y): the blob moves by 4 s
    "ShearY": (T.ShearY(), 0.8, lambda r, c: (r - 4) / -4, 0.3 * 0.8),
    "Scale": (T.Scale(), 0.5, lambda r, c: torch.hypot(r - 8, c - 10) / math.hypot(4, 4), None),
}


@pytest.mark.parametrize("source", ["augnet", "kornia", "torchvision"])
@pytest.mark.parametrize("name", sorted(WARPS))
def test_translate_y_shears_and_zoom_stay_in_the_learned_range_and_reach_its_ends(name, source):
    # A blob off the centre shows each warp's parameter: TranslateY's shift (rows), a shear's coefficient (shift
    # over offset), the zoom (distance from the centre). Both ends reached within 3 % of the range (at 2,000
    # uniform draws, P(no draw in the top 3 %) = 0.97^2000 < 1e-26). Shears and zoom are approximate (uniform in
    # angle and in linear zoom): their range is augnet's, not their distribution.
    probe = torch.zeros(3, 17, 21)
    probe[:, 3:6, 13:16] = 1.0
    t, m, read, top = WARPS[name]
    y = augnet_draws(t, m, probe) if source == "augnet" else library_draws(source, t, m, probe, seed=1)
    v = read(*_centroid(y)).numpy()
    if name == "Scale":
        z = 2.0**m
        lo, hi, tol = 1 / z, z, 0.02
    else:
        lo, hi = -top, top
        # torchvision rounds shifts to whole pixels (approximate): within half a pixel
        tol = 0.55 if (name == "TranslateY" and source == "torchvision") else 0.03 * top
    span = hi - lo
    assert v.min() >= lo - tol and v.max() <= hi + tol, f"{name} in {source}: [{v.min():.4g}, {v.max():.4g}]"
    assert v.min() < lo + 0.03 * span + tol and v.max() > hi - 0.03 * span - tol, f"{name} in {source}"
    if name != "Scale":  # symmetric about 0, whatever the sign convention
        assert abs(np.median(v)) < 0.05 * span, f"{name} in {source}: median {np.median(v):.3g}"


# ------------------------------------------------------------------------------- integer images (defects)


def test_solarize_of_uint16_images_thresholds_at_the_dtypes_range():
    # 16-bit images (decode_png of a 16-bit PNG) are torchvision images too. The threshold was scaled by 255
    # whatever the dtype: at magnitude 0.1 (thresholds in [0.9, 1]) nearly every pixel above 255 / 65535 was
    # inverted. The uint16 output must be the uint8 one, at 16-bit resolution.
    g = torch.Generator().manual_seed(0)
    x8 = torch.randint(0, 256, (3, 8, 9), dtype=torch.uint8, generator=g)
    x16 = (x8.to(torch.int32) * 257).to(torch.uint16)
    pipeline = export("torchvision", policy_of(T.Solarize(), 0.1))
    for seed in range(5):
        torch.manual_seed(seed)
        a = pipeline(x8).double() / 255
        torch.manual_seed(seed)
        b = pipeline(x16).to(torch.int32).double() / 65535
        torch.testing.assert_close(b, a, rtol=0, atol=1e-9)
