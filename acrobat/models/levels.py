"""Level-by-level grouping of tree nodes, for the hand-batched (expert) tree models."""

from __future__ import annotations

from acrobat.data.tree import Tree


def tree_levels(trees: list[Tree]) -> tuple[list[list[Tree]], dict[Tree, int]]:
    """Group every distinct node of ``trees`` by height (leaf 0, else 1 + max child height).

    Returns ``(levels, row)``: ``levels[k]`` lists the nodes of height ``k``;
    ``row[node]`` is the node's row in a store laid out level after level.
    A node reached twice (the same tree passed twice) is computed once.
    Iterative, so deep trees do not hit the recursion limit.
    """
    levels: list[list[Tree]] = []
    height: dict[Tree, int] = {}
    for root in trees:
        stack: list[tuple[Tree, bool]] = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            if node in height:
                continue
            if node.is_leaf:
                k = 0
            elif not children_done:
                stack.append((node, True))
                stack.append((node.right, False))  # type: ignore[arg-type]
                stack.append((node.left, False))  # type: ignore[arg-type]
                continue
            else:
                k = 1 + max(height[node.left], height[node.right])  # type: ignore[index]
            height[node] = k
            if k == len(levels):
                levels.append([])
            levels[k].append(node)
    row: dict[Tree, int] = {}
    for level in levels:
        for node in level:
            row[node] = len(row)
    return levels, row
