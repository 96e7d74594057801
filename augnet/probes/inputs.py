"""What ``augnet probe`` reads: a model named by its import path, a weights file, images from a file or a folder.

Every function raises a ValueError (or a TypeError) with a one-line message that names what is
wrong, so the command line can print it and exit before any probing.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import torch
from torch import Tensor, nn

from augnet._labels import class_labels
from augnet.probes._common import torch_seed

__all__ = ["IMAGE_SUFFIXES", "fake_images", "load_images", "load_model"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def _resolve_object(spec: str):
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--model must be 'package.module:name' (e.g. torchvision.models:resnet18), got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"cannot import {module_name!r} for --model {spec}: {err}") from err
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name!r} has no {attr!r} (--model {spec})")
        obj = getattr(obj, part)
    return obj


def load_model(spec: str, kwargs: str | dict | None = None, weights: str | Path | None = None) -> nn.Module:
    """The model ``spec`` names, built with ``kwargs`` and given the weights of a file.

    Args:
        spec: ``"package.module:name"``, where ``name`` is a module instance, a class or a function
            returning one (``"torchvision.models:resnet18"``: built with ``weights=None``, nothing is
            downloaded, unless ``kwargs`` asks for weights).
        kwargs: the keyword arguments of the call, a dict or its JSON text (default none).
        weights: a file of the model's ``state_dict`` (or of a dict holding it under ``"state_dict"``
            or ``"model"``), read with ``torch.load(weights_only=True)`` (no code in it runs).

    Returns:
        The model, in evaluation mode, on the CPU.

    Raises:
        ValueError: one line naming the model and the arguments, for a bad ``spec``, arguments that are not a
            JSON object, a constructor that fails on them (whatever it raises), weights that cannot be read or
            do not fit (``augnet probe`` prints it and exits with status 2).
    """
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs)
        except json.JSONDecodeError as err:
            raise ValueError(f"--model-args must be a JSON object, got {kwargs!r} ({err.msg})") from err
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, dict):
        raise ValueError(f"--model-args must be a JSON object, got {kwargs!r}")
    obj = _resolve_object(spec)
    if isinstance(obj, nn.Module):
        if kwargs:
            raise ValueError(f"{spec} is a module instance: it takes no --model-args")
        model = obj
    elif callable(obj):
        try:
            model = obj(**kwargs)
        except Exception as err:  # the constructor's own errors (a negative size: RuntimeError): one line
            raise ValueError(f"cannot build {spec} with {kwargs}: {_first_line(err)}") from err
    else:
        raise ValueError(f"{spec} is a {type(obj).__name__}, not a module or something that builds one")
    if not isinstance(model, nn.Module):
        raise ValueError(f"{spec}({kwargs or ''}) returned a {type(model).__name__}, not a torch.nn.Module")
    if weights is not None:
        path = Path(weights)
        state = _load_tensors(path, "--weights")
        if isinstance(state, dict) and not any(isinstance(v, Tensor) for v in state.values()):
            for key in ("state_dict", "model"):
                if isinstance(state.get(key), dict):
                    state = state[key]
                    break
        if not isinstance(state, dict):
            raise ValueError(f"--weights {path} holds a {type(state).__name__}, not a state_dict")
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            detail = " ".join(str(err).split())[:300]
            own = model.state_dict()
            if any(k.startswith("trunk.") for k in state) and not any(k.startswith("trunk.") for k in own):
                detail = ("its keys start with 'trunk.', an AugNet's state_dict: save model.trunk.state_dict() to "
                          "probe the trunk, or name a function that builds the whole AugNet; " + detail)  # fmt: skip
            raise ValueError(f"--weights {path} do not fit {spec}: {detail}") from err
    return model.eval()


def _first_line(err: BaseException) -> str:
    """An error's message as one line (its type when the message is empty, as an EOFError's is)."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _load_tensors(path: Path, what: str):
    """``torch.load(path, weights_only=True)`` on the CPU, or a one-line ValueError naming ``what``."""
    if not path.is_file():
        raise ValueError(f"{what} {path} is not a file")
    if path.stat().st_size == 0:
        raise ValueError(f"{what} {path} is an empty file")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # unpickling errors of every kind: one line
        raise ValueError(f"cannot read {what} {path} with weights_only=True: {_first_line(err)}") from err


#: The first bytes of a NumPy ``.npy`` file (``numpy.save``), whatever the file is named.
NPY_MAGIC = b"\x93NUMPY"


def _is_npy(path: Path) -> bool:
    """Whether ``path`` is a NumPy ``.npy`` file (by its first bytes: a file torch cannot read)."""
    try:
        with path.open("rb") as f:
            return f.read(len(NPY_MAGIC)) == NPY_MAGIC
    except OSError:  # read by torch.load, which says why
        return False


def _npy_header(path: Path):
    """The (shape, dtype) a ``.npy`` file's header names, or ``None`` where it cannot be read."""
    from numpy.lib import format as npy

    try:
        with path.open("rb") as f:
            version = npy.read_magic(f)
            read = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}.get(version)
            if read is None:
                return None
            shape, _, dtype = read(f)
            return shape, dtype
    except Exception:  # a header cut short or malformed: np.load's own message is given instead
        return None


def _load_npy(path: Path, what: str):
    """The array of a ``.npy`` file, read with ``np.load(allow_pickle=False)`` (no code in it runs) and in the
    machine's byte order; or a one-line ValueError naming ``what`` and the file."""
    import numpy as np

    if path.stat().st_size == 0:
        raise ValueError(f"{what} {path} is an empty file")
    try:
        array = np.load(path, allow_pickle=False)
    except Exception as err:  # numpy's errors of every kind (a file cut short, Python objects): one line
        header = _npy_header(path)
        if header is not None and header[1].hasobject:
            raise ValueError(
                f"{what} {path} is a NumPy .npy file of a {tuple(header[0])} array of Python objects (dtype "
                f"{header[1]}), which is not read (allow_pickle=False: no code in it runs); save numbers: "
                f"np.save(path, np.asarray(y, dtype=np.int64))"
            ) from None
        raise ValueError(f"{what} {path}: cannot read the NumPy .npy file: {_first_line(err)}") from None
    if not isinstance(array, np.ndarray):  # pragma: no cover - np.load of a .npy file returns an array
        raise ValueError(f"{what} {path} holds a {type(array).__name__}, not a NumPy array")
    if not array.dtype.isnative:  # torch reads arrays in the machine's byte order only
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def _is_npz(path: Path) -> bool:
    """Whether ``path`` is a NumPy ``.npz`` archive (``numpy.savez``): a zip of ``.npy`` members only (torch's
    own zip files hold ``data.pkl``), whatever the file is named."""
    import zipfile

    try:
        if not zipfile.is_zipfile(path):
            return False
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):  # read by torch.load, which says why
        return False
    return bool(names) and all(n.endswith(".npy") for n in names)


def _load_npz(path: Path, what: str) -> dict:
    """The arrays of a ``.npz`` archive by name, read with ``allow_pickle=False`` and in the machine's byte
    order; or a one-line ValueError naming ``what`` and the file (an array of Python objects among them)."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as err:  # a member cut short, Python objects (allow_pickle=False): one line
        raise ValueError(f"{what} {path}: cannot read the NumPy .npz file: {_first_line(err)}") from None
    return {k: a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("=")) for k, a in arrays.items()}


def _npz_entry(path: Path, what: str, keys: tuple[str, str], single: bool):
    """The array named ``keys[0]`` or ``keys[1]`` of a ``.npz`` archive, or (``single``) its only array; the
    ValueError naming the archive's arrays otherwise."""
    arrays = _load_npz(path, what)
    for key in keys:
        if key in arrays:
            return arrays[key]
    if single and len(arrays) == 1:
        return next(iter(arrays.values()))
    names = ", ".join(repr(k) for k in list(arrays)[:10])
    raise ValueError(f"{what} {path} is a NumPy .npz file without a {keys[0]!r} or {keys[1]!r} array (its arrays: "
                     f"{names}): np.savez(path, {keys[0]}=...)")  # fmt: skip


def _npy_images(path: Path) -> Tensor:
    """The images of a ``.npy`` file or of a ``.npz`` archive (its ``"x"`` or ``"images"`` array, or its only
    one), (N, C, H, W) or (N, H, W) of floats or uint8, as a tensor."""
    import numpy as np

    npz = _is_npz(path)
    array = _npz_entry(path, "--data", ("x", "images"), single=True) if npz else _load_npy(path, "--data")
    if not (array.dtype == np.uint8 or (array.dtype.kind == "f" and array.dtype.itemsize <= 8)):
        raise ValueError(f"--data {path}: images must be floating point or uint8, got a NumPy array of {array.dtype}")
    shape = array.shape
    if len(shape) == 4 and shape[-1] in (1, 3, 4) and shape[1] not in (1, 3, 4):
        raise ValueError(
            f"--data {path}: images must be (N, C, H, W), got shape {shape}, channels last: "
            f"np.save(path, np.ascontiguousarray(x.transpose(0, 3, 1, 2))) writes them channels first"
        )
    return torch.from_numpy(array)


def image_files(folder: Path) -> list[Path]:
    """The image files of ``folder`` and its subfolders, in the sorted order they are read in."""
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)


def spread(total: int, limit: int | None) -> list[int] | None:
    """The rows ``--n`` keeps: ``limit`` of ``total`` spread evenly, in order (the i-th is row
    ``floor(i * total / limit)``), so data stored class by class keep every class; ``None``: all of them."""
    if not limit or limit >= total:
        return None
    return [i * total // limit for i in range(limit)]


def _kept(rows, limit: int | None):
    """``rows`` (a list or a tensor) at :func:`spread`'s positions."""
    keep = spread(len(rows), limit)
    if keep is None:
        return rows
    return rows[torch.tensor(keep)] if isinstance(rows, Tensor) else [rows[i] for i in keep]


def _read_image(path: Path, size: int | None) -> Tensor:
    """One image file as (3, H, W) uint8 RGB, or a one-line ValueError naming the file."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if size is not None:
                im = im.resize((size, size), Image.BILINEAR)
            data = torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8)
            return data.reshape(im.height, im.width, 3).permute(2, 0, 1)
    except (OSError, ValueError, SyntaxError) as err:  # Pillow's errors for a corrupt, empty or truncated file
        raise ValueError(f"--data: cannot read the image {path}: {_first_line(err)}") from None


def _as_images(x, source: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise ValueError(f"{source} holds a {type(x).__name__}, not an image tensor")
    if x.dim() == 3:
        x = x[:, None]
    if x.dim() != 4:
        raise ValueError(f"{source}: images must be (N, C, H, W), got shape {tuple(x.shape)}")
    if x.dtype == torch.uint8:
        x = x.float() / 255.0
    if not x.is_floating_point():
        raise ValueError(f"{source}: images must be floating point or uint8, got {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{source}: the images hold NaN or infinite values")
    return x.float()


def load_images(path: str | Path, size: int | None = None, limit: int | None = None) -> Tensor:
    """Images from a tensor file or a folder of image files, as (N, C, H, W) float32 in [0, 1] for uint8 data.

    Args:
        path: a file saved with ``torch.save`` (a (N, C, H, W) or (N, H, W) tensor, a dict with an
            ``"x"`` or ``"images"`` tensor, or a tuple ``(x, y)``), read with ``weights_only=True``; a NumPy
            ``.npy`` file (``numpy.save``) of a (N, C, H, W) or (N, H, W) array of floats or uint8, read with
            ``allow_pickle=False`` (channels-last (N, H, W, C) arrays are refused, naming the transpose); a
            NumPy ``.npz`` archive (``numpy.savez``) of such an array, named ``"x"`` or ``"images"`` or alone;
            or a folder, whose image files (also in subfolders, e.g. one per class) are read in
            sorted order with Pillow and converted to RGB.
        size: resize every image to ``size x size`` (a folder's images must share a size otherwise).
        limit: read at most this many images, spread evenly over the data in their order (:func:`spread`:
            the i-th of ``limit`` is image ``floor(i * N / limit)``), so a folder of one subfolder per class,
            or a tensor stored class by class, keeps every class.
    """
    path = Path(path)
    if path.is_dir():
        files = image_files(path)
        if not files:
            raise ValueError(f"--data {path} holds no image file ({', '.join(IMAGE_SUFFIXES)})")
        files = _kept(files, limit)
        try:
            import PIL  # noqa: F401
        except ImportError as err:  # pragma: no cover - Pillow comes with torchvision and matplotlib
            raise ValueError("reading an image folder needs Pillow: pip install pillow") from err
        images = [_read_image(f, size) for f in files]
        shapes = {tuple(im.shape) for im in images}
        if len(shapes) > 1:
            raise ValueError(f"--data {path}: the images have different sizes {sorted(shapes)[:3]}; pass --size")
        return _as_images(torch.stack(images), f"--data {path}")
    if not path.is_file():
        raise ValueError(f"--data {path} is neither a file nor a folder")
    data = _npy_images(path) if _is_npy(path) or _is_npz(path) else _load_tensors(path, "--data")
    if isinstance(data, dict):
        if "x" not in data and "images" not in data:
            keys = ", ".join(repr(k) for k in list(data)[:10])
            raise ValueError(f"--data {path} holds a dict without an 'x' or 'images' entry (its keys: {keys})")
        data = data.get("x", data.get("images"))
    elif isinstance(data, (tuple, list)) and data:
        data = data[0]
    x = _as_images(data, f"--data {path}")
    if size is not None and tuple(x.shape[-2:]) != (size, size):
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return _kept(x, limit)


def fake_images(n: int, size: int, channels: int = 3, seed: int = 0) -> Tensor:
    """``n`` random images, uniform in [0, 1], (n, channels, size, size), seeded.

    ``seed`` is an int that ``torch.manual_seed`` takes (a NumPy one too: it failed with "an integer is
    required"); anything else is the TypeError / ValueError naming it.
    """
    generator = torch.Generator().manual_seed(torch_seed(seed))
    return torch.rand(n, channels, size, size, generator=generator)


def load_labels(path: str | Path, data: str | Path | None = None, limit: int | None = None) -> Tensor:
    """Class labels, (N,) int64, for ``report(..., by_class=...)`` and ``augnet probe --by-class``.

    Args:
        path: ``"data"``, the labels of ``data``: the ``"y"`` (or ``"labels"``) tensor of a tensor file,
            the second item of an ``(x, y)`` tuple, or for a folder, the index of each image's subfolder
            (in sorted order, the order :func:`load_images` reads the images in); or a file: a text
            file (``.txt``, ``.csv``) of one integer per line, a NumPy ``.npy`` file (``numpy.save``, read with
            ``allow_pickle=False``), a NumPy ``.npz`` archive (its ``"y"`` or ``"labels"`` array, or its only
            one; for ``"data"``, the ``"y"`` or ``"labels"`` array of a ``.npz`` ``--data``), or a tensor file
            holding (N,) or (N, 1) labels of any integer dtype or whole
            floats (a tensor file's alone, or as ``"y"`` / ``"labels"`` of a dict, or the second item of a tuple).
        data: the ``--data`` path, for ``"data"``.
        limit: keep ``limit`` labels spread evenly, as ``--n`` keeps the images (:func:`spread`).

    Raises:
        ValueError, TypeError: no labels there, or labels that are not one integer >= 0 per image (read as
            ``report`` reads ``by_class``: fractions, NaN, negative, bool or one-hot labels are refused; so are a
            ``.npy`` file of Python objects or strings, and ``"data"`` of a ``.npy`` ``--data``, which holds no labels).
    """
    if str(path) == "data":
        if data is None:
            raise ValueError("--by-class data needs --data (its labels)")
        source = Path(data)
        if source.is_dir():
            files = image_files(source)
            folders = sorted({f.parent for f in files})
            index = {folder: i for i, folder in enumerate(folders)}
            labels = torch.tensor([index[f.parent] for f in files], dtype=torch.long)
            return _kept(labels, limit)
        if _is_npy(source):
            raise ValueError(
                f"--by-class data: --data {source} is a NumPy .npy file, one array (the images) without labels; "
                f"give them in a file: --by-class labels.npy"
            )
        if _is_npz(source):  # its "y" or "labels" array
            array = _npz_entry(source, "--by-class data: --data", ("y", "labels"), single=False)
            return _kept(class_labels(array, None, f"--data {source}"), limit)  # as report reads by_class
    else:
        source = Path(path)
        if not source.is_file():
            raise ValueError(f"--by-class {path} is not a file (or 'data')")
        if source.suffix.lower() in (".txt", ".csv"):
            try:
                values = [int(line.strip().split(",")[0]) for line in source.read_text().splitlines() if line.strip()]
            except ValueError as err:
                raise ValueError(f"--by-class {path}: one integer label per line, got {_first_line(err)}") from err
            return _kept(class_labels(values, None, f"--by-class {path}"), limit)  # as report reads by_class
        if _is_npy(source) or _is_npz(source):  # a .npz archive: its "y" or "labels" array, or its only one
            array = (_load_npy(source, "--by-class") if _is_npy(source)
                     else _npz_entry(source, "--by-class", ("y", "labels"), single=True))  # fmt: skip
            return _kept(class_labels(array, None, f"--by-class {source}"), limit)  # as report reads by_class
    what = "--data" if str(path) == "data" else "--by-class"
    found = _load_tensors(source, what)
    if isinstance(found, dict):
        found = found.get("y", found.get("labels"))
    elif isinstance(found, (tuple, list)):
        found = found[1] if len(found) > 1 else None
    elif str(path) == "data":
        found = None
    if not isinstance(found, Tensor):
        raise ValueError(f"{what} {source} holds no (N,) integer labels (a tensor, 'y' or 'labels', or (x, y))")
    return _kept(class_labels(found, None, f"{what} {source}"), limit)  # as report reads by_class
