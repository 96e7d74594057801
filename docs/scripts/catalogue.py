"""The transform catalogue as pictures, drawn from the transforms themselves.

For every image transform of :mod:`augnet.transforms.image`: one row of a
generated sample image at magnitudes 0, 0.25, 0.5, 0.75 and 1, every panel with
the same random draw (the same generator seed), so the row shows what the
magnitude alone changes. For every signal and audio transform: the signal and
its amplitude spectrum before and after the transform at magnitude 1
(the SpecAugment-like masks: the spectrogram before and after).

``write_catalogue(folder)`` writes one PNG per transform and ``catalogue.rst``
(each transform's docstring summary, its range at magnitude 1 and its
picture); the docs build (docs/conf.py) calls it, so the pictures cannot drift
from the code. Nothing is downloaded: the sample image and signals are made here.

    python docs/scripts/catalogue.py OUT_FOLDER   # the same files, without the docs build
"""

from __future__ import annotations

import inspect
import math
import sys
from pathlib import Path

import torch

from augnet.transforms import audio as A
from augnet.transforms import image as I
from augnet.transforms import signal as S

MAGNITUDES = (0.0, 0.25, 0.5, 0.75, 1.0)
SEED = 1  # a draw that visibly changes the sample with every transform at magnitude 1
SFREQ = 128.0  # the EEG-like signal: 4 s at 128 Hz
SAMPLE_RATE = 8000.0  # the audio signal: 0.5 s at 8 kHz
SENSORS = [(0.7, 0.7, 0.1), (-0.7, 0.7, 0.1), (0.7, -0.7, 0.1), (-0.7, -0.7, 0.1)]  # (x, y, z) before normalising


def sample_image(size: int = 96) -> torch.Tensor:
    """(2, 3, size, size) images in [0, 1]: an asymmetric scene (flips, turns and colours all show) and a partner."""
    y, x = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    img = torch.stack([0.25 + 0.5 * x, 0.35 + 0.3 * y, 0.75 - 0.35 * x * y])  # a soft colour gradient
    grid = ((x * 8) % 1 < 0.06) | ((y * 8) % 1 < 0.06)
    img = torch.where(grid, torch.full_like(img, 0.92), img)
    letter = ((x > 0.3) & (x < 0.42) & (y > 0.2) & (y < 0.8)) | ((x > 0.3) & (x < 0.7) & (y > 0.2) & (y < 0.32))
    letter |= (x > 0.3) & (x < 0.6) & (y > 0.45) & (y < 0.56)  # an "F": no symmetry
    img = torch.where(letter, torch.tensor([0.85, 0.15, 0.1]).view(3, 1, 1), img)
    disk = (x - 0.75) ** 2 + (y - 0.75) ** 2 < 0.012
    img = torch.where(disk, torch.tensor([0.1, 0.2, 0.8]).view(3, 1, 1), img)
    partner = torch.stack([1 - x, 0.5 + 0.4 * torch.sin(6 * y), x * y])  # what SamplePairing blends in
    return torch.stack([img, partner]).clamp(0, 1)


def sample_signal(n: int = 512) -> torch.Tensor:
    """(1, 4, n) EEG-like signals: 6 and 10 Hz rhythms over 1/f-shaped noise, a different mix per channel."""
    g = torch.Generator().manual_seed(0)
    t = torch.arange(n) / SFREQ
    spectrum = torch.fft.rfft(torch.randn(4, n, generator=g))
    freqs = torch.fft.rfftfreq(n, 1 / SFREQ)
    noise = torch.fft.irfft(spectrum / freqs.clamp(min=1.0).sqrt(), n)
    weights = torch.tensor([[1.0, 0.3], [0.6, 0.8], [0.3, 1.0], [0.8, 0.5]])
    rhythms = torch.stack([torch.sin(2 * math.pi * 6 * t), torch.sin(2 * math.pi * 10 * t + 1.0)])
    return (weights @ rhythms + 0.4 * noise / noise.std()).unsqueeze(0)


def sample_audio(n: int = 4000) -> torch.Tensor:
    """(1, 1, n): a tone with harmonics rising from 300 Hz, with a little noise (0.5 s at 8 kHz)."""
    g = torch.Generator().manual_seed(0)
    t = torch.arange(n) / SAMPLE_RATE
    phase = 2 * math.pi * (300 * t + 400 * t**2)
    wave = sum(torch.sin(k * phase) / k for k in (1, 2, 3, 5))
    return (0.5 * wave + 0.05 * torch.randn(n, generator=g)).view(1, 1, n)


def spectrogram(wave: torch.Tensor) -> torch.Tensor:
    """(1, F, T) log-magnitude spectrogram of a (1, 1, n) waveform."""
    spec = torch.stft(wave[0], 256, 64, window=torch.hann_window(256), return_complex=True).abs()
    return torch.log1p(spec)


def image_transforms() -> list:
    return [getattr(I, n)() for n in I.__all__ if inspect.isclass(getattr(I, n))]


def signal_transforms() -> list:
    made = []
    for name in S.__all__:
        cls = getattr(S, name)
        if not inspect.isclass(cls) or cls is S.SignalTransform:
            continue
        params = inspect.signature(cls).parameters
        if "sfreq" in params:
            made.append(cls(SFREQ))
        elif "pairs" in params:
            made.append(cls([(0, 1), (2, 3)]))
        elif "sensor_positions" in params:
            made.append(cls(torch.nn.functional.normalize(torch.tensor(SENSORS), dim=1)))
        else:
            made.append(cls())
    return made


def audio_transforms() -> list:
    made = []
    for name in A.__all__:
        cls = getattr(A, name)
        needs_rate = "sample_rate" in inspect.signature(cls).parameters
        made.append(cls(SAMPLE_RATE) if needs_rate else cls())
    return made


def summary(obj) -> str:
    """The first paragraph of a docstring, on one line."""
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _image_row(t, x, path: Path, plt) -> None:
    fig, axes = plt.subplots(1, len(MAGNITUDES), figsize=(2.0 * len(MAGNITUDES), 2.35))
    for ax, mu in zip(axes, MAGNITUDES):
        with torch.no_grad():
            out = t(x, mu, generator=torch.Generator().manual_seed(SEED))[0]
        ax.imshow(out.clamp(0, 1).permute(1, 2, 0).numpy(), interpolation="nearest")
        ax.set_title(f"mu {mu:g}\n{t.natural_range(mu, tuple(x.shape[2:]))}", fontsize=8)
        ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def _signal_panels(t, x, rate: float, path: Path, plt) -> None:
    with torch.no_grad():
        out = t(x, 1.0, generator=torch.Generator().manual_seed(SEED))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 2.6))
    time = torch.arange(x.shape[-1]) / rate
    offset = 3 * x.std()
    for c in range(x.shape[1]):
        left.plot(time, x[0, c] + c * offset, color="0.65", lw=0.8, label="before" if c == 0 else None)
        left.plot(time, out[0, c] + c * offset, color="C0", lw=0.8, label="after" if c == 0 else None)
    left.set_xlabel("time (s)")
    left.set_yticks([])
    left.legend(loc="upper right", fontsize=7)
    freqs = torch.fft.rfftfreq(x.shape[-1], 1 / rate)
    for signal, style in ((x, dict(color="0.65", label="before")), (out, dict(color="C0", label="after"))):
        amplitude = torch.fft.rfft(signal[0], dim=-1).abs().mean(0)
        right.semilogy(freqs, amplitude + 1e-6, lw=0.8, **style)
    right.set_xlabel("frequency (Hz)")
    right.set_ylabel("amplitude")
    right.legend(loc="upper right", fontsize=7)
    fig.suptitle(f"{type(t).__name__} at magnitude 1: {t.natural_range(1.0, (x.shape[-1],))}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def _spectrogram_panels(t, spec, path: Path, plt) -> None:
    with torch.no_grad():
        out = t(spec, 1.0, generator=torch.Generator().manual_seed(SEED))
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.6))
    for ax, image, title in zip(axes, (spec, out), ("before", "after")):
        ax.imshow(image[0].numpy(), origin="lower", aspect="auto", cmap="magma")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("frame")
        ax.set_ylabel("frequency bin")
    fig.suptitle(f"{type(t).__name__} at magnitude 1: {t.natural_range(1.0, tuple(spec.shape[1:]))}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def write_catalogue(folder: Path) -> list[Path]:
    """Draw every transform into ``folder`` (PNG files) and write ``folder/catalogue.rst``; the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    image, signal, audio = sample_image(), sample_signal(), sample_audio()
    families = [
        ("image", "Image transforms", I, image_transforms()),
        ("signal", "Signal (EEG) transforms", S, signal_transforms()),
        ("audio", "Audio transforms", A, audio_transforms()),
    ]
    lines, written = [], []
    for key, title, module, transforms in families:
        lines += [title, "-" * len(title), ""]
        if key == "image":
            lines += ["Each row: the sample image at magnitudes 0, 0.25, 0.5, 0.75 and 1, with the same draw.", ""]
        else:
            lines += ["Each picture: the signal and its amplitude spectrum, before (grey) and after, at magnitude 1.",
                      ""]  # fmt: skip
        for t in transforms:
            name = type(t).__name__
            path = folder / f"{key}_{name}.png"
            if key == "image":
                _image_row(t, image, path, plt)
            elif name.endswith("Spec"):
                _spectrogram_panels(t, spectrogram(audio), path, plt)
            else:
                _signal_panels(t, signal if key == "signal" else audio, SFREQ if key == "signal" else SAMPLE_RATE,
                               path, plt)  # fmt: skip
            written.append(path)
            lines += [
                name,
                "~" * len(name),
                "",
                f".. currentmodule:: {module.__name__}",
                "",
                f":class:`{module.__name__}.{name}`: {summary(type(t))}",
                "",
                f".. image:: /_generated/catalogue/{path.name}",
                f"   :alt: {name} on a sample",
                "",
            ]
    text = "\n".join(lines)
    rst = folder / "catalogue.rst"
    if not rst.exists() or rst.read_text() != text:
        rst.write_text(text)
    return written


if __name__ == "__main__":
    for p in write_catalogue(Path(sys.argv[1] if len(sys.argv) > 1 else "catalogue")):
        print(p)
