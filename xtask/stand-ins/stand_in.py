#!/usr/bin/env python3
"""Local stand-ins for the remote actions our workflows pin, for `cargo xtask workflow`.

GitHub's services (its cache, its artifact store, the release downloads of install-action)
are out of reach here, so each pinned action is replaced by a composite action of this
folder that runs one command of this script. Each does what the workflow relies on, as the
action's documentation and source say it, against a local store
(IPC_MATRIX_ACT_STORE) instead of GitHub's:

  cache-restore, cache-save  actions/cache/{restore,save}: an entry per (version, key),
                             the version being the hash of the path list; restore takes
                             the key exactly, else each of key and restore-keys as a
                             prefix, the most recent entry first; cache-hit is "true" only
                             for the exact key (unset on a miss); an entry is immutable.
  install                    taiki-e/install-action: installs nothing (no network to the
                             release host); checks each tool is there at the asked version.
  upload                     actions/upload-artifact: @actions/glob's patterns, the artifact
                             rooted at the least common ancestor of the search paths (a
                             single file at its folder), hidden files left out unless asked,
                             if-no-files-found, a name used twice refused unless overwrite.
  download                   actions/download-artifact: by name into path; by pattern (or
                             all) each artifact into path/<name>/, unless merge-multiple or
                             exactly one matched.

Artifacts are kept per workflow run (IPC_MATRIX_ACT_RUN), as GitHub keeps them; caches
per store, as GitHub keeps them per repository. Inputs come as STAND_IN_<NAME> variables
(the composite action maps each input); outputs go to $GITHUB_OUTPUT.
"""

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def fail(message):
    print(f"::error::{message}", flush=True)
    sys.exit(1)


def warning(message):
    print(f"::warning::{message}", flush=True)


def info(message):
    print(message, flush=True)


def given(name, default=""):
    """The action input `name`, as the composite action passes it."""
    return os.environ.get("STAND_IN_" + name.upper().replace("-", "_"), default)


def flag(name, default="false"):
    value = given(name, default).strip().lower() or default
    if value not in ("true", "false"):
        fail(f"input `{name}` must be true or false, not `{value}`")
    return value == "true"


def set_output(name, value):
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{name}={value}\n")
    info(f"output {name}={value}")


def store(*parts):
    root = os.environ.get("IPC_MATRIX_ACT_STORE")
    if not root:
        fail("IPC_MATRIX_ACT_STORE is not set: the local stand-ins run under `cargo xtask workflow`")
    return os.path.join(root, *parts)


def workspace():
    return os.environ.get("GITHUB_WORKSPACE") or os.getcwd()


def input_lines(name):
    return [line.strip() for line in given(name).splitlines() if line.strip()]


def expand(pattern):
    """A path or pattern as the actions read it: `~` is the home folder, a relative one
    lies in the workspace."""
    if pattern == "~" or pattern.startswith("~/"):
        pattern = os.path.expanduser("~") + pattern[1:]
    if not os.path.isabs(pattern):
        pattern = os.path.join(workspace(), pattern)
    trailing = pattern.endswith("/")
    pattern = os.path.normpath(pattern)
    return pattern + ("/" if trailing and pattern != "/" else "")


# --- @actions/glob, as upload-artifact and cache use it -------------------------------

GLOB_CHARS = re.compile(r"[*?\[]")


def search_path(pattern):
    """The literal part of a pattern: its segments up to the first with a glob character."""
    segments = pattern.rstrip("/").split("/")
    literal = []
    for segment in segments:
        if GLOB_CHARS.search(segment):
            break
        literal.append(segment)
    return "/".join(literal) or "/"


def segment_regex(segment):
    out = ""
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = segment.find("]", i + 1)
            if end == -1:
                out += re.escape(c)
            else:
                body = segment[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out += "[" + body.replace("\\", "\\\\") + "]"
                i = end
        else:
            out += re.escape(c)
        i += 1
    return out


def pattern_regex(pattern):
    parts = pattern.rstrip("/").split("/")
    out = ""
    for index, segment in enumerate(parts):
        if segment == "**":
            out += "(?:/[^/]+)*" if index else "(?:[^/]+/?)*"
        elif index == 0 and segment == "":
            continue
        else:
            out += "/" + segment_regex(segment)
    return re.compile("^" + out + "$")


def root_search_paths(patterns):
    """@actions/glob's getSearchPaths: each include pattern's search path, without one that
    lies inside another (the first of equal ones kept)."""
    paths = []
    for negated, pattern in patterns:
        if negated:
            continue
        path = search_path(pattern)
        if path not in paths:
            paths.append(path)
    roots = []
    for path in sorted(paths, key=len):
        if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            roots.append(path)
    # In the order the patterns gave them: the LCA and the single-path root read the first.
    return [p for p in paths if p in roots]


def parse_patterns(lines):
    patterns = []
    for line in lines:
        if line.startswith("#"):
            continue
        negated = False
        while line.startswith("!"):
            negated = not negated
            line = line[1:]
        patterns.append((negated, expand(line)))
    return patterns


def matched(path, compiled):
    """Whether `path` is included: the last pattern (negated, regex) that matches it or
    one of its folders decides (a matched folder brings its descendants, as
    implicitDescendants does)."""
    decision = False
    for negated, regex in compiled:
        probe = path
        hit = False
        while True:
            if regex.match(probe):
                hit = True
                break
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        if hit:
            decision = not negated
    return decision


def glob_files(lines, include_hidden):
    """The files (never folders) the patterns name, following symbolic links, as
    upload-artifact's search finds them, and the search paths."""
    patterns = parse_patterns(lines)
    roots = root_search_paths(patterns)
    compiled = [(negated, pattern_regex(pattern)) for negated, pattern in patterns]
    found = []
    seen = set()
    for root in roots:
        if not os.path.exists(root):
            continue
        if os.path.isfile(root):
            candidates = [root]
        else:
            candidates = []
            for folder, dirs, files in os.walk(root, followlinks=True):
                if not include_hidden:
                    dirs[:] = [d for d in dirs if not d.startswith(".")]
                    files = [f for f in files if not f.startswith(".")]
                dirs.sort()
                candidates.extend(os.path.join(folder, f) for f in sorted(files))
        for path in candidates:
            if not include_hidden and os.path.basename(path).startswith("."):
                continue
            if os.path.isfile(path) and matched(path, compiled) and path not in seen:
                seen.add(path)
                found.append(path)
    return found, roots


def least_common_ancestor(paths):
    split = [os.path.normpath(p).split("/") for p in paths]
    common = []
    for parts in zip(*split):
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    return "/".join(common) or "/"


# --- upload-artifact and download-artifact -------------------------------------------

FORBIDDEN_IN_NAMES = ['"', ":", "<", ">", "|", "*", "?", "\r", "\n", "\\", "/"]


def artifacts(*parts):
    run = os.environ.get("IPC_MATRIX_ACT_RUN")
    if not run:
        fail("IPC_MATRIX_ACT_RUN is not set: the local stand-ins run under `cargo xtask workflow`")
    return store("artifacts", run, *parts)


def upload():
    name = given("name", "artifact") or "artifact"
    lines = input_lines("path")
    if not lines:
        fail("Input required and not supplied: path")
    for c in FORBIDDEN_IN_NAMES:
        if c in name:
            fail(f"The artifact name is not valid: {name}. Contains the following character: {c!r}")
    if_none = given("if-no-files-found", "warn") or "warn"
    if if_none not in ("warn", "error", "ignore"):
        fail(f"Unrecognized if-no-files-found input. Provided: {if_none}. Available options: warn, error, ignore")
    files, roots = glob_files(lines, flag("include-hidden-files"))
    raw = given("path").strip()
    if not files:
        message = f"No files were found with the provided path: {raw}. No artifacts will be uploaded."
        if if_none == "error":
            fail(message)
        if if_none == "warn":
            warning(message)
        else:
            info(message)
        return
    if len(roots) > 1:
        root = least_common_ancestor(roots)
    elif len(files) == 1 and roots[0] == files[0]:
        root = os.path.dirname(files[0])
    else:
        root = roots[0]
    if not flag("archive", "true") and len(files) > 1:
        fail(f"When 'archive' is set to false, only a single file can be uploaded. Found {len(files)} files to upload.")
    target = artifacts(name)
    if os.path.exists(target):
        if not flag("overwrite"):
            fail(
                "Failed to CreateArtifact: Received non-retryable error: Failed request: (409) "
                f"Conflict: an artifact with this name already exists on the workflow run ({name})"
            )
        shutil.rmtree(target)
    staging = target + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    for path in files:
        relative = os.path.relpath(path, root)
        dest = os.path.join(staging, relative)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(path, dest)
    os.rename(staging, target)
    info(f"With the provided path, there will be {len(files)} file{'' if len(files) == 1 else 's'} uploaded")
    info(f"Root artifact directory is {root}")
    info(f"Artifact {name} has been successfully uploaded ({target})")
    set_output("artifact-id", str(abs(hash(target)) % 10**9))


def download():
    name = given("name")
    pattern = given("pattern")
    merge = flag("merge-multiple")
    path = given("path") or workspace()
    if path.startswith("~"):
        path = os.path.expanduser("~") + path[1:]
    path = os.path.abspath(os.path.join(workspace(), path))
    stored = artifacts()
    present = sorted(os.listdir(stored)) if os.path.isdir(stored) else []
    present = [a for a in present if not a.endswith(".partial")]
    if name:
        if name not in present:
            fail(f"Artifact '{name}' not found")
        chosen = [name]
    else:
        chosen = [a for a in present if not pattern or fnmatch.fnmatchcase(a, pattern)]
        if pattern:
            info(f"Filtering artifacts by pattern '{pattern}'")
    for artifact in chosen:
        into = path if (name or merge or len(chosen) == 1) else os.path.join(path, artifact)
        shutil.copytree(artifacts(artifact), into, dirs_exist_ok=True)
        info(f"Artifact {artifact} was downloaded to {into}")
    info(f"Total of {len(chosen)} artifact(s) downloaded")
    set_output("download-path", path)


# --- actions/cache ---------------------------------------------------------------------

def cache_version(paths):
    """The cache's version: its path list in order, and the compression (a restore with
    another list misses, as on GitHub)."""
    return hashlib.sha256("|".join(paths + ["tar"]).encode()).hexdigest()[:16]


def cache_entries(version):
    """(created, key, folder) of each entry of a version, the most recent first."""
    folder = store("cache", version)
    entries = []
    if os.path.isdir(folder):
        for entry in os.listdir(folder):
            meta = os.path.join(folder, entry, "entry.json")
            try:
                with open(meta, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError):
                continue
            entries.append((data["created"], data["key"], os.path.join(folder, entry)))
    return sorted(entries, reverse=True)


def check_key(key):
    if len(key) > 512:
        fail(f"Key Validation Error: {key} cannot be larger than 512 characters.")
    if "," in key:
        fail(f"Key Validation Error: {key} cannot contain commas.")


def cache_restore():
    key = given("key").strip()
    if not key:
        fail("Input required and not supplied: key")
    paths = input_lines("path")
    if not paths:
        fail("Input required and not supplied: path")
    restore_keys = input_lines("restore-keys")
    for k in [key] + restore_keys:
        check_key(k)
    set_output("cache-primary-key", key)
    entries = cache_entries(cache_version(paths))
    found = None
    for wanted in [key] + restore_keys:
        exact = [e for e in entries if e[1] == wanted]
        prefixed = [e for e in entries if e[1].startswith(wanted)]
        if exact or prefixed:
            found = (exact or prefixed)[0]
            break
    if found is None:
        if flag("fail-on-cache-miss"):
            fail(f"Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: {key}")
        info(f"Cache not found for input keys: {', '.join([key] + restore_keys)}")
        return
    _, matched_key, folder = found
    if not flag("lookup-only"):
        archive = os.path.join(folder, "files.tar")
        subprocess.run(["tar", "-xf", archive, "-P", "-C", workspace()], check=True)
        info(f"Cache restored from key: {matched_key}")
    else:
        info(f"Cache found and can be restored from key: {matched_key}")
    set_output("cache-hit", "true" if matched_key == key else "false")
    set_output("cache-matched-key", matched_key)


def cache_save():
    key = given("key").strip()
    if not key:
        fail("Input required and not supplied: key")
    check_key(key)
    paths = input_lines("path")
    if not paths:
        fail("Input required and not supplied: path")
    version = cache_version(paths)
    if any(e[1] == key for e in cache_entries(version)):
        warning(f"Failed to save: Unable to reserve cache with key {key}, another job may be creating this cache.")
        return
    # The paths as the cache resolves them (a folder brings its contents); in the workspace
    # they are kept relative to it, so that another checkout restores them in its own.
    members = []
    for negated, pattern in parse_patterns(paths):
        if negated:
            continue
        if GLOB_CHARS.search(pattern):
            root = search_path(pattern)
            regex = pattern_regex(pattern)
            for folder, dirs, files in os.walk(root) if os.path.isdir(root) else []:
                for entry in dirs + files:
                    full = os.path.join(folder, entry)
                    if regex.match(full):
                        members.append(full)
        elif os.path.exists(pattern.rstrip("/")):
            members.append(pattern.rstrip("/"))
    if not members:
        warning("Path Validation Error: Path(s) specified in the action for caching do(es) not exist, hence no cache is being saved.")
        return
    ws = workspace().rstrip("/") + "/"
    names = [m[len(ws):] if m.startswith(ws) else m for m in members]
    folder = store("cache", version)
    os.makedirs(folder, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".saving-", dir=folder)
    with open(os.path.join(staging, "members"), "w", encoding="utf-8") as f:
        f.write("\n".join(names) + "\n")
    subprocess.run(
        ["tar", "-cf", os.path.join(staging, "files.tar"), "-P", "-C", workspace(),
         "--files-from", os.path.join(staging, "members")],
        check=True,
    )
    with open(os.path.join(staging, "entry.json"), "w", encoding="utf-8") as f:
        json.dump({"key": key, "created": time.time_ns(), "paths": paths}, f)
    entry = os.path.join(folder, hashlib.sha256(key.encode()).hexdigest()[:32])
    try:
        os.rename(staging, entry)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        warning(f"Failed to save: Unable to reserve cache with key {key}, another job may be creating this cache.")
        return
    info(f"Cache saved with key: {key}")


# --- taiki-e/install-action -------------------------------------------------------------

def version_of(tool):
    if tool.startswith("cargo-"):
        command = ["cargo", tool[len("cargo-"):], "--version"]
    else:
        command = [tool, "--version"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def install():
    tools = [t.strip() for t in re.split(r"[,\n]", given("tool")) if t.strip()]
    if not tools:
        fail("no tool given: `tool` is required")
    for spec in tools:
        tool, _, version = spec.partition("@")
        text = version_of(tool)
        if text is None:
            fail(
                f"{tool} is not installed here, and this stand-in installs nothing (the "
                f"release host is out of reach): install {spec} first"
            )
        if version and version != "latest" and not re.search(
            r"(^|[^0-9.])" + re.escape(version) + r"($|[^0-9.])", text
        ):
            fail(f"{tool} here is `{text.strip()}`, not {version}: install {spec} first")
        info(f"{tool}: {text.strip()} (already installed; the stand-in checked its version)")


COMMANDS = {
    "upload": upload,
    "download": download,
    "cache-restore": cache_restore,
    "cache-save": cache_save,
    "install": install,
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in COMMANDS:
        fail(f"usage: stand_in.py {{{','.join(COMMANDS)}}}")
    COMMANDS[sys.argv[1]]()
