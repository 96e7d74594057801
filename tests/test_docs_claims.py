"""What the documentation pages claim, checked against the code and the kept results.

``tests/test_docs.py`` runs the pages' python blocks and checks the API reference; this module checks the prose and
the tables: every ``augnet`` name a page mentions resolves, every keyword argument of a call written in backticks is
a parameter, the defaults the pages quote are the signatures', every ``augnet`` command line uses flags the command
has, every test that ``docs/bad_input.md`` names exists, and the figures quoted from a result file (under
``docs/results`` and ``benchmarks/results``) are the file's, rounded as the page prints them. Each check is a function
of the page's text that returns what it finds wrong, and each is also run on a page with one claim changed, to show
that it can fail.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import re
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"
BENCH = ROOT / "benchmarks" / "results"

#: The pages of the site and the README (the export pages are checked where they are written).
PAGES = [ROOT / "README.md", DOCS / "index.md", DOCS / "bad_input.md", *sorted((DOCS / "guide").glob("*.md"))]
PAGES += sorted((DOCS / "design").glob("*.md"))


def page(name: str) -> str:
    return (ROOT / name).read_text() if name == "README.md" else (DOCS / name).read_text()


def load(path: Path) -> dict:
    data = json.loads(path.read_text())
    return data.get("numbers", data) if isinstance(data, dict) else data


def table(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the Markdown table whose header row starts with ``header`` (is it, when
    ``header`` ends with a newline)."""
    lines = text.splitlines()
    if header.endswith("\n"):
        start = next(i for i, line in enumerate(lines) if line.strip() == header.strip())
    else:
        start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.lstrip().startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def f2(x: float) -> str:
    return f"{x:.2f}"


def f3(x: float) -> str:
    return f"{x:.3f}"


def flat(text: str) -> str:
    """The text with every run of white space one space: a sentence as the browser shows it, whatever its wrapping."""
    return re.sub(r"\s+", " ", text)


def says(text: str, claim: str) -> bool:
    """Whether the page says ``claim``, line breaks and indents aside."""
    return flat(claim) in flat(text)


def mutate(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


# ------------------------------------------------------------------------------- names and signatures

#: What a page's short names stand for.
HEADS = {
    "probes": "augnet.probes",
    "T": "augnet.transforms.image",
    "S": "augnet.transforms.signal",
    "audio": "augnet.transforms.audio",
    "signal": "augnet.transforms.signal",
    "training": "augnet.training",
}

#: Modules whose exported names a page may write bare (``fit(...)``, ``AugNet(...)``).
BARE = (
    "augnet",
    "augnet.training",
    "augnet.probes",
    "augnet.instance",
    "augnet.instance_policy",
    "augnet.transforms.image",
    "augnet.transforms.signal",
    "augnet.transforms.audio",
    "augnet.experiments",
    "augnet.presets",
    "augnet.policy",
)


def resolve(name: str):
    """The object a dotted name on a page stands for, or ``None``."""
    parts = name.split(".")
    if parts[0] == "augnet":
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                obj = getattr(obj, attr, None)
                if obj is None:
                    return None
            return obj
        return None
    if parts[0] in HEADS and len(parts) > 1:
        obj = importlib.import_module(HEADS[parts[0]])
    else:
        obj = next((getattr(importlib.import_module(m), parts[0]) for m in BARE
                    if parts[0] in getattr(importlib.import_module(m), "__all__", ())), None)
    rest = parts[1:] if parts[0] in HEADS or obj is not None else parts
    for attr in rest:
        obj = getattr(obj, attr, None)
        if obj is None:
            return None
    return obj


def unresolved_names(text: str) -> list[str]:
    """``augnet.x.y`` and ``probes.x`` names of a page that name nothing."""
    found = re.findall(r"(?<![\w./])(augnet(?:\.\w+)+|probes\.\w+)", text)
    return sorted({n for n in found if not n.endswith((".md", ".rst")) and resolve(n) is None})


def top_level_arguments(args: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in args:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def unknown_keywords(text: str) -> list[str]:
    """``name(kw=...)`` in backticks where ``name`` is an augnet callable that has no parameter ``kw``."""
    wrong = []
    for match in re.finditer(r"`((?:\w+\.)*[A-Za-z_]\w*)\(([^`]*)\)[^`]*`", text):
        obj = resolve(match.group(1))
        if obj is None or not callable(obj):
            continue
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            continue
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            continue
        for arg in top_level_arguments(match.group(2)):
            keyword = re.match(r"\s*(\w+)\s*=(?!=)", arg)
            if keyword and keyword.group(1) not in params:
                wrong.append(f"{match.group(0)}: {match.group(1)} has no parameter {keyword.group(1)!r}")
    return wrong


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_augnet_name_a_page_mentions_exists(path):
    assert not unresolved_names(path.read_text())


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_keyword_of_a_call_a_page_writes_is_a_parameter(path):
    assert not unknown_keywords(path.read_text())


def test_the_name_and_keyword_checks_find_a_misspelling():
    assert unresolved_names("see `augnet.training.fitt` and `probes.repport`") == [
        "augnet.training.fitt", "probes.repport"
    ]
    assert unknown_keywords("`fit(..., accumulate=4)` and `PolicyLogger(d, resume=True)`") == []
    found = unknown_keywords(
        "`fit(model, loader, accumulte=4)` or `probes.report(model, x, ['Rotate'], per_units=True)`"
    )
    assert len(found) == 2 and "accumulte" in found[0] and "per_units" in found[1]


def test_the_call_forms_the_training_guide_names_take_their_arguments():
    from augnet.training import PolicyLogger, fit

    text = page("guide/training.md")
    for form in ("fit(..., accumulate=k)", "fit(..., epochs=E, start_epoch=k)", "resume=True"):
        assert form in text, form
    assert {"accumulate", "start_epoch", "epochs"} <= set(inspect.signature(fit).parameters)
    assert inspect.signature(fit).parameters["accumulate"].default == 1  # "The default, `1`, is the plain loop"
    assert {"resume", "overwrite", "every"} <= set(inspect.signature(PolicyLogger).parameters)
    # "fit(model, x, y, opt, E, batch_size)": the positional order.
    assert list(inspect.signature(fit).parameters)[:6] == ["model", "x", "y", "optimizer", "epochs", "batch_size"]


def test_the_tap_mix_signature_the_performance_page_shows():
    import augnet

    text = page("guide/performance.md")
    shown = re.search(r"out = augnet\.ops\.tap_mix\((.*)\)", text).group(1)
    params = inspect.signature(augnet.ops.tap_mix).parameters
    for arg in top_level_arguments(shown):
        name, _, default = arg.strip().partition("=")
        assert name in params
        if default:
            assert params[name].default == eval(default), name


def test_the_probe_demo_excerpt_calls_as_the_example_does_and_reads_what_it_says():
    import torch

    import augnet
    from augnet import probes
    from augnet.transforms import image as T

    text = page("guide/probes.md")
    excerpt = re.search(r"curve = probes\.invariance_curve\(model, x, T\.Rotate\(\), (\[.*?\]), copies=4\)\n"
                        r'curve\["features"\]  # "(.*)"', text)
    example = (ROOT / "examples" / "probe_demo.py").read_text()
    assert f"magnitudes = {excerpt.group(1)}" in example
    assert "probes.invariance_curve(model, x, transform, magnitudes, copies=4)" in example
    trunk = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    model = augnet.AugNet(trunk, augnet.AugmentationLayer([T.Rotate()])).eval()
    curve = probes.invariance_curve(model, torch.rand(8, 3, 8, 8), T.Rotate(), [0.0, 0.5], copies=4)
    assert curve["features"] == excerpt.group(2)


# ------------------------------------------------------------------------------- defaults

#: (page, pattern whose group is the value the page quotes, the value in the code).
def _defaults():
    import augnet
    import augnet.presets
    from augnet import instance, probes
    from augnet.probes import _common, similarity_pairs
    from augnet.transforms import base

    sig = lambda f, p: inspect.signature(f).parameters[p].default  # noqa: E731
    layer, conditioned = augnet.AugmentationLayer, augnet.ConditionedAugmentationLayer
    schedule = augnet.presets.cifar10_lambda()
    return [
        ("guide/concepts.md", r"`augnet.AUG_LR` \((\S+)\)", augnet.AUG_LR),
        ("guide/concepts.md", r"`augnet.WEIGHT_LR` \((\S+),", augnet.WEIGHT_LR),
        ("guide/concepts.md", r"`augnet.SATURATION` = ([\d.]+)\)?:", augnet.SATURATION),
        ("guide/reproducing.md", r"`augnet.SATURATION` \((\S+)\)", augnet.SATURATION),
        ("guide/reproducing.md", r"`augnet.WEIGHT_LR` \((\S+),", augnet.WEIGHT_LR),
        ("guide/training.md", r"`KINK_STEP` \((\S+)\)", base.KINK_STEP),
        ("guide/concepts.md", r"`AugNet\(effect_every=(\d+)\)`", sig(augnet.AugNet, "effect_every")),
        ("guide/concepts.md", r"by default \(`stratify=(\w+)`\)", sig(augnet.AugNet, "stratify")),
        ("guide/concepts.md", r"`AugNet`'s\s+default of (\d+)", sig(augnet.AugNet, "eval_copies")),
        ("guide/concepts.md", r'\(`train_mode="(\w+)"`, the default\)', sig(layer, "train_mode")),
        ("guide/concepts.md", r"README's initial\s+magnitude of ([\d.]+)\s", sig(layer, "init_magnitude")),
        ("guide/concepts.md", r"`augnet.Augerino\(trunk, init_width=([\d.]+)\)", sig(augnet.Augerino, "init_width")),
        ("guide/instance.md", r"the default conditioner, `hidden=(\d+)`", sig(conditioned, "hidden")),
        ("guide/instance.md", r"default conditioner \(`kernel_size=(\d+)`\)",
         sig(conditioned, "kernel_size")),
        ("guide/instance.md", r"default `momentum=(\d+)`", sig(instance.TinyConditioner, "momentum")),
        ("guide/probes.md", r"\(`batch_size`, default (\d+)\)", _common.DEFAULT_BATCH_SIZE),
        ("guide/probes.md", r"\(default (\d+)\s+per class\)", similarity_pairs.DEFAULT_PAIRS_PER_CLASS),
        ("guide/probes.md", r"\(`holdout=(\S+), seed=\d+`\)", sig(probes.fit_equivariance_map, "holdout")),
        ("guide/probes.md", r"`grid_points=(\d+)`", sig(probes.report, "grid_points")),
        ("guide/probes.md", r"above `alpha` \((\S+)\)", sig(probes.report, "alpha")),
        ("guide/transforms.md", r"`cifar10_lambda\(\)` its λ schedule \((\S+),", schedule.values[0]),
        ("guide/transforms.md", r"then (\S+) after epoch \d+\)", schedule.values[1]),
        ("guide/transforms.md", r"after epoch (\d+)\)", schedule.milestones[0]),
    ]


def wrong_defaults(texts: dict[str, str]) -> list[str]:
    wrong = []
    for name, pattern, value in _defaults():
        found = re.search(pattern, texts[name])
        if found is None:
            wrong.append(f"{name}: no {pattern!r}")
            continue
        quoted = found.group(1)
        if isinstance(value, (bool, str)):
            ok = quoted == str(value)
        else:
            ok = math.isclose(float(quoted), float(value), rel_tol=1e-9)
        if not ok:
            wrong.append(f"{name}: {found.group(0)!r} but the code has {value!r}")
    return wrong


def test_the_defaults_the_pages_quote_are_the_code_s():
    texts = {name: page(name) for name, _, _ in _defaults()}
    assert not wrong_defaults(texts)
    texts["guide/concepts.md"] = mutate(texts["guide/concepts.md"], "`augnet.AUG_LR` (5e-3)", "`augnet.AUG_LR` (1e-3)")
    assert wrong_defaults(texts) == ["guide/concepts.md: '`augnet.AUG_LR` (1e-3)' but the code has 0.005"]


def catalogue_problems(text: str) -> list[str]:
    """The catalogue's tables: each default it quotes is the constructor's, and every transform class has a row."""
    from augnet.transforms import audio, image, signal

    def default(cls, param, quoted):
        value = inspect.signature(cls).parameters[param].default
        number = {"pi": math.pi, "2π": 2 * math.pi}.get(quoted)
        return value == (number if number is not None else float(quoted))

    problems, named = [], set()
    for row in table(text, "| transform | magnitude 1 means (default) | parameters |"):
        classes = re.findall(r"`(\w+)`", row[0])
        named |= set(classes)
        for param, quoted in re.findall(r"`(\w+)=([\w.π]+)`", row[2]):
            for cls in classes:
                if not hasattr(image, cls):
                    problems.append(f"{cls} is not an image transform")
                elif not default(getattr(image, cls), param, quoted):
                    problems.append(f"{cls}({param}={quoted})")
    for row in table(text, "| transform | magnitude 1 means (default) |\n"):
        named |= set(re.findall(r"(?:`|, |audio\.)([A-Z]\w+)", row[0]))
        if "SensorsRotationX/Y/Z" in row[0]:
            named |= {"SensorsRotationX", "SensorsRotationY", "SensorsRotationZ"}
        call = re.search(r"`(?:audio\.)?(\w+)\((\w+)=([\w.π]+)\)`", row[0])
        if call:
            cls = getattr(signal, call.group(1), None) or getattr(audio, call.group(1))
            if not default(cls, call.group(2), call.group(3)):
                problems.append(call.group(0))
    for module in (image, signal, audio):
        for name in module.__all__:
            if inspect.isclass(getattr(module, name)) and name != "SignalTransform" and name not in named:
                problems.append(f"{name} has no row")
    return problems


def test_the_catalogue_quotes_each_transform_s_default_and_lists_every_transform():
    text = page("guide/transforms.md")
    assert not catalogue_problems(text)
    assert catalogue_problems(mutate(text, "`max_shift=0.25`", "`max_shift=0.5`")) == [
        "TranslateX(max_shift=0.5)", "TranslateY(max_shift=0.5)"
    ]
    assert catalogue_problems(mutate(text, "`GaussianNoise(max_std=0.2)`", "`GaussianNoise(max_std=0.1)`")) == [
        "`GaussianNoise(max_std=0.1)`"
    ]
    assert catalogue_problems(mutate(text, "| `Sharpness` |", "| `Sharp` |")) == [
        "Sharp is not an image transform", "Sharpness has no row"
    ]


def transform_calls_that_fail(text: str) -> list[str]:
    """Transform constructions a page writes in backticks (``Rotate(max_angle=math.radians(30))``) that raise.

    A call of names the page leaves to the reader (``BandStop(sfreq)``, ``Hue(max_angle=...)``) is not evaluated
    (nor docs/bad_input.md, whose calls are refused on purpose)."""
    import warnings

    import numpy as np
    import torch

    from augnet.transforms import audio, image, signal

    classes = {n: getattr(m, n) for m in (image, signal, audio) for n in m.__all__ if inspect.isclass(getattr(m, n))}
    namespace = {"torch": torch, "np": np, "math": math, "audio": audio, **classes}
    failing = []
    for match in re.finditer(r"`((?:audio\.)?(\w+)\([^`]*\))`", text):
        if match.group(2) not in classes or "..." in match.group(1):
            continue
        try:
            code = compile(match.group(1), "<page>", "eval")
        except SyntaxError:
            continue
        if set(code.co_names) - set(namespace):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # Rotate(max_angle=30) warns: degrees, it says
                eval(code, dict(namespace))
        except (TypeError, ValueError) as err:
            failing.append(f"{match.group(1)}: {type(err).__name__}")
    return failing


@pytest.mark.parametrize("name", ["guide/transforms.md", "guide/concepts.md", "guide/training.md", "README.md"])
def test_every_transform_a_page_constructs_in_backticks_constructs(name):
    assert not transform_calls_that_fail(page(name))


def test_a_sampling_rate_given_as_a_0d_tensor_is_kept_as_the_number_the_page_says():
    import torch

    from augnet.transforms import signal

    assert "(`FrequencyShift(sfreq=torch.tensor(100.))`), kept as a Python float" in page("guide/transforms.md")
    shift = signal.FrequencyShift(sfreq=torch.tensor(100.0))
    assert type(shift.sfreq) is float and shift.sfreq == 100.0
    assert transform_calls_that_fail("`Rotate(max_angel=1)`, `GaussianNoise(max_std=-1)`, `BandStop(sfreq)`") == [
        "Rotate(max_angel=1): TypeError", "GaussianNoise(max_std=-1): ValueError"
    ]


# ------------------------------------------------------------------------------- command lines


def _subcommands():
    from augnet.cli import build_parser

    parser = build_parser()
    return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices


def wrong_flags(text: str) -> list[str]:
    """``augnet CMD ... --flag`` (in backticks or a code block, ``\\`` continuations included) with a flag CMD lacks."""
    commands = _subcommands()
    wrong = []
    for match in re.finditer(r"augnet (demo|bench|reproduce|probe)\b((?:\\\n|[^`\n])*)", text):
        options = {o for a in commands[match.group(1)]._actions for o in a.option_strings}
        for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", match.group(2)):
            if flag not in options:
                wrong.append(f"augnet {match.group(1)} {flag}")
    for name in re.findall(r"augnet reproduce ([a-z]+)\b", text):
        positional = next(a for a in commands["reproduce"]._actions if a.dest == "name" or a.choices)
        if name not in positional.choices and name not in ("NAME",):
            wrong.append(f"augnet reproduce {name}")
    return wrong


@pytest.mark.parametrize("path", [*PAGES, DOCS / "api" / "cli.md"], ids=lambda p: p.name)
def test_every_command_line_a_page_shows_uses_flags_the_command_has(path):
    assert not wrong_flags(path.read_text())


def test_the_command_line_check_finds_a_flag_or_name_the_command_lacks():
    assert wrong_flags("`augnet demo --preset paper --epochs 3`, `augnet reproduce versus --quick`") == []
    assert wrong_flags("`augnet demo --presets paper` and `augnet probe --model m \\\n    --unit`") == [
        "augnet demo --presets", "augnet probe --unit"
    ]
    assert wrong_flags("run `augnet reproduce selections`") == ["augnet reproduce selections"]


# ------------------------------------------------------------------------------- the tests bad_input.md names

#: The short names of bad_input.md's test column: the file each stands for.
BAD_INPUT_FILES = {
    "reliability": "test_reliability.py",
    "instance": "test_reliability_instance.py",
    "surfaces": "test_reliability_surfaces.py",
    "probes": "test_reliability_probes.py",
    "elsewhere": "test_reliability_elsewhere.py",
    "formats": "test_formats_dtypes.py",
    "ops": "test_reliability_ops.py",
    "fit": "test_reliability_fit.py",
    "selection": "test_reliability_selection.py",
    "models": "test_reliability_models.py",
    "policy": "test_reliability_policy.py",
    "checkpoint": "test_checkpoint.py",
    "tap_mix": "test_tap_mix.py",
}


def _tests_of(file: str) -> list[str]:
    return re.findall(r"def (test_\w+)", (ROOT / "tests" / file).read_text())


def missing_tests(text: str) -> list[str]:
    """Tests named in the last column of bad_input.md's tables that no test file holds.

    ``file: `name...``` is a test of that file starting with ``name`` (``...name``: ending, ``...name...``:
    containing it); a bare ``name`` is a case id of ``tests/test_bad_input.py``.
    """
    cases = set(re.findall(r'"([\w-]+)"', (ROOT / "tests" / "test_bad_input.py").read_text()))
    bad_input_tests = _tests_of("test_bad_input.py")
    missing = []
    for line in text.splitlines():
        if not line.startswith("|") or re.match(r"\|[-| ]+\|$", line):
            continue
        cell = line.strip().strip("|").split("|")[-1].strip()
        current = None
        for m in re.finditer(r"`?(?:tests/)?(test_\w+\.py)`?:?|\b([a-z_]+):\s|`([^`]+)`", cell):
            if m.group(1):
                current = m.group(1)
            elif m.group(2):
                if m.group(2) in BAD_INPUT_FILES or (ROOT / "tests" / f"test_{m.group(2)}.py").is_file():
                    current = BAD_INPUT_FILES.get(m.group(2), f"test_{m.group(2)}.py")
            elif current is None:
                name = m.group(3)
                words = name.split("-")  # a case id, or the words of a test's name (`probes-nan`)
                if name not in cases and not any(all(w in t for w in words) for t in bad_input_tests):
                    missing.append(f"test_bad_input.py: {name}")
            else:
                name = m.group(3)
                core = name.strip(".").split("::")[-1].split("[")[0].strip(".").removeprefix("test_")
                tests = _tests_of(current)
                if name.startswith("...") and name.endswith("..."):
                    ok = any(core in t for t in tests)
                elif name.endswith("...") or "...[" in name:
                    ok = any(t.startswith("test_" + core) for t in tests)
                elif name.startswith("..."):
                    ok = any(t.endswith(core) for t in tests)
                else:
                    ok = "test_" + core in tests
                if not ok:
                    missing.append(f"{current}: {name}")
    return missing


def test_every_test_bad_input_md_names_exists():
    assert not missing_tests(page("bad_input.md"))


def test_the_bad_input_check_finds_a_test_that_is_not_there():
    row = "| `x` | y | z | ops: `a_generator_that_is_not...`, `generator_that_is_not...`; `test_instance.py`: `nope` |"
    assert missing_tests(row) == ["test_reliability_ops.py: generator_that_is_not...", "test_instance.py: nope"]
    assert missing_tests("| a | b | c | `tap_mix-rank`, `no-such-case` |") == ["test_bad_input.py: no-such-case"]


def test_every_table_row_of_bad_input_md_has_its_four_cells():
    text = page("bad_input.md")
    rows = table(text, "| entry point | bad input | what happens | test |")
    assert len(rows) > 100
    short = [r[0][:60] for r in rows if len(r) != 4]
    assert not short, short


# ------------------------------------------------------------------------------- figures from result files


def demo_problems(concepts: str, readme: str) -> list[str]:
    """The demo's run as the concepts page prints it and the README quotes it: ``docs/results/demo/demo.json``."""
    from augnet.policy import Policy

    demo = json.loads((RESULTS / "demo" / "demo.json").read_text())
    problems = []
    block = re.search(r"learned policy \(< marks the selected transform\):\n(.*?)\n\ntest accuracy", concepts, re.S)
    if block is None or block.group(1) != str(Policy.from_json(demo["policy"])):
        problems.append("the printed policy")
    accuracy = f3(demo["test_accuracy"])
    line = f"test accuracy with {demo['config']['eval_copies']} copies: {accuracy}  ({demo['seconds']:.0f} s)"
    if not says(concepts, line):
        problems.append(f"the accuracy line: {line!r}")
    rotate = next(t for t in demo["policy"]["layers"][0]["transforms"] if t["transform"] == "Rotate")
    weight, angle = rotate["weight"], rotate["range"][1]
    quote = f"layer selects Rotate (weight {weight:.2f}) at ±{angle:.1f}° and the test accuracy is {accuracy}"
    if not says(readme, quote):
        problems.append(f"README: {quote!r}")
    return problems


def test_the_demo_run_the_pages_print_is_the_kept_one():
    concepts, readme = page("guide/concepts.md"), page("README.md")
    assert not demo_problems(concepts, readme)
    assert demo_problems(mutate(concepts, "(38 s)", "(47 s)"), readme) == [
        "the accuracy line: 'test accuracy with 4 copies: 1.000  (38 s)'"
    ]
    assert demo_problems(mutate(concepts, "weight 0.991", "weight 0.990"), readme) == ["the printed policy"]


#: The selection table's rows, as the concepts page labels them: the setting's name in selection.json.
SELECTION_ROWS = {
    "the paper's text (`paper`)": "paper",
    "the official code (`official`)": "official",
    "magnitude decay (augnet's previous default)": "magnitude decay (previous default)",
    "calibrated to the untrained trunk, once": "calibrated to the trunk, once",
    "effect units alone": "effect units",
    "sampled training alone": "sampled training",
    "effect units + sampled training": "effect units + sampled training",
    "**augnet's default** (+ without replacement)": "augnet default (+ without replacement)",
    "the README's first model, as written": "README's first model",
    "oracle augmentation (the true shifts)": "oracle (true shifts)",
}


def selection_problems(text: str) -> list[str]:
    numbers = load(RESULTS / "selection" / "selection.json")
    summary = {(s["task"], s["setting"]): s for s in numbers["summary"]}
    tasks = ["sprites", "glyphs", "sinusoids-1", "sinusoids-2", "sinusoids-4"]
    problems = []
    rows = table(text, "| setting | sprites | glyphs |")
    assert [r[0] for r in rows] == list(SELECTION_ROWS)
    for row in rows:
        setting = SELECTION_ROWS[row[0]]
        for task, cell in zip(tasks, row[1:6]):
            s = summary.get((task, setting))
            want = "–" if s is None else f"{s['successes']}/{s['runs']}"
            if cell.strip("*") != want:
                problems.append(f"{setting}, {task}: {cell} (file: {want})")
        trunks = summary[("capacity", setting)]["trunks"].values()
        want = f"{sum(t['invariance_median'] >= 0.9 for t in trunks)}/9"
        if not row[6].strip("*").startswith(want):
            problems.append(f"{setting}, capacity: {row[6]} (file: {want})")
    readme = summary[("capacity", "README's first model")]["trunks"]
    default = summary[("capacity", "augnet default (+ without replacement)")]["trunks"]
    oracle = summary[("capacity", "oracle (true shifts)")]["trunks"]
    narrow = ("1x4", "2x4", "3x4")
    def span(values):
        return [f2(min(values)), f2(max(values))]

    claims = {  # a sentence of the page, its figures as groups: the file's figures, rounded as the page does
        r"its accuracy \(([\d.]+), ([\d.]+), ([\d.]+)\) is above the oracle's \(([\d.]+), ([\d.]+), ([\d.]+)\)": [
            *(f2(default[t]["accuracy"]) for t in narrow), *(f2(oracle[t]["accuracy"]) for t in narrow)
        ],
        r"median invariance of ([\d.]+) to ([\d.]+) \(the rule": span([readme[t]["invariance_median"] for t in narrow]),
        r"though their accuracy \(([\d.]+) to ([\d.]+)\) stays": span([readme[t]["accuracy"] for t in narrow]),
        r"above the oracle augmentation's \(([\d.]+) to ([\d.]+)\)": span([oracle[t]["accuracy"] for t in narrow]),
    }
    for pattern, values in claims.items():
        found = re.search(pattern, flat(text))
        if found is None:
            problems.append(f"missing: {pattern!r}")
        elif list(found.groups()) != values:
            problems.append(f"{found.group(0)!r}: the file gives {values}")
    return problems


def test_the_selection_table_and_its_figures_are_selection_json_s():
    text = page("guide/concepts.md")
    assert not selection_problems(text)
    changed = mutate(text, "| 0/5 | 0/5 | 0/5 | 1/9 |", "| 0/5 | 0/5 | 1/5 | 1/9 |")
    assert selection_problems(changed) == ["effect units, sinusoids-4: 1/5 (file: 0/5)"]
    changed = mutate(text, "though their accuracy (0.76 to 0.85)", "though their accuracy (0.77 to 0.85)")
    assert selection_problems(changed) == [
        "'though their accuracy (0.77 to 0.85) stays': the file gives ['0.76', '0.85']"
    ]


def copies_table_problems(text: str) -> list[str]:
    """The concepts page's table of the README row's capacity models at 4 and 10 copies."""
    groups = {}
    for name in ("selection_capacity_copies", "selection_capacity_copies_seeds10-24"):
        for group, by_copies in json.loads((BENCH / f"{name}.json").read_text())["summary"].items():
            groups[re.match(r"seeds \d+-\d+", group).group(0)] = by_copies
    problems = []
    rows = table(text, "| README row's capacity models |")
    assert len(rows) == 10
    for row in rows:
        group, copies = re.match(r"(seeds \d+-\d+).*, (\d+) copies", row[0]).groups()
        s = groups[group][copies]
        narrow = [s["trunks"][t] for t in ("1x4", "2x4", "3x4")]
        want = [
            " / ".join(f2(t["invariance_median"]) for t in narrow),
            str(s["meeting"]),
            " / ".join(f2(t["accuracy"]) for t in narrow),
        ]
        if row[1:] != want:
            problems.append(f"{row[0]}: {row[1:]} (file: {want})")
    return problems


def test_the_copies_table_is_the_benchmark_s():
    text = page("guide/concepts.md")
    assert not copies_table_problems(text)
    assert copies_table_problems(mutate(text, "| 6 | 0.83 / 0.85 / 0.76 |", "| 6 | 0.83 / 0.85 / 0.77 |")) == [
        "seeds 0-4 (the table's), 4 copies: ['0.75 / 0.86 / 0.88', '6', '0.83 / 0.85 / 0.77'] "
        "(file: ['0.75 / 0.86 / 0.88', '6', '0.83 / 0.85 / 0.76'])"
    ]


def _instance_runs() -> list[dict]:
    runs = []
    for folder in ("instance", "instance-seeds-5-9"):
        runs += json.loads((RESULTS / folder / "instance_numbers.json").read_text())["runs"]
    return runs


def instance_problems(text: str) -> list[str]:
    runs = {r["seed"]: r for r in _instance_runs()}
    problems = []
    for row in table(text, "| seed | global | per-instance, classes"):
        run = runs[int(row[0].split()[0])]
        per = [run["instance"]["range"][str(c)]["mean"] for c in range(6)]
        want = [
            f"±{run['global']['range']['0']['mean']:.0f}",
            "±" + " / ".join(f"{v:.0f}" for v in per),
            " / ".join(f3(run[m]["accuracy"]) for m in ("trunk", "global", "instance")),
            "yes" if run["instance_within_targets"] else "no",
        ]
        if row[1:] != want:
            problems.append(f"seed {run['seed']}: {row[1:]} (file: {want})")
    for row in table(text, "| class | trunk ±45 / ±180 |"):
        c = row[0].split()[0]
        want = [
            " / ".join(f2(statistics.mean(r[m]["invariance"][c][a] for r in runs.values())) for a in ("45", "180"))
            for m in ("trunk", "global", "instance")
        ]
        if row[1:] != want:
            problems.append(f"class {c}: {row[1:]} (file: {want})")
    seconds = {m: [r[m]["seconds"] for r in runs.values()] for m in ("global", "instance")}
    claim = "trains in {:.0f}-{:.0f} s against the global model's {:.0f}-{:.0f} s".format(
        min(seconds["instance"]), max(seconds["instance"]), min(seconds["global"]), max(seconds["global"])
    )
    if not says(text, claim):
        problems.append(f"missing: {claim!r}")
    cost = json.loads((BENCH / "instance_cost.json").read_text())["wall_clock"]
    ms = cost["median_ms"]
    claim = (
        f"takes {ms['instance']:.1f} ms against the global step's {ms['global']:.1f} ms, "
        f"{cost['ratio_instance_to_global']:.2f} times (target: at most 1.3), of which the conditioner alone is "
        f"{ms['conditioner']:.1f} ms"
    )
    if not says(text, claim):
        problems.append(f"missing: {claim!r}")
    kernel_1 = json.loads((BENCH / "instance_cost_kernel_1.json").read_text())["wall_clock"]
    ratio, conditioner = kernel_1["ratio_instance_to_global"], kernel_1["median_ms"]["conditioner"]
    claim = f"the kept run {ratio:.2f} times and {conditioner:.0f} ms"
    if not says(text, claim):
        problems.append(f"missing: {claim!r}")
    return problems


def test_the_per_instance_tables_and_costs_are_the_kept_runs():
    text = page("guide/instance.md")
    assert not instance_problems(text)
    assert instance_problems(mutate(text, "| 8 (held out) | ±56 |", "| 8 (held out) | ±55 |")) == [
        "seed 8: ['±55', '±60 / 56 / 60 / 56 / 180 / 180', '1.000 / 0.999 / 1.000', 'yes'] "
        "(file: ['±56', '±60 / 56 / 60 / 56 / 180 / 180', '1.000 / 0.999 / 1.000', 'yes'])"
    ]
    assert len(instance_problems(mutate(text, "conditioner alone 16 to 22 ms; the kept run 1.80 times and 22 ms",
                                        "conditioner alone 16 to 20 ms; the kept run 1.80 times and 20 ms"))) == 1


def test_the_readme_s_per_instance_figures_are_the_kept_runs():
    readme = page("README.md")
    runs = _instance_runs()
    ratio = json.loads((BENCH / "instance_cost.json").read_text())["wall_clock"]["ratio_instance_to_global"]
    assert says(readme, f"at {ratio:.2f} times the cost of a global layer's training step")
    a = [r["instance"]["range"][str(c)]["mean"] for r in runs for c in range(4)]
    b = [r["instance"]["range"][str(c)]["mean"] for r in runs for c in (4, 5)]
    pair_a, pair_b = f"±{min(a):.0f}-{max(a):.0f}°", f"±{min(b):.0f}-{max(b):.0f}°"
    assert says(readme, f"({pair_a} for the pair whose labels survive ±45°, {pair_b}")
    met = sum(r["instance_within_targets"] for r in runs)
    assert says(readme, f"on {met} of {len(runs)} seeds")


#: The comparison's headline columns: the method each stands for in versus.json.
VERSUS_METHODS = {"RandAugment": "randaugment", "TrivialAugment": "trivialaugment", "AugMix": "augmix"}
HAND_DESIGNED = ("crop", "randaugment", "trivialaugment", "autoaugment", "augmix", "fixed")


def versus_problems(text: str, readme: str) -> list[str]:
    reported = load(RESULTS / "versus" / "versus.json")["reported"]
    problems = []

    def cell(task, regime, method, key, with_std):
        mean, std, _ = reported[task][regime][method][key]
        return f"{mean:.3f} ± {std:.3f}" if with_std else f3(mean)

    for row in table(text, "| task, data | no augmentation |"):
        task, data = row[0].split(", ")[0], row[0].split(", ")[1]
        regime = "small" if data.startswith("10 %") else "full"
        key = "accuracy_shift" if row[0].endswith("shifted") else "accuracy"
        with_std = key == "accuracy"
        name = row[2].partition(" ")[0]
        best = VERSUS_METHODS[name]
        values = {m: reported[task][regime][m][key][0] for m in HAND_DESIGNED if m in reported[task][regime]}
        if values[best] < max(values.values()):
            problems.append(f"{row[0]}: {name} is not the best hand-designed method")
        want = [
            cell(task, regime, "none", key, with_std),
            f"{name} {cell(task, regime, best, key, with_std)}",
            cell(task, regime, "augerino", key, with_std),
            cell(task, regime, "augnet", key, True).replace(f3(reported[task][regime]["augnet"][key][0]),
                                                             f3(reported[task][regime]["augnet"][key][0])),
        ]
        got = [row[1], row[2], row[3], row[4].replace("**", "")]
        if got != want:
            problems.append(f"{row[0]}: {got} (file: {want})")
    small = reported["digits"]["small"]
    quote = (
        f"({f3(small['augnet']['accuracy'][0])} against {f3(small['randaugment']['accuracy'][0])} ± "
        f"{f3(small['randaugment']['accuracy'][1])}) and 6.6 points above it on the test set rotated by up to ±30° "
        f"({f3(small['augnet']['accuracy_shift'][0])} against {f3(small['randaugment']['accuracy_shift'][0])})"
    )
    if not says(readme, quote):
        problems.append(f"README: {quote!r}")
    return problems


def test_the_comparison_s_headline_is_versus_json_s():
    text, readme = page("guide/reproducing.md"), page("README.md")
    assert not versus_problems(text, readme)
    changed = mutate(text, "| RandAugment 0.846 |", "| RandAugment 0.848 |")
    assert versus_problems(changed, readme) == [
        "digits, 10 %, shifted: ['0.784', 'RandAugment 0.848', '0.878', '0.912 ± 0.024'] "
        "(file: ['0.784', 'RandAugment 0.846', '0.878', '0.912 ± 0.024'])"
    ]
    assert len(versus_problems(text, mutate(readme, "(0.912 against 0.846)", "(0.912 against 0.856)"))) == 1


def digits_table_problems(text: str) -> list[str]:
    summary = json.loads((BENCH / "versus_digits_augmentations.json").read_text())["summary"]
    names = {
        "none": "none", "rotated within ±20°": "rotate", "AugNet (README's model;": "augnet",
        "AugNet, two stacked layers": "augnet, 2 layers", "rotated, then shifted": "rotate then shift",
        "random crop": "crop", "shifted within ±2 px on each axis": "shift", "RandAugment": "randaugment",
        "half rotated within ±20°, half shifted": "rotate or shift",
    }
    problems = []
    for row in table(text, "| augmentation of every training image |"):
        s = summary[next(v for k, v in names.items() if row[0].startswith(k))]
        want = [f3(s[g]["accuracy"]) for g in ("tuning (0-4)", "reported (5-9)", "unused (10-19)")]
        want += [f"{s['all']['accuracy']:.3f} ± {s['all']['std']:.3f}", f3(s["all"]["accuracy_shift"])]
        got = [c.replace("**", "") for c in row[1:]]
        if got != want:
            problems.append(f"{row[0]}: {got} (file: {want})")
    return problems


def test_the_digits_augmentation_table_is_the_benchmark_s():
    text = page("guide/reproducing.md")
    assert not digits_table_problems(text)
    assert len(digits_table_problems(mutate(text, "| 0.954 ± 0.012 | 0.807 |", "| 0.954 ± 0.012 | 0.817 |"))) == 1


def rotation_problems(text: str) -> list[str]:
    runs = load(RESULTS / "rotation" / "rotation.json")["runs"]
    order = ["augnet", "augerino", "augnet_none", "augnet_augerino_reg", "augerino_lam_augnet", "plain"]
    problems = []
    for key, row in zip(order, table(text, "| model | learned policy | rotation range |")):
        run = runs[key]
        if key != "plain":
            want = f"±{run['rotation_deg']:.1f}°"
            if not row[2].startswith("±180") and row[2] != want:
                problems.append(f"{key}: range {row[2]} (file: {want})")
        if row[3] != f3(run["test_accuracy"]):
            problems.append(f"{key}: accuracy {row[3]} (file: {f3(run['test_accuracy'])})")
        want = " / ".join(f3(v) for v in run["invariance_curve"]["median"])
        if row[4] != want:
            problems.append(f"{key}: invariance {row[4]} (file: {want})")
    return problems


def test_the_rotation_table_is_rotation_json_s():
    text = page("guide/reproducing.md")
    assert not rotation_problems(text)
    assert rotation_problems(mutate(text, "| ±16.8° | 1.000 |", "| ±16.9° | 1.000 |")) == [
        "augnet_none: range ±16.9° (file: ±16.8°)"
    ]


def capacity_problems(text: str) -> list[str]:
    numbers = load(RESULTS / "capacity" / "capacity.json")
    by = {(s["method"], f"{s['depth']}x{s['width']}"): s for s in numbers["summary"]}
    problems = []
    for row in table(text, "| trunk | no augmentation | oracle"):
        want = [
            f"{f2(by[(m, row[0])]['invariance']['median'])} / {f2(by[(m, row[0])]['accuracy'])}"
            for m in ("baseline", "oracle", "augnet", "augnet_fs")
        ]
        if row[1:] != want:
            problems.append(f"{row[0]}: {row[1:]} (file: {want})")
    runs = [r for r in numbers["runs"] if r["method"] == "augnet_fs"]
    idle = [r for r in runs if round(r["policy"][0][0]["magnitude"], 2) <= 0.01]
    trunks = sorted({f"{r['depth']}x{r['width']}" for r in idle}, key=lambda t: (int(t[0]), int(t[2:])))
    claim = f"in {len(idle)} of its {len(runs)} runs the magnitude ended at 0.00 to 0.01 (on the " + (
        ", ".join(trunks[:-1]) + f" and {trunks[-1]} trunks)"
    )
    if not says(text, claim):
        problems.append(f"missing: {claim!r}")
    return problems


def test_the_capacity_table_is_capacity_json_s():
    text = page("guide/reproducing.md")
    assert not capacity_problems(text)
    assert capacity_problems(mutate(text, "| 2x64 | 0.70 / 0.86 |", "| 2x64 | 0.71 / 0.86 |")) == [
        "2x64: ['0.71 / 0.86', '0.92 / 0.97', '0.96 / 0.99', '0.98 / 0.99'] "
        "(file: ['0.70 / 0.86', '0.92 / 0.97', '0.96 / 0.99', '0.98 / 0.99'])"
    ]
    assert len(capacity_problems(mutate(text, "in 8 of its 27 runs", "in 5 of its 27 runs"))) == 1


def inference_problems(text: str) -> list[str]:
    records = {r["copies"]: r for r in json.loads((BENCH / "inference_cpu.json").read_text())["records"]}
    problems = []
    for row in table(text, "| C | AugNet / (C x trunk) |"):
        r = records[int(row[0])]
        want = [f3(r["ratio"]), f3(r["trunk_rows_ratio"]), f"{r['overhead']:.4f}"]
        if row[1:4] != want:
            problems.append(f"C = {row[0]}: {row[1:4]} (file: {want})")
    return problems


def test_the_inference_table_is_inference_cpu_json_s():
    text = page("guide/training.md")
    assert not inference_problems(text)
    assert inference_problems(mutate(text, "| 10 | 1.386 |", "| 10 | 1.368 |")) == [
        "C = 10: ['1.368', '1.523', '0.0030'] (file: ['1.386', '1.523', '0.0030'])"
    ]


#: The instruction-count table's rows: the call each names in the callgrind files.
CALLGRIND_ROWS = ["forward", "backward", "backward_expanded", "backward_dx", "forward_color", "backward_color",
                  "forward_reflection", "backward_reflection"]


def callgrind_problems(text: str) -> list[str]:
    def per_call(name):
        records = json.loads((BENCH / f"{name}.json").read_text())["records"]
        return {r["call"]: r["per_pixel_tap_channel"] for r in records}

    now, before = per_call("callgrind_tap_mix"), per_call("callgrind_tap_mix_baseline")
    problems = []
    for call, row in zip(CALLGRIND_ROWS, table(text, "| call (float32) | before | now | fewer |"), strict=True):
        want = [f"{before[call]:.1f}", f"{now[call]:.1f}", f"{before[call] / now[call]:.1f}x"]
        if row[1:] != want:
            problems.append(f"{call}: {row[1:]} (file: {want})")
    return problems


def test_the_instruction_counts_are_the_callgrind_files():
    text = page("guide/performance.md")
    assert not callgrind_problems(text)
    assert callgrind_problems(mutate(text, "| 92.4 | 9.9 | 9.3x |", "| 92.4 | 9.9 | 9.4x |")) == [
        "forward_reflection: ['92.4', '9.9', '9.4x'] (file: ['92.4', '9.9', '9.3x'])"
    ]


def gpu_bench_problems(text: str) -> list[str]:
    cuda = json.loads((BENCH / "tap_mix_cuda.json").read_text())["records"]
    ms = {(r["size"], r["mode"], r["provider"]): r["median_ms"] for r in cuda}
    problems = []
    for row in table(text, "| size | mode | eager (kornia) |"):
        size = int(row[0].split()[0])
        want = [f"{ms[(size, row[1], p)]:.2f}" for p in ("eager", "reference", "cuda", "triton")]
        if row[2:] != want:
            problems.append(f"{row[0]} {row[1]}: {row[2:]} (file: {want})")
    return problems


def test_the_h200_table_is_tap_mix_cuda_json_s():
    text = page("guide/performance.md")
    assert not gpu_bench_problems(text)
    assert len(gpu_bench_problems(mutate(text, "| 9.35 | 3.61 |", "| 9.53 | 3.61 |"))) == 1


def on_paper_problems(text: str) -> list[str]:
    from augnet.bench.gpu_model import format_on_paper, on_paper

    printed = set(format_on_paper(on_paper("h100")).splitlines())
    rows = [line for line in text.splitlines() if line.startswith(("| 64 | 3x", "| 256 | 3x"))]
    assert len(rows) == 12
    if _triton_version().startswith(TABLE_TRITON):
        return [row for row in rows if row not in printed]
    # Another Triton compiles to other registers (the last two columns): the sizes, bytes and times must match.
    cut = {"|".join(line.split("|")[:10]) for line in printed}
    return [row for row in rows if "|".join(row.split("|")[:10]) not in cut]


#: The Triton whose compiled registers the performance guide's on-paper table shows (the one CI installs today).
TABLE_TRITON = "3.8."


def _triton_version() -> str:
    try:
        import triton
    except ImportError:  # the saved table of benchmarks/gpu_compile.py: compiled with the table's Triton
        return TABLE_TRITON
    return triton.__version__


def test_the_on_paper_table_is_what_augnet_bench_model_h100_prints():
    text = page("guide/performance.md")
    assert not on_paper_problems(text)
    assert on_paper_problems(mutate(text, "| 1.2 us | 1.2 us | 80 / 24 | 1024 / 1.3 |",
                                    "| 1.3 us | 1.2 us | 80 / 24 | 1024 / 1.3 |")) == [
        "| 64 | 3x32x32 | forward | 4.0 MB | 4.0 MB | 6.3 MB | holds | 1.3 us | 1.2 us | 80 / 24 | 1024 / 1.3 |"
    ]


def probe_cost_problems(design: str, guide: str) -> list[str]:
    cost = json.loads((BENCH / "probe_report.json").read_text())
    memory = cost["memory"]
    problems = []
    for row in table(design, "| probe | extra peak memory |"):
        name = re.match(r"`(\w+)`", row[0]).group(1)
        want = [f"{memory[name]['extra_peak_mb']:,.0f} MB", f"{memory[name]['seconds']:.0f} s"]
        if row[1:] != want:
            problems.append(f"{name}: {row[1:]} (file: {want})")
    cli = f"{cost['cli']['seconds']:.0f} s and\n{cost['cli']['extra_peak_mb']:,.0f} MB"
    if not says(design, cli):
        problems.append(f"design: {cli!r}")
    others = [m["extra_peak_mb"] for k, m in memory.items() if k != "report"]
    report = memory["report"]["extra_peak_mb"]
    claim = f"`report` {report:,.0f} MB, the others {min(others):.0f} to {max(others):.0f} MB"
    if not says(guide, claim):
        problems.append(f"guide: {claim!r}")
    return problems


def test_the_probes_time_and_memory_are_probe_report_json_s():
    design, guide = page("design/probes.md"), page("guide/probes.md")
    assert not probe_cost_problems(design, guide)
    assert probe_cost_problems(mutate(design, "| 721 MB | 103 s |", "| 712 MB | 103 s |"), guide) == [
        "ranking_probe_model: ['712 MB', '103 s'] (file: ['721 MB', '103 s'])"
    ]


def experiment_verdict_problems(text: str) -> list[str]:
    """The reproducing guide's sentences on the sinusoid and copies runs: their verdict files."""
    problems = []
    sinusoids = (RESULTS / "sinusoids" / "verdict.txt").read_text()
    mus = [float(m) for m in re.findall(r"layer 0: FrequencyShift \(w [\d.]+, mu ([\d.]+)\)", sinusoids)]
    claim = f"(weight 0.97, ±{2 * mus[0]:.2f} Hz with 1 layer, ±{2 * mus[1]:.2f} Hz with 2 and 4)"
    if mus[1] != mus[2] or not says(text, claim):
        problems.append(f"sinusoids: {claim!r}")
    copies = (RESULTS / "copies" / "verdict.txt").read_text()
    inv = re.findall(r"inv ([\d.]+) \[([\d.]+),", copies.split("AugNet (FrequencyShift alone)")[0])
    claim = "median invariance {} / {} / {}, the lower end of the central 75 % interval {} / {} / {}".format(
        *[m for m, _ in inv], *[lo for _, lo in inv]
    )
    if not says(text, claim):
        problems.append(f"copies: {claim!r}")
    return problems


def test_the_sinusoid_and_copies_sentences_are_their_verdicts():
    text = page("guide/reproducing.md")
    assert not experiment_verdict_problems(text)
    assert len(experiment_verdict_problems(mutate(text, "0.993 / 0.996 / 0.995", "0.993 / 0.996 / 0.996"))) == 1
