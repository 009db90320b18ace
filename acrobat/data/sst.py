"""Stanford Sentiment Treebank (SST) trees in PTB bracketing, one tree a line.

A line holds ``(label child child)`` or ``(label word)``: labels are the
integers 0-4, trees are strictly binary, and a word is any run of characters
other than spaces, tabs and parentheses (``-LRB-``, ``'s``, ``fully-written``;
SST also has a word holding a no-break space)::

    (3 (2 It) (4 (2 's) (2 good)))

The parser keeps an explicit stack, so trees of any depth parse; every
malformed line raises :class:`~acrobat.errors.DataError` naming the file, the
1-based line and the 1-based column of the offending character.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from acrobat.data.tree import Tree
from acrobat.data.vocab import Vocab
from acrobat.errors import DataError

_SPACE = " \t"  # the only separators: SST words may hold other whitespace (a no-break space)
_TOKEN = re.compile(r"[()]|[^ \t()]+")
_WORD = re.compile(r"[^ \t()]+")
_INTEGER = re.compile(r"-?[0-9]+")
_LEAF_WORD = re.compile(r"\([ \t]*[^ \t()]+[ \t]+([^ \t()]+)[ \t]*\)")
_BINARY = "trees must be strictly binary"
_WORD_OR_SUBTREES = "a node has one word or two subtrees"


@dataclass(slots=True)
class _Open:
    """A node whose ``(`` has been read but not yet its ``)``."""

    col: int
    label: int | None = None
    word: str | None = None
    children: list[Tree] = field(default_factory=list)


class _Parser:
    """Reads the tokens of one line; each method handles one kind of token."""

    def __init__(self, vocab: Vocab | None, filename: str, lineno: int):
        self.vocab = vocab
        self.filename = filename
        self.lineno = lineno
        self.stack: list[_Open] = []
        self.root: Tree | None = None

    def error(self, message: str, col: int) -> DataError:
        return DataError(message, self.filename, self.lineno, col)

    def token(self, tok: str, col: int) -> None:
        if not self.stack:
            self.outside(tok, col)
        elif tok == "(":
            self.open(col)
        elif tok == ")":
            self.close(col)
        else:
            self.atom(tok, col)

    def outside(self, tok: str, col: int) -> None:
        """A token with no node open: the root's ``(``, or an error."""
        if tok == ")":
            raise self.error("extra ')': no open '(' to close", col)
        if self.root is not None:
            raise self.error(f"trailing text {tok!r} after the tree: expected end of line (one tree a line)", col)
        if tok != "(":
            raise self.error(f"expected '(' to start a tree, got {tok!r}", col)
        self.stack.append(_Open(col))

    def open(self, col: int) -> None:
        top = self.stack[-1]
        if top.label is None:
            raise self.error("expected an integer label 0-4 after '(', got '('", col)
        if top.word is not None:
            raise self.error(f"expected ')' after the word {top.word!r}, got '(' ({_WORD_OR_SUBTREES})", col)
        if len(top.children) == 2:
            raise self.error(f"expected ')' after two subtrees, got a third '(' ({_BINARY})", col)
        self.stack.append(_Open(col))

    def atom(self, tok: str, col: int) -> None:
        top = self.stack[-1]
        if top.label is None:
            top.label = self.label(tok, col)
        elif top.children:
            raise self.error(f"expected '(' or ')' after a subtree, got the word {tok!r} ({_WORD_OR_SUBTREES})", col)
        elif top.word is not None:
            raise self.error(f"expected ')' after the word {top.word!r}, got a second word {tok!r}", col)
        else:
            top.word = tok

    def label(self, tok: str, col: int) -> int:
        if not _INTEGER.fullmatch(tok):
            raise self.error(f"expected an integer label 0-4 after '(', got {tok!r}", col)
        if not 0 <= int(tok) <= 4:
            raise self.error(f"label {tok} outside 0-4", col)
        return int(tok)

    def close(self, col: int) -> None:
        node = self.stack.pop()
        tree = self.finish(node, col)
        if self.stack:
            self.stack[-1].children.append(tree)
        else:
            self.root = tree

    def finish(self, node: _Open, col: int) -> Tree:
        """The tree of ``node``, whose ``)`` is at column ``col``."""
        if node.label is None:
            raise self.error("empty tree '()': expected a label 0-4 after '('", col)
        if node.word is not None:
            word_id = self.vocab.id(node.word) if self.vocab is not None else 0
            return Tree(node.label, word=node.word, word_id=word_id)
        if not node.children:
            raise self.error(f"leaf with no word: expected a word or two subtrees after label {node.label}", col)
        if len(node.children) == 1:
            raise self.error(
                f"node with one subtree: expected a second subtree before ')' ({_BINARY}; "
                "a one-word node is written '(label word)')",
                col,
            )
        return Tree(node.label, left=node.children[0], right=node.children[1])

    def end(self) -> Tree:
        """The tree read, once a non-blank line is used up."""
        if self.stack:
            more = f" (nor {len(self.stack) - 1} enclosing it)" if len(self.stack) > 1 else ""
            col = self.stack[-1].col
            raise self.error(f"missing ')': the '(' at column {col} is never closed{more}", col)
        assert self.root is not None  # a non-blank line has a first token, which opened the root or raised
        return self.root


def _parse_well_formed(text: str, vocab: Vocab | None) -> Tree | None:
    """The tree of a well-formed line, or None for anything else (then :class:`_Parser` finds the error).

    The fast path of :func:`parse_tree` (a served request is parsed on the replica's event loop): a
    flat token loop without columns, 2-3x faster than the error-reporting parser.
    """
    stack: list[list] = []  # per open node: [label, word, children]
    root = None
    tokens = iter(_TOKEN.findall(text))
    for tok in tokens:
        if tok == "(":
            label = next(tokens, "")
            if len(label) != 1 or label not in "01234" or (stack and (stack[-1][1] is not None or len(stack[-1][2]) == 2)):
                return None
            stack.append([int(label), None, []])
        elif tok == ")":
            if not stack:
                return None
            label, word, children = stack.pop()
            if word is not None:
                node = Tree(label, word=word, word_id=vocab.id(word) if vocab is not None else 0)
            elif len(children) == 2:
                node = Tree(label, left=children[0], right=children[1])
            else:
                return None
            if stack:
                stack[-1][2].append(node)
            elif root is None:
                root = node
            else:
                return None
        elif not stack or stack[-1][1] is not None or stack[-1][2]:
            return None
        else:
            stack[-1][1] = tok
    return None if stack else root


def parse_tree(
    line: str, vocab: Vocab | None = None, *, filename: str = "<string>", lineno: int = 1
) -> Tree:
    """Parse one bracketed SST tree, e.g. ``"(3 (2 It) (4 (2 's) (2 good)))"``.

    Leaves get ``word`` and ``word_id = vocab.id(word)`` (0 when ``vocab`` is
    None). A trailing ``"\\n"``/``"\\r\\n"`` is ignored. Raises ``DataError``
    at ``filename:lineno:column`` for a malformed line (an empty line included).
    """
    text = line.rstrip("\r\n")
    tree = _parse_well_formed(text, vocab)
    if tree is not None:
        return tree
    parser = _Parser(vocab, filename, lineno)
    if not text.strip(_SPACE):
        raise parser.error("empty line: expected a tree '(label ...)'", 1)
    for match in _TOKEN.finditer(text):
        parser.token(match.group(), match.start() + 1)
    return parser.end()


def format_tree(tree: Tree) -> str:
    """The bracketed SST line of ``tree`` (no newline): the inverse of :func:`parse_tree`.

    ``parse_tree(format_tree(t))`` has ``t``'s labels, shape and words
    (``"(3 (2 It) (4 (2 's) (2 good)))"``). Iterative, so trees of any depth
    format. Raises ``ValueError`` for a leaf whose word is None or is not an
    SST word (empty, or holding a space, tab or parenthesis): such a tree has
    no SST line.
    """
    parts: list[str] = []
    stack: list[Tree | str] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
        elif item.is_leaf:
            if item.word is None or not _WORD.fullmatch(item.word):
                raise ValueError(f"leaf word {item.word!r} is not an SST word (a run of characters other than "
                                 "spaces, tabs and parentheses)")
            parts.append(f"({item.label} {item.word})")
        else:
            parts.append(f"({item.label} ")
            stack += [")", item.right, " ", item.left]  # type: ignore[list-item]
    return "".join(parts)


def _read_lines(path: str | os.PathLike[str]) -> list[str]:
    """The lines of a UTF-8 text file, blank lines at its end left out."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"SST tree file not found: {os.fspath(path)}") from None
    lines = text.split("\n")
    while lines and not lines[-1].strip(_SPACE + "\r"):
        lines.pop()
    return lines


def load_trees(
    path: str | os.PathLike[str], vocab: Vocab | None = None, limit: int | None = None
) -> list[Tree]:
    """The trees of an SST file, one a line (the first ``limit`` when given).

    Blank lines at the end of the file are ignored; any other blank line is a
    ``DataError``. Errors name ``path`` as given. Raises ``FileNotFoundError``
    naming ``path`` when the file is missing.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    name = os.fspath(path)
    lines = _read_lines(path)[:limit]
    return [parse_tree(line, vocab, filename=name, lineno=i) for i, line in enumerate(lines, start=1)]


def sst_vocab(paths: Iterable[str | os.PathLike[str]]) -> Vocab:
    """The vocab of every word in the given SST files (a regex scan, no parsing)."""
    words: set[str] = set()
    for path in paths:
        words.update(_LEAF_WORD.findall("\n".join(_read_lines(path))))
    return Vocab.build(words)
