"""Reading a run folder's files, and the rules for reading one someone else wrote.

Every error is a ValueError naming the file (and line), so "Expecting ',' delimiter" or "'utf-8' codec can't decode
byte" never reaches a user without saying where. ``read_json`` and ``read_jsonl`` read a file the harness itself
wrote (a resume, a run's own checks); ``read_run_json`` and ``read_run_jsonl`` read a folder `harness index` and
`harness report` meet, which may hold anything, by these rules (docs/design/reliability.md, "Reports survive any
folder"):

- **Only regular files inside the folder.** A file is opened only once ``os.stat`` says it is a regular file and
  its real path is inside the run folder: a symbolic link pointing out (to /dev/zero, /etc/passwd), a FIFO (whose
  open would wait for a writer forever), a device, a socket or a folder is refused, never opened. The open itself
  is non-blocking and does not follow a link, and the opened file is checked again, so a file swapped for a FIFO in
  between is refused too.
- **Bounded in size.** A file over its limit (``MAX_MANIFEST_BYTES``, ``MAX_METRICS_BYTES``, ``MAX_SAMPLES_BYTES``)
  or a JSONL line over ``MAX_LINE_BYTES`` is refused, naming it; at most the limit is ever read (a file still
  growing too). JSONL files are read a line at a time.
- **Strings sanitised.** A lone UTF-16 surrogate (JSON's "\\ud800", which no UTF-8 writer can write back: SQLite,
  a page, stdout) becomes U+FFFD; a path with bytes that are not UTF-8, or control characters, is shown escaped
  (``path_text``, ``shown_name``).
- **Shown bounded.** Any string from run data on a page is cut to ``SHOWN_TEXT`` characters (``shown``).

Integers and the values' types are run_record.py's (checked before any arithmetic); escaping for Markdown and HTML
is the report's (harness/report/build.py), from strings these rules have already made safe to write.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

# Limits: what a run of this harness writes, with a wide margin; beyond them a file is not a run's record.
MAX_MANIFEST_BYTES = 64 << 20  # a manifest is ~10 KB; its phase snapshots copy metrics (curves of long runs too)
MAX_METRICS_BYTES = 256 << 20  # metrics.json: scalars, and one value per step for each training curve
MAX_SAMPLES_BYTES = 64 << 30  # samples.jsonl, read a line at a time
MAX_LINE_BYTES = 64 << 20  # one JSONL record: a sample with its text
SHOWN_TEXT = 10_000  # characters of any one string from run data on a page (a sample's text, a configuration)
SHOWN_ITEMS = 100  # entries of any one list from a run's manifest on a page (warnings, reward terms, plugins)

_KIND = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symbolic link",
}
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # how a lone surrogate gets into JSON text (UTF-8 has none)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def read_jsonl(path: Path | str, upto: int | None = None, cut_tail: bool = False) -> list[dict[str, Any]]:
    """The records of ``path`` (its first ``upto`` bytes when given), each a JSON object on a line of its own.

    A last line with no newline is a line cut by a crash mid-write: skipped with ``cut_tail`` (a folder a run may
    still be writing, or died writing), an error otherwise. Any other bad line raises ValueError
    "PATH line N: ..."."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read() if upto is None else f.read(upto)
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the data ends with a newline
    if tail and not cut_tail:
        raise ValueError(f"{path} line {len(lines) + 1}: cut short (no newline at its end)")
    return [_record(raw, f"{path} line {number}") for number, raw in enumerate(lines, 1)]


def read_json(path: Path | str) -> Any:
    """A JSON file's value; an unreadable or invalid file is one ValueError naming it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return _value(data, str(path))


def read_run_json(folder: Path, name: str, limit: int) -> Any:
    """The JSON value of the file ``name`` in the run folder ``folder``, by the rules above; lone surrogates
    replaced. Errors name the file as ``name`` (the caller names the folder)."""
    with open_in_folder(folder, name, limit) as f:
        data = f.read(limit + 1)
    if len(data) > limit:  # grew after it was opened
        raise ValueError(f"{name}: larger than {_size(limit)}")
    value = _value(data, name)
    return sanitise(value) if _may_hold_surrogate(data) else value


def read_run_jsonl(
    folder: Path, name: str, limit: int, line_limit: int, cut_tail: bool = True
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each line of the JSONL file ``name`` in ``folder``, read a line at a time by the
    rules above. A last line with no newline (cut by a crash) ends the records with ``cut_tail``; any other bad
    line, a line over ``line_limit`` or a file over ``limit`` raises ValueError "NAME line N: ..."."""
    read = 0
    with open_in_folder(folder, name, limit) as f:
        for number in range(1, 1 << 62):
            raw = f.readline(line_limit + 1)
            if not raw:
                return
            read += len(raw)
            if read > limit:
                raise ValueError(f"{name}: larger than {_size(limit)}")
            if not raw.endswith(b"\n"):
                if len(raw) > line_limit:
                    raise ValueError(f"{name} line {number}: longer than {_size(line_limit)}")
                if cut_tail:
                    return
                raise ValueError(f"{name} line {number}: cut short (no newline at its end)")
            record = _record(raw[:-1], f"{name} line {number}")
            yield number, sanitise(record) if _may_hold_surrogate(raw) else record


def open_in_folder(folder: Path, name: str, limit: int) -> BinaryIO:
    """The regular file ``folder/name`` open for reading in binary (``with open_in_folder(...) as f``), or
    ValueError naming ``name`` and why it is not read (a link pointing out of ``folder``, not a regular file,
    larger than ``limit`` bytes, unreadable)."""
    return os.fdopen(_open_regular(Path(folder), name, limit), "rb")


def exists_in_folder(folder: Path, name: str) -> bool:
    """Whether ``folder/name`` is there at all (a dangling link too: reading it then says why not)."""
    try:
        os.lstat(Path(folder) / name)
    except OSError:
        return False
    return True


def _open_regular(folder: Path, name: str, limit: int) -> int:
    path = folder / name
    try:
        real, inside = os.path.realpath(path), os.path.realpath(folder)
        if os.path.commonpath([real, inside]) != inside:
            raise ValueError(f"{name}: a link pointing outside the run folder (to {path_text(real)}); not read")
        found = os.stat(real)
        if not stat.S_ISREG(found.st_mode):
            raise ValueError(f"{name}: {_kind(found.st_mode)}, not a regular file; not read")
        if found.st_size > limit:
            raise ValueError(f"{name}: {found.st_size:,} bytes, larger than {_size(limit)}; not read")
        # Non-blocking: a FIFO put there since the stat is not waited on; O_NOFOLLOW: nor is a link put there.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{name}: a loop of links, or a link put there while reading; not read") from None
        raise ValueError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{name}: {_kind(mode)}, not a regular file; not read")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(mode: int) -> str:
    return _KIND.get(stat.S_IFMT(mode), "not a regular file")


def _size(limit: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and limit % (1 << shift) == 0:
            return f"the limit of {limit >> shift} {unit}"
    return f"the limit of {limit:,} bytes"


def _value(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc})") from None
    except RecursionError:  # Python's parser recurses per bracket: a file of 100,000 "[" is not a stack overflow
        raise ValueError(f"{where}: not valid JSON (nested too deeply)") from None


def _record(raw: bytes, where: str) -> dict[str, Any]:
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{where}: not valid JSON (nested too deeply)") from None
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a JSON {type(record).__name__}, not an object")
    return record


def sanitise(value: Any) -> Any:
    """``value`` (parsed JSON) with every lone surrogate in its strings and keys replaced by U+FFFD; the value
    itself when it holds none (the common case costs one look at each string)."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (dict, list)) or not _has_surrogate(value):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (value, its container, its key there)
    while stack:
        item, into, key = stack.pop()
        if isinstance(item, dict):
            copy: Any = {}
            into[key] = copy
            for k, v in item.items():
                k = clean_text(k) if isinstance(k, str) else k
                copy[k] = None
                stack.append((v, copy, k))
        elif isinstance(item, list):
            copy = [None] * len(item)
            into[key] = copy
            stack.extend((v, copy, i) for i, v in enumerate(item))
        else:
            into[key] = clean_text(item) if isinstance(item, str) else item
    return root[0]


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD: a string UTF-8 can encode."""
    return _SURROGATE.sub("\ufffd", text)


def path_text(path: Path | str) -> str:
    """A path as text UTF-8 can write (SQLite, stdout, a page): its bytes that are not UTF-8 as ``\\xNN``. A path
    whose name is UTF-8 is its ``str`` unchanged."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def shown_name(text: Any) -> str:
    """A folder's or file's name in a one-line message: as ``path_text``, control characters (a newline in a
    folder name) as ``\\xNN``."""
    text = path_text(text) if isinstance(text, (Path, bytes)) else clean_text(str(text))
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 256 else f"\\u{ord(m[0]):04x}", text)


def shown(value: Any, limit: int | None = None) -> str:
    """Run data as a string for a page: lone surrogates replaced, at most ``limit`` characters (SHOWN_TEXT), a cut
    one saying how many it left out."""
    limit = SHOWN_TEXT if limit is None else limit
    text = clean_text(value if isinstance(value, str) else str(value))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters not shown)"


def shown_items(items: list[Any], limit: int | None = None) -> tuple[list[Any], int]:
    """The first ``limit`` (SHOWN_ITEMS) entries of a list from run data, and how many more there are."""
    limit = SHOWN_ITEMS if limit is None else limit
    return items[:limit], max(0, len(items) - limit)


def check_path_length(path: Path | str, what: str) -> None:
    """One line naming ``what`` when ``path`` is longer than the system's PATH_MAX (every open under it would
    fail with "File name too long")."""
    try:
        longest = os.pathconf("/", "PC_PATH_MAX")
    except (OSError, ValueError):
        longest = 4096
    size = len(os.fsencode(os.path.abspath(path)))
    if size >= longest:
        raise ValueError(f"{what}: a path of {size:,} bytes, over the system's limit of {longest - 1:,} (PATH_MAX)")


def _may_hold_surrogate(data: bytes) -> bool:
    """Whether JSON text can hold a lone surrogate at all: only an escape writes one (strict UTF-8 refuses the
    bytes of one), so text without "\\uD800"-"\\uDFFF" escapes is not walked."""
    return _SURROGATE_ESCAPE.search(data) is not None
