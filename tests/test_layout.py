"""The package's layout: no module over 600 lines, no import circle, moved names still importable."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "augnet"
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Every augnet module's augnet imports, module-level and inside functions alike.

    ``from a.b import c`` counts as an import of ``a.b.c`` when that is a
    module, else of ``a.b``.
    """
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(resolve(a.name) for a in node.names if a.name.startswith("augnet"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if base.startswith("augnet"):
                    for a in node.names:
                        full = f"{base}.{a.name}"
                        edges.add(full if full in modules else resolve(base))
        edges.discard(None)
        edges.discard(name)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_cycle_finder_finds_a_circle_through_a_function_level_import():
    graph = {"augnet.a": {"augnet.b"}, "augnet.b": {"augnet.c"}, "augnet.c": {"augnet.a"}, "augnet.d": {"augnet.a"}}
    assert import_cycles(graph) == [["augnet.a", "augnet.b", "augnet.c"]]
    assert import_cycles({"augnet.a": {"augnet.b"}, "augnet.b": set()}) == []


def test_no_import_circle_in_augnet():
    graph = import_graph()
    assert "augnet.layers" in graph["augnet.export"] or "augnet.policy" in graph["augnet.export"]
    assert import_cycles(graph) == []


def test_policy_depends_on_neither_layers_nor_export():
    graph = import_graph()
    assert not graph["augnet.policy"] & {"augnet.layers", "augnet.export", "augnet.model"}
    exporters = [m for m in graph if m.startswith("augnet.export")]
    assert len(exporters) >= 3
    for module in exporters:
        assert "augnet.layers" not in graph[module], module


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_over_600_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines (at most {MAX_LINES})"


def test_moved_names_keep_their_old_paths():
    import augnet
    from augnet import layers, policy, training
    from augnet.training import callbacks, devices, loop

    assert layers.Policy is policy.Policy is augnet.Policy
    assert layers.transform_classes is policy.transform_classes
    assert training.fit is loop.fit and training.accuracy is loop.accuracy
    assert training.PolicyLogger is callbacks.PolicyLogger and training.Callback is callbacks.Callback
    assert training.resolve_device is devices.resolve_device and training.rank_generator is devices.rank_generator


@pytest.mark.parametrize("name", ["TemperatureAnnealing", "WeightWarmup"])
def test_old_selection_module_warns_and_gives_the_same_class(name):
    from augnet.training import callbacks

    with pytest.warns(DeprecationWarning, match=f"augnet.training.{name}"):
        from augnet import selection

        old = getattr(selection, name)
    assert old is getattr(callbacks, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'Nope'"):
            selection.Nope  # noqa: B018


def test_policy_exporters_are_registered_on_import():
    import augnet
    from augnet.transforms import image as T

    policy = augnet.AugmentationModule([augnet.AugmentationLayer([T.Rotate()], init_magnitude=0.2)]).policy()
    from augnet.export import KorniaPolicy

    assert isinstance(policy.to_kornia(), KorniaPolicy)
