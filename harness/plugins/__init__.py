"""The plugin system: the manager that loads plugins (manager.py), the name -> factory registries they fill
(registry.py), typed plugin options (options.py) and the contract checks run before a model loads (contract.py)."""

from harness.plugins.manager import Plugins, get_plugin_manager
from harness.plugins.registry import PluginError

__all__ = ["PluginError", "Plugins", "get_plugin_manager"]
