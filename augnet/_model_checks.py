"""Private helpers of the model and its layers: their state's tensors, the aggregate's checks, the trunk's layers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor, nn


def normal_tensor(t: Tensor) -> Tensor:
    """``t``, or a normal copy of it where it is an inference tensor (made under ``torch.inference_mode``).

    A buffer a module keeps must be a normal tensor: PyTorch refuses any later in-place update of an inference
    tensor outside inference mode, and ``load_state_dict`` copies into the buffers in place ("Inplace update to
    inference tensor outside InferenceMode is not allowed"). The values are the same.
    """
    if not t.is_inference():
        return t
    with torch.inference_mode(False):
        return t.clone()


def check_class_dimension(out: Tensor, how: str) -> None:
    """The ValueError of an output whose class dimension the softmax aggregates cannot use (one class or none).

    A log-softmax over a single class is 0 whatever the logit: a trunk with one output per row (a binary
    classifier's logit) aggregated that way would predict 0 for every input and send no gradient back.
    """
    if how == "mean":
        return
    if out.dim() < 2:
        raise ValueError(
            f"aggregate={how!r} needs a class dimension, but the trunk returned shape {tuple(out.shape)}; "
            "use aggregate='mean' for regression outputs"
        )
    if out.shape[1] == 1:
        raise ValueError(
            f"aggregate={how!r} needs at least 2 classes, but the trunk returned shape {tuple(out.shape)}, one "
            "output per row: a log-softmax over one class is 0 whatever the trunk gives (no prediction and no "
            "gradient); for a single logit (binary classification, BCEWithLogitsLoss) or a regression use "
            "aggregate='mean'"
        )


@contextlib.contextmanager
def augmentation_kept(model: nn.Module) -> Iterator[None]:
    """Around ``AugNet.load_state_dict``: a load that fails puts augnet's own state back as it was.

    PyTorch loads every module's keys and raises once at the end (a size mismatch anywhere, or ``strict`` keys
    missing or unexpected): a state whose trunk did not fit had already set the pass count and the augmentation's
    weights, magnitudes, calibration, effects, temperature and sizes. Those are put back (values and tensors: a
    buffer that loading made or replaced, ``assign=True``'s tensors too); the trunk's are left as PyTorch left them.
    """
    passes, kept = model.passes, []
    for m in model.augment.modules():
        own = [(table, name, t, None if t is None else t.detach().clone())
               for table in (m._parameters, m._buffers) for name, t in table.items()]  # fmt: skip
        extra = type(m).get_extra_state is not nn.Module.get_extra_state
        kept.append((m, own, m.get_extra_state() if extra else None, extra))
    try:
        yield
    except BaseException:
        with torch.no_grad():
            for m, own, state, extra in kept:
                for table, name, t, value in own:
                    table[name] = t
                    if t is not None:
                        t.copy_(value)
                if extra:
                    m.set_extra_state(state)
        model.passes = passes
        raise


def trunk_layer_paths(model: nn.Module, kind: type) -> list[str]:
    """The paths (``trunk.0``, ``trunk.block.aug``) of the ``kind`` modules (augmentation layers) inside ``model``'s
    trunk: layers an :class:`~augnet.AugNet` runs on the trunk's rows, outside its ``augment`` module."""
    return [f"trunk.{name}" if name else "trunk" for name, m in model.trunk.named_modules() if isinstance(m, kind)]


def outside_policy_message(paths: list[str]) -> str:
    """The warning of ``AugNet.policy()`` for a model whose trunk holds augmentation layers (at ``paths``)."""
    which = "the AugmentationLayer at " if len(paths) == 1 else "the AugmentationLayers at "
    first = paths[0].removeprefix("trunk").removeprefix(".")
    read = f"model.trunk.get_submodule({first!r}).policy()" if first else "model.trunk.policy()"
    return (
        f"AugNet.policy() lists the layers of model.augment only; {which}{', '.join(paths)} "
        f"{'is' if len(paths) == 1 else 'are'} not in it (a layer inside the trunk augments the trunk's rows where "
        "it sits: a policy file, AugmentationModule.from_policy and the exporters apply a policy's layers to the "
        f"input, in order). Read such a layer's policy with {read}"
    )


def final_softmax(trunk: nn.Module) -> str | None:
    """The path of an ``nn.Softmax`` that ends ``trunk`` (followed through the last child of nested
    ``nn.Sequential``s), or None. Other modules' order of calls is not known from their children: None.

    Its outputs are probabilities, which the softmax aggregates read as logits: ``log_softmax(softmax(z))`` is not
    ``log_softmax(z)``, the predictions are flattened towards uniform (``nn.LogSoftmax`` is harmless: the
    log-softmax of log-probabilities is themselves).
    """
    path, module = [], trunk
    while isinstance(module, nn.Sequential) and len(module) > 0:
        name = list(module._modules)[-1]
        path.append(name)
        module = module._modules[name]
    if isinstance(module, nn.Softmax):
        return ".".join(path) or "the trunk itself"
    return None
