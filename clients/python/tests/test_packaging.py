"""The package as it is published: `python -m build` makes a wheel and an
sdist, both carrying the repository's scripts/swl.lua byte for byte; the
sdist builds on its own, away from the repository; and `pip install
./clients/python` works in a clean virtualenv."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "clients" / "python"
LIBRARY = (ROOT / "scripts" / "swl.lua").read_bytes()
LICENSE = (ROOT / "LICENSE").read_bytes()
# The repository's one version, which the package takes (hatch_build.py).
VERSION = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)


def run(*args: str, cwd: Path = ROOT) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(PACKAGE))
    return out


def test_the_wheel_carries_the_library_and_its_types(built):
    (wheel,) = built.glob(f"redis_swl-{VERSION}-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("redis_swl/swl.lua") == LIBRARY
        assert "redis_swl/py.typed" in archive.namelist()
        assert archive.read(f"redis_swl-{VERSION}.dist-info/licenses/LICENSE") == LICENSE
        metadata = archive.read(f"redis_swl-{VERSION}.dist-info/METADATA").decode()
    assert "Requires-Dist: redis>=5" in metadata
    assert "Requires-Dist: limits<6,>=5.6; extra == 'limits'" in metadata
    assert "Requires-Python: >=3.9" in metadata


def test_the_sdist_builds_a_wheel_away_from_the_repository(built, tmp_path):
    (sdist,) = built.glob(f"redis_swl-{VERSION}.tar.gz")
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"redis_swl-{VERSION}/src/redis_swl/swl.lua")
        assert member is not None and member.read() == LIBRARY
        archive.extractall(tmp_path, filter="data")
    unpacked = tmp_path / f"redis_swl-{VERSION}"
    run(sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir",
        str(tmp_path / "out"), str(unpacked), cwd=tmp_path)
    (wheel,) = (tmp_path / "out").glob(f"redis_swl-{VERSION}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("redis_swl/swl.lua") == LIBRARY
        assert archive.read(f"redis_swl-{VERSION}.dist-info/licenses/LICENSE") == LICENSE


def test_pip_installs_the_package_into_a_clean_virtualenv(tmp_path):
    env = tmp_path / "env"
    run(sys.executable, "-m", "venv", str(env))
    run(str(env / "bin" / "pip"), "install", "--quiet", str(PACKAGE))
    check = ("import redis_swl, importlib.resources as r; "
             "print(r.files('redis_swl').joinpath('swl.lua').read_bytes() == open("
             f"{str(ROOT / 'scripts' / 'swl.lua')!r}, 'rb').read(), redis_swl.__version__)")
    done = subprocess.run([str(env / "bin" / "python"), "-c", check],
                          capture_output=True, text=True)
    assert done.stdout.strip() == f"True {VERSION}", done.stderr
