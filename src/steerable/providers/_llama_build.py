"""``setup``'s build of llama.cpp's ``llama-server`` from the pinned llama-cpp-python sdist.

Why this binary and not llama-cpp-python's own server: llama.cpp's server applies the model's
Jinja chat template and turns Qwen-style ``<tool_call>`` output into OpenAI tool calls under a
grammar made from the offered tools' schemas, so a small model cannot invent a tool or malformed
arguments; llama-cpp-python's server does neither. The llama.cpp sources come from the sdist of
the same pinned llama-cpp-python release (checked by sha256), fetched from the package index,
and only the server target is built (no tests, examples or Python bindings), with every core.

The build prints what it does, an estimate, a progress line at least every 30 s and the total.
"""

from __future__ import annotations

import hashlib
import os
import platform
import queue
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from steerable.errors import ConfigurationError

__all__ = [
    "LLAMA_CPP_VERSION",
    "SDIST_SHA256",
    "build_server",
    "built_server_path",
    "run_with_progress",
]

LLAMA_CPP_VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_SDIST = f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz"
_VENDOR = f"llama_cpp_python-{LLAMA_CPP_VERSION}/vendor/llama.cpp/"
PROGRESS_EVERY = 30.0

_CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
# On x86_64 a native build picks up AMX where the CPU advertises it, and on machines this was
# measured on that faults at the first decode: pin the instruction sets instead.
_X86_OPTIONS = ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
                "-DGGML_F16C=ON", "-DGGML_BMI2=ON")


def built_server_path() -> Path:
    """Where ``setup`` installs the binary (per llama-cpp-python version)."""
    import platformdirs

    return (platformdirs.user_data_path("steerable") / "llama.cpp"
            / f"llama-cpp-python-{LLAMA_CPP_VERSION}" / "llama-server")


def _tool(name: str) -> str | None:
    """A build tool, preferring the one pip installed next to this Python (the extra)."""
    local = Path(sys.executable).parent / name
    return str(local) if os.access(local, os.X_OK) else shutil.which(name)


def _say(text: str) -> None:
    print(text, flush=True)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def _index_url() -> str:
    return os.environ.get("PIP_INDEX_URL", "").rstrip("/") or "https://pypi.org/simple"


def fetch_sdist(folder: Path, index: str | None = None) -> Path:
    """Download the pinned sdist straight from the package index (PEP 691 JSON; the
    ``PIP_INDEX_URL`` and proxy variables apply). Not ``pip download``: for an sdist pip first
    builds its metadata, installing the build backend from source, which took 3.5-4.5 min of
    a fresh set-up for a 77 MB file that downloads in under a second."""
    import httpx

    index = (index or _index_url()).rstrip("/")
    _say(f"downloading the llama.cpp sources (llama-cpp-python {LLAMA_CPP_VERSION} sdist, "
         f"77 MB) from {index} ...")
    path = folder / _SDIST
    try:
        with httpx.Client(follow_redirects=True, timeout=60.0) as client:
            page = client.get(f"{index}/llama-cpp-python/",
                              headers={"Accept": "application/vnd.pypi.simple.v1+json"})
            page.raise_for_status()
            files = {f.get("filename"): f for f in page.json().get("files", [])}
            if _SDIST not in files:
                raise ConfigurationError(f"{index} does not list {_SDIST}")
            url = httpx.URL(f"{index}/llama-cpp-python/").join(files[_SDIST]["url"])
            with client.stream("GET", url) as response, path.open("wb") as out:
                response.raise_for_status()
                for block in response.iter_bytes(1 << 20):
                    out.write(block)
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise ConfigurationError(
            f"could not download {_SDIST} from {index}: {exc}; download it yourself and "
            f"pass --sdist FILE") from None
    return path


def verify_sdist(path: Path) -> None:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    if h.hexdigest() != SDIST_SHA256:
        raise ConfigurationError(f"{path.name} has sha256 {h.hexdigest()}, expected "
                                 f"{SDIST_SHA256}: refusing to build it")


def extract_llama_cpp(sdist: Path, dest: Path) -> Path:
    """Only ``vendor/llama.cpp`` of the sdist, with tar's safe ``data`` filter."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(_VENDOR)]
        if not members:
            raise ConfigurationError(f"{sdist.name} has no {_VENDOR}")
        tar.extractall(dest, members=members, filter="data")
    return dest / _VENDOR


def cmake_configure_args(source: Path, build: Path, generator: str | None) -> list[str]:
    cmake = _tool("cmake")
    if cmake is None:
        raise ConfigurationError("cmake is needed to build llama-server: "
                                 "pip install 'steerable[local]' brings it, or apt install cmake")
    args = [cmake, "-S", str(source), "-B", str(build), *_CMAKE_OPTIONS]
    if generator:
        args += ["-G", generator]
    if platform.machine().lower() in ("x86_64", "amd64"):
        args += list(_X86_OPTIONS)
    return args


_STEP = re.compile(r"^\[\s*(\d+)/(\d+)\]|^\[\s*(\d+)%\]")


def _progress(line: str) -> float | None:
    """The fraction done that a ninja (``[12/206]``) or make (``[ 5%]``) line shows."""
    m = _STEP.match(line)
    if m is None:
        return None
    if m.group(3) is not None:
        return int(m.group(3)) / 100
    return int(m.group(1)) / max(1, int(m.group(2)))


def _next_line(lines: queue.Queue[str | None]) -> str | None:
    """The next output line, "" after a second of silence, None at the end."""
    try:
        return lines.get(timeout=1.0)
    except queue.Empty:
        return ""


def run_with_progress(args: Sequence[str], what: str, log: Path,
                      every: float = PROGRESS_EVERY,
                      progress: Callable[[str], float | None] | None = None) -> None:
    """Run a long step, its output to ``log``, printing progress at least every ``every`` s.
    ``progress`` reads the fraction done from an output line (default: build tools' lines)."""
    progress = progress or _progress
    started = time.monotonic()
    lines: queue.Queue[str | None] = queue.Queue()
    with log.open("a") as out, subprocess.Popen(
            list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, text=True, errors="replace") as proc:
        assert proc.stdout is not None
        stdout = proc.stdout

        def pump() -> None:
            for text in stdout:
                lines.put(text)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        done, last_said = None, started
        while (line := _next_line(lines)) is not None:
            out.write(line)
            fraction = progress(line) if line else None
            done = fraction if fraction is not None else done
            if time.monotonic() - last_said >= every:
                share = f"{done:.0%} done, " if done is not None else ""
                _say(f"  {what}: {share}{_minutes(time.monotonic() - started)} elapsed")
                last_said = time.monotonic()
        code = proc.wait()
    if code:
        tail = "\n  ".join(log.read_text(errors="replace").strip().splitlines()[-15:])
        raise ConfigurationError(f"{what} failed (exit code {code}); the full log is {log}:\n"
                                 f"  {tail}")


def build_server(sdist: Path | None = None, jobs: int | None = None,
                 dest: Path | None = None) -> Path:
    """Fetch (or take), verify, extract and build; install ``llama-server`` at ``dest``."""
    dest = dest or built_server_path()
    jobs = jobs or os.cpu_count() or 2
    started = time.monotonic()
    _say(f"building llama.cpp's llama-server (only the server target, {jobs} parallel jobs); "
         f"this takes about {max(3, 10 // jobs)}-{max(8, 30 // jobs)} minutes on {jobs} cores "
         "(the low figure on an idle machine)")
    with tempfile.TemporaryDirectory(prefix="steerable-llama-build-") as tmp:
        work = Path(tmp)
        if sdist is None:
            sdist = fetch_sdist(work)
        verify_sdist(sdist)
        _say(f"  sources verified (sha256 {SDIST_SHA256[:16]}...), extracting llama.cpp ...")
        source = extract_llama_cpp(sdist, work)
        build = work / "build"
        log = dest.parent / "build.log"
        dest.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        generator = "Ninja" if _tool("ninja") else None
        run_with_progress(cmake_configure_args(source, build, generator), "configuring", log)
        run_with_progress([str(_tool("cmake")), "--build", str(build), "--target", "llama-server",
                           "--parallel", str(jobs)], "compiling", log)
        binary = build / "bin" / "llama-server"
        partial = dest.with_name(dest.name + ".partial")
        shutil.copy2(binary, partial)
        os.replace(partial, dest)
    log.unlink(missing_ok=True)
    _say(f"llama-server ready: {dest} (built in {_minutes(time.monotonic() - started)})")
    return dest
