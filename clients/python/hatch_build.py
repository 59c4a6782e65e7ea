"""Puts the function library into the package as it is built: the
repository's scripts/swl.lua, copied at build time so that the package can
never ship a copy that drifted. A build from an sdist (outside the
repository) uses the copy the sdist carries."""

import re
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

LIBRARY = Path("src/redis_swl/swl.lua")


class CopyFunctionLibrary(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        root = Path(self.root).resolve()
        repository = root.parent.parent
        source = repository / "scripts" / "swl.lua"
        target = root / LIBRARY
        # In the repository (clients/python of it), not an unpacked sdist.
        if (repository / "clients" / "python").resolve() == root and source.is_file():
            target.write_bytes(source.read_bytes())
        elif not target.is_file():
            raise RuntimeError(f"no function library: neither {source} nor {target}")
        # Ignored by git (it is a copy), so named here: at the package's
        # place in a wheel, at its place in the tree in an sdist.
        inside = "redis_swl/swl.lua" if self.target_name == "wheel" else str(LIBRARY)
        build_data["force_include"][str(target)] = inside


class VersionAndLicense(MetadataHookInterface):
    """The repository's version (Cargo.toml's, the one place it is written)
    and its LICENSE, copied beside pyproject.toml, where hatchling looks for
    license files: before the build, which lists them first. An sdist
    carries both (PKG-INFO's version, its LICENSE), so this runs only in
    the repository."""

    PLUGIN_NAME = "custom"

    def update(self, metadata):
        root = Path(self.root).resolve()
        repository = root.parent.parent
        cargo = (repository / "Cargo.toml").read_text(encoding="utf-8")
        metadata["version"] = re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)
        (root / "LICENSE").write_bytes((repository / "LICENSE").read_bytes())
