#!/usr/bin/env python3
"""Checks the release files that `make dist` put in dist/, as a user meets
them (`make dist-test`):

- dist/ holds exactly the files of Cargo.toml's version, and
  `sha256sum -c SHA256SUMS` passes over all of them;
- every file carries the LICENSE: each module tarball and the packages
  byte for byte, the library in its head;
- each swl-rls tarball holds its binary, and the one for this machine runs;
- each module passes scripts/check-module.sh (ELF headers: architecture,
  glibc floor, needed libraries);
- the README's first session, replayed through redis-cli, prints what the
  README shows: on the x86_64 glibc module in Debian's redis-server, on the
  x86_64 musl module in a redis-server built against musl
  (scripts/musl-redis.sh), and through the function library file;
- docs/installing.md's release path, its commands run as written in a
  folder holding the release files (with a free port given to
  redis-server and redis-cli), ends in a server that answers its sessions;
  on glibc, and with the musl file on the musl server;
- the wheel, the npm tarball and the crate (unpacked, as a path
  dependency) install into new projects, each checking against a real
  server with the module.

Servers run on free loopback ports in temporary folders and are stopped
whatever happens. Prints each check; exits 1 at the first failure.
"""

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
VERSION = re.search(r'^version = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
LICENSE = (ROOT / "LICENSE").read_bytes()
LIBRARY = (ROOT / "scripts" / "swl.lua").read_text()
PLATFORMS = ["x86_64-gnu", "x86_64-musl", "aarch64-gnu", "aarch64-musl"]
MODULES = {p: f"redis-swl-{VERSION}-linux-{p}" for p in PLATFORMS}
SERVICES = {p: f"swl-rls-{VERSION}-linux-{p}" for p in PLATFORMS}
PROMPT = "127.0.0.1:6379> "
passed = 0


class Failed(Exception):
    pass


def ok(what):
    global passed
    passed += 1
    print(f"dist-test: ok {what}", flush=True)


def expect(condition, what, detail=""):
    if not condition:
        raise Failed(f"{what}{': ' + detail if detail else ''}")
    ok(what)


def run(args, cwd=None, env=None, input=None, what=None):
    """Runs a command; its output, or Failed with what it printed."""
    done = subprocess.run(args, cwd=cwd, env=env, input=input, capture_output=True, text=True)
    if done.returncode != 0:
        shown = " ".join(map(str, args)) if isinstance(args, list) else args
        raise Failed(f"{what or shown} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


# --- servers -------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_server(command, cwd=None):
    """redis-server (`command`, a list, as it is to be started) on a free
    loopback port, in `cwd` or a temporary folder, once it answers PING;
    stopped when the block ends. Yields its port and pid."""
    folder = Path(cwd) if cwd else Path(tempfile.mkdtemp(prefix="swl-dist-test-"))
    process = None
    try:
        for _ in range(5):
            port = free_port()
            log = folder / f"redis-{port}.log"
            # Its data folder is the one it starts in: a relative
            # --loadmodule path is read from there.
            process = subprocess.Popen(
                command + ["--port", str(port), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", str(folder), "--logfile", str(log)],
                cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 20
            while process.poll() is None and not answers(port) and time.monotonic() < deadline:
                time.sleep(0.02)
            if process.poll() is None and answers(port):
                break
            stop(process)
            text = (log.read_text() if log.exists() else "") + process.stderr.read().decode()
            process = None
            if "Address already in use" not in text:
                raise Failed(f"{' '.join(command)} did not start:\n{text}")
        else:
            raise Failed("no free port for redis-server")
        yield port, process.pid
    finally:
        if process is not None:
            stop(process)
        if not cwd:
            shutil.rmtree(folder, ignore_errors=True)


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cli(port, *args, input=None):
    return run(["redis-cli", "--no-raw", "-p", str(port), *args], input=input)


# --- sessions on the pages -----------------------------------------------

def sessions(text):
    """The redis-cli sessions in a page's code blocks: (commands, output)."""
    found, block, code = [], None, False
    for line in text.splitlines():
        if line.startswith("```"):
            code = not code
            if block and block[0]:
                found.append(block)
            block = ([], []) if code else None
            continue
        if block is None:
            continue
        if line.startswith(PROMPT):
            block[0].append(line[len(PROMPT):])
        elif block[0]:
            block[1].append(line)
    return found


def replay(port, session, what, translate=lambda command: command):
    commands, output = session
    printed = cli(port, input="".join(translate(c) + "\n" for c in commands)).splitlines()
    expect(printed == output, what, f"printed\n{printed}\nwhere the page shows\n{output}")


def first_session():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## A first session\n", 1)[1].split("\n## ", 1)[0]
    (session,) = sessions(section)
    return session


def through_library(command):
    name, key, *rest = command.split(" ")
    return " ".join(["FCALL", "swl_" + name.split(".", 1)[1].lower(), "1", key, *rest])


def release_path():
    """docs/installing.md's release section: its sh blocks' command lines
    and its sessions, in the page's order, as ("sh", line) and
    ("session", (commands, output))."""
    page = (ROOT / "docs" / "installing.md").read_text()
    section = page.split("\n## From the release files\n", 1)[1].split("\n## ", 1)[0]
    steps, block, language = [], [], None
    for line in section.splitlines():
        if line.startswith("```"):
            if language is None:
                language, block = line[3:].strip(), []
                continue
            if language == "sh":
                steps += [("sh", l) for l in block if l.strip() and not l.startswith("#")]
            elif any(l.startswith(PROMPT) for l in block):
                steps += [("session", s) for s in sessions("```\n" + "\n".join(block) + "\n```")]
            language = None
            continue
        if language is not None:
            block.append(line)
    return steps


def follow_release_path(platform, server_binary, what):
    """Runs the page's commands in a folder holding the release files, as
    a user who downloaded them there would: the glibc file's name swapped
    for `platform`'s, redis-server being `server_binary`, and the server
    and redis-cli given a free port (the page uses the default one)."""
    steps = release_path()
    lines = [line for kind, line in steps if kind == "sh"]
    expect(len([s for s in steps if s[0] == "session"]) >= 2 and
           any(line.startswith("redis-server ") for line in lines),
           "installing.md has a release path to follow", str(steps))
    work = Path(tempfile.mkdtemp(prefix="swl-dist-install-"))
    try:
        for file in DIST.iterdir():
            shutil.copy(file, work)
        server = None
        with ExitStack() as stack:
            for kind, step in steps:
                if kind == "session":
                    if server is None:
                        raise Failed("installing.md: a session before any server was started")
                    replay(server, step, f"{what}: the session `{step[0][0]}` prints what the page shows")
                    continue
                line = step.replace("x86_64-gnu", platform)
                if line.startswith("redis-server "):
                    # The line as a shell reads it, with the port and the
                    # rest that redis_server adds after it.
                    shell = "exec " + shlex.quote(server_binary) + line[len("redis-server"):] + ' "$@"'
                    server, _ = stack.enter_context(redis_server(["bash", "-c", shell, "redis-server"], cwd=work))
                    ok(f"{what}: `{line}` started a server")
                    continue
                if line.startswith("redis-cli "):
                    if server is None:
                        raise Failed(f"installing.md: `{line}` before any server was started")
                    line = f"redis-cli -p {server} " + line[len("redis-cli "):]
                out = run(["bash", "-euo", "pipefail", "-c", line], cwd=work, what=line).strip()
                ok(f"{what}: `{step.replace('x86_64-gnu', platform)}`" + (f" printed {out!r}" if out else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- the checks ------------------------------------------------------------

def files_and_checksums():
    expected = {f"{name}.tar.gz" for name in [*MODULES.values(), *SERVICES.values()]} | {
        f"swl-{VERSION}.lua", f"redis_swl-{VERSION}-py3-none-any.whl", f"redis_swl-{VERSION}.tar.gz",
        f"redis-swl-{VERSION}.tgz", f"redis-swl-client-{VERSION}.crate", "SHA256SUMS"}
    present = {p.name for p in DIST.iterdir()} if DIST.is_dir() else set()
    expect(present == expected, f"dist/ holds the {len(expected)} release files of {VERSION}",
           f"missing {sorted(expected - present)}, unexpected {sorted(present - expected)}")
    listed = {line.split(None, 1)[1].lstrip("*") for line in (DIST / "SHA256SUMS").read_text().splitlines()}
    expect(listed == expected - {"SHA256SUMS"}, "SHA256SUMS lists every other file")
    out = run(["sha256sum", "-c", "SHA256SUMS"], cwd=DIST)
    expect(out.count(": OK\n") == len(listed), "sha256sum -c SHA256SUMS passes", out)


def unpack(name, binary, what, unpacked):
    """Checks that the tarball `name` holds `binary`, LICENSE and README in
    name/ and carries the LICENSE, and unpacks it into `unpacked`."""
    with tarfile.open(DIST / f"{name}.tar.gz") as archive:
        members = sorted(m.name for m in archive.getmembers() if m.isfile())
        expect(members == [f"{name}/LICENSE", f"{name}/README", f"{name}/{binary}"],
               f"{name}.tar.gz holds {what}, LICENSE and README in {name}/", str(members))
        expect(archive.extractfile(f"{name}/LICENSE").read() == LICENSE,
               f"{name}.tar.gz carries the LICENSE")
        archive.extractall(unpacked, filter="data")


def module_tarballs(unpacked):
    for platform, name in MODULES.items():
        unpack(name, "libredis_swl.so", "the module", unpacked)
        so = unpacked / name / "libredis_swl.so"
        arch, libc = platform.split("-")
        print(run(["bash", str(ROOT / "scripts" / "check-module.sh"), str(so), arch, libc]).strip())
        ok(f"{name}: the module's headers pass check-module.sh")


def service_tarballs(unpacked):
    for platform, name in SERVICES.items():
        unpack(name, "swl-rls", "swl-rls", unpacked)
        if platform.startswith(os.uname().machine):
            # It runs here, and refuses a setting it does not take, by name.
            done = subprocess.run([str(unpacked / name / "swl-rls")], env={"CONFIG_TYPE": "GRPC_XDS_SOTW"},
                                  capture_output=True, text=True, timeout=30)
            expect(done.returncode == 2 and "CONFIG_TYPE=GRPC_XDS_SOTW is refused" in done.stderr,
                   f"{name}: swl-rls runs here", f"{done.returncode} {done.stderr}")


def library_file():
    text = (DIST / f"swl-{VERSION}.lua").read_text()
    lines = text.splitlines(keepends=True)
    expect(lines[0] == "#!lua name=swl\n", f"swl-{VERSION}.lua starts with #!lua name=swl")
    expect(f"redis-swl {VERSION}" in lines[1], f"swl-{VERSION}.lua names its version on line 2", lines[1])
    head = "".join(lines[2:4 + LICENSE.decode().count("\n")])
    expect(head == "--[[\n" + LICENSE.decode() + "]]\n", f"swl-{VERSION}.lua carries the LICENSE after it")
    expect(text.endswith(LIBRARY.split("\n", 1)[1]), f"swl-{VERSION}.lua is scripts/swl.lua below its head")


def packages_carry_license():
    with zipfile.ZipFile(DIST / f"redis_swl-{VERSION}-py3-none-any.whl") as wheel:
        expect(wheel.read(f"redis_swl-{VERSION}.dist-info/licenses/LICENSE") == LICENSE,
               "the wheel carries the LICENSE")
        expect(wheel.read("redis_swl/swl.lua").decode() == LIBRARY, "the wheel carries scripts/swl.lua")
    for file, member in [(f"redis_swl-{VERSION}.tar.gz", f"redis_swl-{VERSION}/LICENSE"),
                         (f"redis-swl-{VERSION}.tgz", "package/LICENSE"),
                         (f"redis-swl-client-{VERSION}.crate", f"redis-swl-client-{VERSION}/LICENSE")]:
        with tarfile.open(DIST / file) as archive:
            expect(archive.extractfile(member).read() == LICENSE, f"{file} carries the LICENSE")


def module_version():
    major, minor, patch = (int(part) for part in VERSION.split("."))
    return major * 10000 + minor * 100 + patch


def first_session_on(server_binary, so, what, musl=False):
    with redis_server([server_binary, "--loadmodule", str(so)]) as (port, pid):
        listed = cli(port, "MODULE", "LIST")
        shows = re.search(rf'"swl"\n\s*3\) "ver"\n\s*4\) \(integer\) {module_version()}\n', listed)
        expect(shows is not None, f"{what}: MODULE LIST shows swl {VERSION} as {module_version()}", listed)
        if musl:
            maps = Path(f"/proc/{pid}/maps").read_text()
            expect("ld-musl-" in maps or "-linux-musl/libc.so" in maps, f"{what}: the server runs on musl")
            expect("libc.so.6" not in maps, f"{what}: no glibc in the server's process")
        replay(port, first_session(), f"{what}: the README's first session prints what the README shows")


def library_session():
    with redis_server(["redis-server"]) as (port, _):
        loaded = cli(port, "-x", "FUNCTION", "LOAD", input=(DIST / f"swl-{VERSION}.lua").read_text())
        expect(loaded.strip() == '"swl"', f"FUNCTION LOAD of swl-{VERSION}.lua loads swl", loaded)
        version = cli(port, "FCALL_RO", "swl_version", "0").strip()
        expect(version == f'"{VERSION}"', f"FCALL_RO swl_version 0 replies {VERSION}", version)
        replay(port, first_session(), "the function library file: the README's first session, through FCALL,"
               " prints what the README shows", through_library)


def python_wheel(port, scratch):
    env = scratch / "venv"
    run([sys.executable, "-m", "venv", str(env)])
    run([str(env / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
         str(DIST / f"redis_swl-{VERSION}-py3-none-any.whl")])
    script = (f"import redis, redis_swl\n"
              f"v = redis_swl.SWL(redis.Redis(port={port})).check('rl:wheel', 60000, 2)\n"
              f"print(redis_swl.__version__, v.allowed, v.remaining)\n")
    out = run([str(env / "bin" / "python"), "-c", script], cwd=scratch).split()
    expect(out == [VERSION, "True", "1"], "the wheel installs into a new virtualenv and checks on the server",
           str(out))


def node_tarball(port, scratch):
    app = scratch / "node-app"
    app.mkdir()
    (app / "package.json").write_text('{"name": "app", "private": true}\n')
    run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
         str(DIST / f"redis-swl-{VERSION}.tgz"), "redis@5"], cwd=app)
    script = f"""
      const {{ createClient }} = require('redis');
      const {{ SWL }} = require('redis-swl');
      (async () => {{
        const client = await createClient({{ url: 'redis://127.0.0.1:{port}' }}).connect();
        const verdict = await new SWL({{ client }}).check('rl:npm', 60000, 2);
        console.log(require('redis-swl/package.json').version, verdict.allowed, verdict.remaining);
        client.destroy();
      }})().catch((e) => {{ console.error(e); process.exit(1); }});
    """
    out = run(["node", "-e", script], cwd=app).split()
    expect(out == [VERSION, "true", "1"], "the npm tarball installs into a new app and checks on the server",
           str(out))


def rust_crate(port, scratch):
    with tarfile.open(DIST / f"redis-swl-client-{VERSION}.crate") as archive:
        archive.extractall(scratch, filter="data")
    crate = scratch / f"redis-swl-client-{VERSION}"
    manifest = (crate / "Cargo.toml").read_text()
    redis = re.search(r'^\[dependencies\.redis\]\nversion = "([^"]+)"', manifest, re.M).group(1)
    app = scratch / "crate-app"
    (app / "src").mkdir(parents=True)
    (app / "Cargo.toml").write_text(f"""[package]
name = "crate-app"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
redis-swl-client = {{ path = "{crate}" }}
redis = {{ version = "{redis}", default-features = false, features = ["tokio-comp", "connection-manager"] }}
tokio = {{ version = "1", features = ["macros", "rt"] }}
""")
    (app / "src" / "main.rs").write_text(f"""
#[tokio::main(flavor = "current_thread")]
async fn main() {{
    let client = redis::Client::open("redis://127.0.0.1:{port}/").expect("a URL");
    let swl = redis_swl_client::Swl::new(client.get_connection_manager().await.expect("a connection"));
    let verdict = swl
        .check("rl:crate", 60_000, 2, &redis_swl_client::Options::new())
        .await
        .unwrap_or_else(|e| panic!("check: {{e}}"));
    println!("{{}} {{}}", verdict.allowed, verdict.remaining);
}}
""")
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "target" / "dist-test" / "crate-app"))
    out = run(["cargo", "run", "--quiet", "--manifest-path", str(app / "Cargo.toml")], env=env).split()
    expect(out == ["true", "1"], "the crate builds as a path dependency of a new project and checks on the server",
           str(out))


def main():
    print(f"dist-test: checking dist/ for {VERSION}", flush=True)
    files_and_checksums()
    scratch = Path(tempfile.mkdtemp(prefix="swl-dist-test-"))
    try:
        unpacked = scratch / "modules"
        module_tarballs(unpacked)
        service_tarballs(unpacked)
        library_file()
        packages_carry_license()

        gnu = unpacked / MODULES["x86_64-gnu"] / "libredis_swl.so"
        musl = unpacked / MODULES["x86_64-musl"] / "libredis_swl.so"
        first_session_on("redis-server", gnu, "x86_64 glibc module in Debian's redis-server")
        musl_server = run(["bash", str(ROOT / "scripts" / "musl-redis.sh")]).strip().splitlines()[-1]
        print(f"dist-test: musl redis-server: {run(['file', '-b', musl_server]).strip()}")
        first_session_on(musl_server, musl, "x86_64 musl module in a musl redis-server", musl=True)
        library_session()
        follow_release_path("x86_64-gnu", "redis-server", "installing.md on glibc")
        follow_release_path("x86_64-musl", musl_server, "installing.md on musl")

        with redis_server(["redis-server", "--loadmodule", str(gnu)]) as (port, _):
            python_wheel(port, scratch)
            node_tarball(port, scratch)
            rust_crate(port, scratch)
    except Failed as failure:
        print(f"dist-test: FAILED {failure}", file=sys.stderr, flush=True)
        print(f"dist-test: {passed} passed, 1 failed")
        return 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"dist-test: {passed} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
