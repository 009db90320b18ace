"""Word vocabularies: word strings to the int ids the embedding tables use."""

from __future__ import annotations

from collections.abc import Iterable

UNK = "<unk>"
"""The word of id 0, which every unknown word maps to."""


class Vocab:
    """A fixed mapping between word strings and int ids ``0 .. len(vocab) - 1``.

    Id 0 is always ``"<unk>"``; the words given to the constructor get ids
    1, 2, ... in the order given.
    """

    def __init__(self, words: Iterable[str] = ()):
        """Make a vocab whose word ``i`` (1-based) is the ``i``-th of ``words``.

        Raises ``ValueError`` for a repeated word or for ``"<unk>"`` itself,
        which is always id 0.
        """
        self._words: list[str] = [UNK]
        self._ids: dict[str, int] = {UNK: 0}
        for word in words:
            if word in self._ids:
                raise ValueError(f"vocab word {word!r} given twice (or is the reserved {UNK!r})")
            self._ids[word] = len(self._words)
            self._words.append(word)

    @classmethod
    def build(cls, words: Iterable[str]) -> Vocab:
        """The vocab of the distinct ``words``, ids assigned in sorted order (deterministic).

        Repeats and ``"<unk>"`` in ``words`` are fine: each word gets one id.
        """
        return cls(sorted(set(words) - {UNK}))

    def id(self, word: str) -> int:
        """The id of ``word``; 0 (``"<unk>"``) for a word not in the vocab."""
        return self._ids.get(word, 0)

    def word(self, id: int) -> str:
        """The word of ``id``; ``IndexError`` outside ``0 .. len(self) - 1``."""
        if not 0 <= id < len(self._words):
            raise IndexError(f"word id {id} outside the vocab (0 .. {len(self._words) - 1})")
        return self._words[id]

    def __len__(self) -> int:
        """Number of ids, ``"<unk>"`` included."""
        return len(self._words)

    def __contains__(self, word: object) -> bool:
        """True when ``word`` has its own id (``"<unk>"`` counts)."""
        return word in self._ids

    def __eq__(self, other: object) -> bool:
        """Two vocabs are equal when they give every word the same id."""
        if not isinstance(other, Vocab):
            return NotImplemented
        return self._words == other._words

    def __repr__(self) -> str:
        return f"Vocab({len(self)} words)"
