"""The plugin contract: registration, duplicates, unknown names, entry points, and cheap imports."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness.cli import main
from harness.hookspecs import hookimpl
from harness.plugins import get_plugin_manager, manager
from harness.plugins.registry import PluginError, Registry


def test_builtins_register_through_hooks():
    plugins = get_plugin_manager(autoload=False)
    assert "math" in plugins["task"]
    assert "grpo" in plugins["trainer"]
    assert "best-of-k" in plugins["searcher"]
    assert {"grpo", "dr_grpo"} <= set(plugins["advantage"].names())
    assert {"smollm2-135m", "tiny-random"} <= set(plugins["model"].names())
    assert plugins["task"].get("math").plugin == "builtin:harness.tasks"
    assert "vspo" in plugins["trainer"]
    assert set(plugins["behaviour"].names()) >= {"expertise", "confidence", "conciseness", "robustness"}
    assert plugins["behaviour"].get("expertise").plugin == "builtin:harness.tasks"


def test_unknown_name_lists_available():
    plugins = get_plugin_manager(autoload=False)
    with pytest.raises(PluginError) as err:
        plugins["trainer"].get("ppo")
    message = str(err.value)
    assert "unknown trainer 'ppo'" in message and "grpo" in message and "\n" not in message


class _Duplicate:
    @hookimpl
    def harness_register_tasks(self, registry):
        registry.add("math", "nowhere:Nothing", "a second math")


def test_duplicate_name_names_both_plugins():
    with pytest.raises(PluginError) as err:
        get_plugin_manager(extra_plugins=(_Duplicate(),), autoload=False)
    message = str(err.value)
    assert "duplicate task 'math'" in message and "builtin:harness.tasks" in message


def test_registry_lazy_factory_error_is_one_line():
    registry = Registry("task")
    registry.current_plugin = "someplugin"
    registry.add("broken", "no_such_module_xyz:Task")
    with pytest.raises(PluginError) as err:
        registry.get("broken").create()
    assert "someplugin" in str(err.value) and "\n" not in str(err.value)


def test_misspelt_hook_fails_loudly():
    class Misspelt:
        @hookimpl
        def harness_register_taskz(self, registry):
            pass

    with pytest.raises(Exception, match="harness_register_taskz"):
        get_plugin_manager(extra_plugins=(Misspelt(),), autoload=False)


@pytest.mark.parametrize("argv", [["--help"], ["list"], ["run", "--help"]])
def test_cli_listing_does_not_import_torch(argv):
    code = (
        "import sys\n"
        "from harness.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'math_verify') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_cli_unknown_task_is_one_line_error():
    result = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--task", "nope", "--model", "tiny-random"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("harness: error: unknown task 'nope'; available:") and "math" in lines[-1]
    assert "torch" not in result.stderr  # failed before anything heavy was loaded


def test_cli_bad_option_is_one_line_error(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--model",
            "tiny-random",
            "--out",
            str(tmp_path),
            "--set",
            "trainer.lrr=1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "harness: error: trainer 'grpo': unknown option lrr; did you mean lr (AdamW learning rate)?"
    )
    assert not any(tmp_path.iterdir())  # refused before a run folder was made


def test_a_family_name_resolves_members():
    registry = Registry("task")
    registry.current_plugin = "bridge"
    registry.add("rg:", lambda member, **options: (member, options), "a bridge")
    entry = registry.get("rg:maze")
    assert entry.name == "rg:maze" and entry.plugin == "bridge"
    assert entry.create(size=3) == ("maze", {"size": 3})
    with pytest.raises(PluginError, match=r"available: rg:<name>"):
        registry.get("rg")


def test_cli_unknown_task_option_is_one_line_error(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--model",
            "tiny-random",
            "--out",
            str(tmp_path),
            "--set",
            "task.bogus=1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("harness: error: task 'math': ")
    assert "bogus" in result.stderr and not any(tmp_path.iterdir())


# -- third-party plugins (entry points): a fault in one package never stops every command ------------------------


class _EntryPoint:
    """What importlib.metadata gives the manager for an installed package's ``harness`` entry point."""

    def __init__(self, name: str, dist: str, plugin: object) -> None:
        self.name, self.dist, self._plugin = name, SimpleNamespace(name=dist), plugin

    def load(self) -> object:
        if isinstance(self._plugin, Exception):
            raise self._plugin
        return self._plugin


def _installed(monkeypatch, *eps: _EntryPoint) -> None:
    monkeypatch.setattr(manager, "entry_points", lambda group: list(eps) if group == manager.ENTRY_POINT_GROUP else [])
    monkeypatch.delenv(manager.DISABLE_AUTOLOAD_ENV, raising=False)


def _tasks_plugin(*names: str):
    class TaskPlugin:
        @hookimpl
        def harness_register_tasks(self, registry):
            for name in names:
                registry.add(name, "nowhere:Task", f"the {name} of a package")

    return TaskPlugin()


def test_a_package_cannot_take_a_builtin_name(monkeypatch, capsys):
    _installed(monkeypatch, _EntryPoint("mine", "my-dist", _tasks_plugin("math", "mytask")))
    plugins = get_plugin_manager()
    assert plugins["task"].get("math").plugin == "builtin:harness.tasks"  # the built-in stays
    assert plugins["task"].get("mytask").plugin == "my-dist:mine"  # the package's other names are kept
    message = "task 'math' not registered: the name is taken by 'builtin:harness.tasks'"
    assert plugins.broken == {"my-dist:mine": message}
    assert capsys.readouterr().err == f"warning: plugin 'my-dist:mine': {message}\n"


def test_two_packages_with_one_name_the_first_by_entry_point_name_keeps_it(monkeypatch, capsys):
    # Listed in the "wrong" order: the manager sorts entry points by name, so the outcome never depends on the
    # order in which importlib.metadata happens to find the packages.
    _installed(
        monkeypatch,
        _EntryPoint("zeta", "z-dist", _tasks_plugin("shared")),
        _EntryPoint("alpha", "a-dist", _tasks_plugin("shared")),
    )
    plugins = get_plugin_manager()
    assert plugins["task"].get("shared").plugin == "a-dist:alpha"
    assert plugins.broken == {"z-dist:zeta": "task 'shared' not registered: the name is taken by 'a-dist:alpha'"}
    assert capsys.readouterr().err.count("\n") == 1


def test_a_package_with_a_misspelt_hook_is_skipped_not_fatal(monkeypatch, capsys):
    class Misspelt:
        @hookimpl
        def harness_register_taskz(self, registry):
            registry.add("never", "nowhere:Task")

        @hookimpl
        def harness_register_trainers(self, registry):  # spelt right, but the plugin is skipped as a whole
            registry.add("half-a-plugin", "nowhere:Trainer")

    _installed(
        monkeypatch,
        _EntryPoint("typo", "typo-dist", Misspelt()),
        _EntryPoint("fine", "fine-dist", _tasks_plugin("fine-task")),
    )
    plugins = get_plugin_manager()
    assert plugins.broken == {
        "typo-dist:typo": "not loaded: unknown hook(s) harness_register_taskz (misspelt? every "
        "hook is listed in docs/reference/hooks.md)"
    }
    assert "half-a-plugin" not in plugins["trainer"] and plugins.manager.get_plugin("typo-dist:typo") is None
    assert "fine-task" in plugins["task"]  # the other package is unaffected
    warning = f"warning: plugin 'typo-dist:typo': {plugins.broken['typo-dist:typo']}"
    assert capsys.readouterr().err.splitlines() == [warning]


def test_a_package_that_fails_to_import_or_raises_is_skipped(monkeypatch, capsys):
    class Raises:
        @hookimpl
        def harness_register_searchers(self, registry):
            registry.add("before-the-error", "nowhere:Searcher")
            raise RuntimeError("no licence key\nsecond line")

    _installed(
        monkeypatch,
        _EntryPoint("gone", "gone-dist", ImportError("No module named 'gone'")),
        _EntryPoint("raises", "raises-dist", Raises()),
    )
    plugins = get_plugin_manager()
    assert plugins.broken == {
        "gone-dist:gone": "not loaded: ImportError: No module named 'gone'",
        "raises-dist:raises": "harness_register_searchers raised RuntimeError: no licence key",
    }
    assert len(capsys.readouterr().err.splitlines()) == 2


def test_harness_list_still_works_with_a_broken_package(monkeypatch, capsys):
    class Misspelt:
        @hookimpl
        def harness_register_taskz(self, registry):
            pass

    _installed(
        monkeypatch,
        _EntryPoint("typo", "typo-dist", Misspelt()),
        _EntryPoint("clash", "clash-dist", _tasks_plugin("maze")),
    )
    assert main(["list"]) == 0
    captured = capsys.readouterr()
    assert re.search(r"^\s+math\s.*\[builtin:harness.tasks\]$", captured.out, re.M)  # the rest is listed
    assert "broken plugin typo-dist:typo: not loaded: unknown hook(s) harness_register_taskz" in captured.out
    assert "broken plugin clash-dist:clash: task 'maze' not registered" in captured.out


def test_duplicates_among_test_plugins_stay_errors():
    with pytest.raises(PluginError, match=r"^duplicate task 'twice': registered by both '\d+' and '\d+'$"):
        get_plugin_manager(extra_plugins=(_tasks_plugin("twice"), _tasks_plugin("twice")), autoload=False)


# -- every registration hook, one plugin implementing them all ---------------------------------------------------


class _EveryHook:
    """Registers one name of each kind, as "module:attr" strings that do not exist: registration never imports."""

    @hookimpl
    def harness_register_tasks(self, registry):
        registry.add("t-x", "no_such_module:Task", "a task")

    @hookimpl
    def harness_register_trainers(self, registry):
        registry.add("tr-x", "no_such_module:Trainer", "a trainer")

    @hookimpl
    def harness_register_searchers(self, registry):
        registry.add("s-x", "no_such_module:Searcher", "a searcher")

    @hookimpl
    def harness_register_advantage_estimators(self, registry):
        registry.add("a-x", "no_such_module:estimate", "an estimator")

    @hookimpl
    def harness_register_models(self, registry):
        registry.add("m-x", "no_such_module:path", "a model alias")

    @hookimpl
    def harness_register_behaviours(self, registry):
        registry.add("b-x", "no_such_module:behaviour", "a behaviour")

    @hookimpl
    def harness_register_engines(self, registry):
        registry.add("e-x", "no_such_module:Engine", "an engine")

    @hookimpl
    def harness_register_loggers(self, registry):
        registry.add("l-x", "no_such_module:Logger", "a logger")


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("task", "t-x"),
        ("trainer", "tr-x"),
        ("searcher", "s-x"),
        ("advantage", "a-x"),
        ("model", "m-x"),
        ("behaviour", "b-x"),
        ("engine", "e-x"),
        ("logger", "l-x"),
    ],
)
def test_each_registration_hook_fills_its_own_registry(kind, name):
    plugin = _EveryHook()
    plugins = get_plugin_manager(extra_plugins=(plugin,), autoload=False)
    entry = plugins[kind].get(name)
    assert entry.plugin == plugins.manager.get_name(plugin) and entry.description.startswith(("a ", "an "))
    assert [k for k, registry in plugins.registries.items() if name in registry] == [kind]
    with pytest.raises(PluginError, match=f"^{name!r} from plugin '\\d+' failed to load 'no_such_module:"):
        entry.load()  # lazily: only now is the module looked for


def test_harness_register_engines_registers_the_three_engines_lazily():
    code = (
        "import sys\n"
        "from harness.plugins import get_plugin_manager\n"
        "engines = get_plugin_manager(autoload=False)['engine']\n"
        "print([(e.name, e.plugin, e.factory) for e in engines])\n"
        "print(sorted(m for m in ('torch', 'vllm', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    listed, imported = result.stdout.splitlines()
    assert listed == str(
        [
            ("transformers", "builtin:harness.engine", "harness.engine.transformers_engine:TransformersEngine"),
            ("vllm", "builtin:harness.engine", "harness.engine.vllm_engine:VLLMEngine"),
            ("vllm-server", "builtin:harness.engine", "harness.engine.vllm_server_engine:VLLMServerEngine"),
        ]
    )
    assert imported == "[]"  # listing engines imports none of them


def test_builtin_trainers_estimators_models_and_behaviours_come_from_their_hooks(plugins):
    # harness_register_trainers, harness_register_advantage_estimators (harness.trainers), harness_register_models
    # (harness.models) and harness_register_behaviours (harness.tasks): each built-in name from its module's hook.
    assert {e.plugin for e in plugins["trainer"]} == {"builtin:harness.trainers"}
    assert {e.plugin for e in plugins["advantage"]} == {"builtin:harness.trainers"}
    assert {e.plugin for e in plugins["model"]} == {"builtin:harness.models"}
    assert {e.plugin for e in plugins["behaviour"]} == {"builtin:harness.tasks"}
    assert set(plugins["trainer"].names()) >= {"grpo", "vpo", "vspo", "rlaif", "sft"}
