"""YAML experiment files read with a bound on alias expansion.

PyYAML's safe loader shares an aliased node rather than copying it, so a "billion laughs" file (nine levels of
nine aliases each, 526 bytes) loads at once; what hangs is everything after, which walks the structure as a tree:
9^9 leaves. So the node graph is composed first and its size *as a tree* counted (each node once, memoised, so
the count itself is cheap), and a file whose settings would expand past ``MAX_NODES`` is refused in one line.
"""

from __future__ import annotations

from typing import Any

MAX_NODES = 100_000  # an experiment file is a few dozen settings; a large hand-written grid is a few thousand


class AliasBomb(ValueError):
    """A YAML document whose aliases expand past MAX_NODES; the message names the file."""


def load_bounded_yaml(text: str, where: str) -> Any:
    """``yaml.safe_load(text)``, refusing a document whose aliases expand past MAX_NODES (``AliasBomb`` naming
    ``where``). Raises yaml.YAMLError for invalid YAML, as safe_load does."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {}, set())
        if size > MAX_NODES:
            raise AliasBomb(
                f"{where}: its aliases expand to more than {MAX_NODES} values; "
                "an experiment file needs no such thing (a YAML alias bomb?)"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded_size(node: Any, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """How many nodes ``node`` is as a tree (an alias counted as a full copy); a node that contains itself is
    infinite. The recursion is as deep as the file's nesting, as PyYAML's own composer's is."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        return MAX_NODES + 1  # a recursive alias: walking it as a tree never ends
    open_nodes.add(key)
    children = node.value if isinstance(node.value, list) else []
    total = 1
    for child in children:
        for part in child if isinstance(child, tuple) else (child,):  # a mapping's (key, value) pairs
            total += _expanded_size(part, sizes, open_nodes)
            if total > MAX_NODES:
                break
    open_nodes.discard(key)
    sizes[key] = total
    return total
