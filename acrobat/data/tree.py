"""Binary constituency trees, the instances of the tree models (TreeLSTM, MV-RNN)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True, eq=False)
class Tree:
    """A node of a binary constituency tree (one instance of a tree model).

    A leaf has ``word``/``word_id`` and no children; an internal node has both
    ``left`` and ``right`` and ``word is None``, ``word_id == -1``.
    ``label`` is the SST sentiment label (0-4). ``is_leaf`` is set when the
    node is made (a plain attribute: models read it at every node), so a
    tree's children are not reassigned afterwards.
    """

    label: int
    word: str | None = None
    word_id: int = -1
    left: "Tree | None" = None
    right: "Tree | None" = None
    is_leaf: bool = field(init=False, repr=False)  # True for a leaf (a word), False for an internal node

    def __post_init__(self) -> None:
        self.is_leaf = self.left is None

    def leaves(self) -> list["Tree"]:
        """The leaves, left to right (iterative: deep trees do not hit the recursion limit)."""
        out: list[Tree] = []
        stack: list[Tree] = [self]
        while stack:
            node = stack.pop()
            if node.left is None:
                out.append(node)
            else:
                stack.append(node.right)  # type: ignore[arg-type]
                stack.append(node.left)
        return out

    def tokens(self) -> list[int]:
        """The word ids of the sentence, left to right."""
        return [leaf.word_id for leaf in self.leaves()]

    def size(self) -> int:
        """Number of nodes (a sentence of n words has 2n-1)."""
        return 2 * len(self.leaves()) - 1

    def height(self) -> int:
        """Edges on the longest root-to-leaf path (a leaf has height 0)."""
        best = 0
        stack: list[tuple[Tree, int]] = [(self, 0)]
        while stack:
            node, h = stack.pop()
            best = max(best, h)
            if node.left is not None:
                stack.append((node.left, h + 1))
                stack.append((node.right, h + 1))  # type: ignore[arg-type]
        return best
