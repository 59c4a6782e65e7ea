#!/usr/bin/env python3
"""Sets the version: Cargo.toml's, the one place it is decided, and the
files whose formats want it written out (the Rust client crate, the Node
package, their lock files and the examples', the function library's
swl_version, the release file names on the pages). The module and the
Python package take it from Cargo.toml as they are built. tests/version.rs
fails while any of these disagree.

    python3 scripts/set-version.py 0.4.0
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (file, package): the version line after the package's name line.
MANIFESTS = [
    ("Cargo.toml", "redis-swl"),
    ("Cargo.lock", "redis-swl"),
    ("clients/rust/Cargo.toml", "redis-swl-client"),
    ("clients/rust/Cargo.lock", "redis-swl-client"),
    ("examples/axum/Cargo.lock", "redis-swl-client"),
    ("rls/Cargo.toml", "swl-rls"),
    ("rls/Cargo.lock", "swl-rls"),
    ("rls/Cargo.lock", "redis-swl-client"),
    ("clients/node/package.json", "redis-swl"),
    ("clients/node/package-lock.json", "redis-swl"),
    ("examples/express/package-lock.json", "redis-swl"),
]
VERSION = r"\d+\.\d+\.\d+"


def pages():
    yield from ["README.md", "clients/python/README.md", "clients/node/README.md",
                "clients/rust/README.md"]
    yield from sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))


def rewrite(path, edit):
    file = ROOT / path
    old = file.read_text(encoding="utf-8")
    new = edit(old)
    if new != old:
        file.write_text(new, encoding="utf-8")
        print(f"set-version: {path}")


def main():
    if len(sys.argv) != 2 or not re.fullmatch(VERSION, sys.argv[1]):
        sys.exit("usage: scripts/set-version.py X.Y.Z")
    version = sys.argv[1]
    major_minor = version.rsplit(".", 1)[0]

    for path, package in MANIFESTS:
        name = re.escape(package)
        rewrite(path, lambda text: re.sub(
            rf'^(\s*(?:name = "{name}"|"name": "{name}",)\n\s*(?:version = "|"version": "))[^"]*',
            lambda m: m.group(1) + version, text, flags=re.M))
    # The library's module and the library built from it (scripts/build-library.sh
    # would write the same line).
    for library in ("lua/lib.lua", "scripts/swl.lua"):
        rewrite(library, lambda text: re.sub(
            r"^local VERSION = '[^']*'$", f"local VERSION = '{version}'", text, flags=re.M))
    for page in pages():
        rewrite(page, lambda text: re.sub(
            r'(redis-swl-client = \{ version = ")[^"]*', lambda m: m.group(1) + major_minor,
            re.sub(rf"(?<![\w-])((?:redis-swl|swl|redis_swl|redis-swl-client)-){VERSION}(?=[-.])",
                   lambda m: m.group(1) + version, text)))


if __name__ == "__main__":
    main()
