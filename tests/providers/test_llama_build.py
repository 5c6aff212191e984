"""setup's llama-server build: sdist checks, extraction, progress output, install.

The real compile is measured by hand (README: set-up time); here cmake is a stand-in script
that behaves like it (progress lines, a binary in build/bin), so the orchestration is tested."""

from __future__ import annotations

import hashlib
import io
import stat
import sys
import tarfile
from pathlib import Path

import pytest

from steerable.errors import ConfigurationError
from steerable.providers import _llama_build as build
from steerable.providers._llama_build import (
    _progress,
    build_server,
    extract_llama_cpp,
    run_with_progress,
    verify_sdist,
)


def test_progress_is_read_from_ninja_and_make_lines():
    assert _progress("[12/200] Building CXX object x.o") == pytest.approx(0.06)
    assert _progress("[ 45%] Building CXX object x.o") == pytest.approx(0.45)
    assert _progress("-- Configuring done") is None


def test_a_long_step_prints_progress_at_least_every_period(tmp_path, capsys):
    script = ("import time\nfor i in range(1, 5):\n    print(f'[{i}/4] step', flush=True)\n"
              "    time.sleep(0.3)\n")
    run_with_progress([sys.executable, "-c", script], "compiling", tmp_path / "log", every=0.25)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "compiling" in ln]
    assert len(lines) >= 3
    assert "% done" in lines[-1] and "elapsed" in lines[-1]
    assert "[4/4] step" in (tmp_path / "log").read_text()


def test_a_failing_step_quotes_its_log(tmp_path):
    with pytest.raises(ConfigurationError, match=r"compiling failed \(exit code 2\)") as info:
        run_with_progress([sys.executable, "-c", "print('error: no compiler'); exit(2)"],
                          "compiling", tmp_path / "log")
    assert "error: no compiler" in str(info.value)


def _sdist(tmp_path: Path) -> Path:
    path = tmp_path / f"llama_cpp_python-{build.LLAMA_CPP_VERSION}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [("vendor/llama.cpp/CMakeLists.txt", b"project(x)\n"),
                           ("llama_cpp/__init__.py", b"")]:
            info = tarfile.TarInfo(f"llama_cpp_python-{build.LLAMA_CPP_VERSION}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_tampered_sdist_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="refusing to build it"):
        verify_sdist(_sdist(tmp_path))


def test_only_the_llama_cpp_tree_is_extracted(tmp_path):
    source = extract_llama_cpp(_sdist(tmp_path), tmp_path / "out")
    assert (source / "CMakeLists.txt").read_text() == "project(x)\n"
    assert not list((tmp_path / "out").rglob("__init__.py"))


def test_build_configures_builds_only_the_server_and_installs_it(tmp_path, monkeypatch, capsys):
    sdist = _sdist(tmp_path)
    monkeypatch.setattr(build, "SDIST_SHA256", hashlib.sha256(sdist.read_bytes()).hexdigest())
    calls = tmp_path / "calls"
    cmake = tmp_path / "cmake"
    cmake.write_text(
        f"#!/bin/sh\necho \"$@\" >> {calls}\n"
        "if [ \"$1\" = --build ]; then mkdir -p \"$2/bin\"; echo '[1/1] Linking llama-server'; "
        "printf '#!/bin/sh\\necho fake\\n' > \"$2/bin/llama-server\"; "
        "chmod +x \"$2/bin/llama-server\"; fi\n")
    cmake.chmod(cmake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(build, "_tool", lambda name: str(cmake) if name == "cmake" else None)
    dest = tmp_path / "install" / "llama-server"
    assert build_server(sdist, jobs=3, dest=dest) == dest
    assert dest.stat().st_mode & stat.S_IEXEC
    configure, compile_ = calls.read_text().splitlines()
    assert "-DLLAMA_BUILD_TESTS=OFF" in configure and "-DLLAMA_BUILD_EXAMPLES=OFF" in configure
    assert compile_.endswith("--target llama-server --parallel 3")
    out = capsys.readouterr().out
    assert "this takes about" in out and "llama-server ready" in out and "built in" in out
    assert not (dest.parent / "build.log").exists()


def _index_server(tmp_path: Path, listed: bool):
    """A loopback package index (PEP 691 JSON page + the file), like pypi.org/simple."""
    import http.server
    import json
    import threading

    data = _sdist(tmp_path).read_bytes()
    name = f"llama_cpp_python-{build.LLAMA_CPP_VERSION}.tar.gz"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/simple/llama-cpp-python/":
                files = [{"filename": name, "url": f"../../files/{name}"}] if listed else []
                body = json.dumps({"files": files}).encode()
            elif self.path == f"/files/{name}":
                body = data
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, data


def test_the_sdist_is_downloaded_from_the_index_without_pip(tmp_path, monkeypatch):
    server, data = _index_server(tmp_path, listed=True)
    try:
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_port}/simple/")
        (tmp_path / "dl").mkdir()
        path = build.fetch_sdist(tmp_path / "dl")
        assert path.read_bytes() == data
    finally:
        server.shutdown()
        server.server_close()


def test_an_index_without_the_sdist_names_the_offline_option(tmp_path):
    server, _ = _index_server(tmp_path, listed=False)
    try:
        with pytest.raises(ConfigurationError, match="--sdist FILE"):
            build.fetch_sdist(tmp_path, f"http://127.0.0.1:{server.server_port}/simple")
    finally:
        server.shutdown()
        server.server_close()
