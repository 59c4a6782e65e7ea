"""Puts the function library into the package as it is built: the
repository's scripts/swl.lua, copied at build time so that the package can
never ship a copy that drifted. A build from an sdist (outside the
repository) uses the copy the sdist carries."""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

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
