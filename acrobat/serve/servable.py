"""What a server needs to serve an acrobat program: the program, its parameters, and its requests' format.

A request is one instance as JSON: a tree as its bracketed SST string,
``{"tree": "(3 (2 It) (4 (2 's) (2 good)))"}``, or a sentence as a list of
words, ``{"tokens": ["It", "'s", "good"]}``. :class:`Servable` turns the
body into the program's instance (a :class:`~acrobat.data.tree.Tree` of
word ids, or a list of word ids) and rejects what the program must not see
with a :class:`RequestError` that carries the HTTP status: malformed JSON or
tree (400), an input over the size limits (413), a word outside the model's
vocabulary (422). A result (tensors, or tuples/lists/dicts of them) goes back
as nested lists of numbers (:func:`to_json`, written by orjson: a float32
as the shortest decimal that reads back to it).

:class:`PaperModel` builds the Servable of a bundled SST model (treelstm,
mvrnn, birnn, stackrnn) from its name, data and seed, in the process that
calls it: a Ray replica builds its own copy from this small picklable recipe.
This module does not import Ray.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Literal

import torch

from acrobat.data import load_dataset, parse_tree, synthetic_trees
from acrobat.data.tree import Tree
from acrobat.data.vocab import UNK, Vocab
from acrobat.errors import AcrobatError, DataError
from acrobat.models import get_model
from acrobat.program import Program

InputFormat = Literal["tree", "tokens"]
"""``"tree"``: the instance is a Tree of word ids; ``"tokens"``: a list of word ids."""

MAX_WORDS = 128
"""Default limit on words per request (SST's longest sentence has 52)."""
MAX_BYTES = 64 * 1024
"""Default limit on a request body, bytes."""


class RequestError(AcrobatError):
    """A request that failed, with its HTTP ``status`` and a short machine-readable ``kind``: rejected before
    the model ran (4xx: ``bad_json``, ``bad_request``, ``malformed_tree``, ``too_large``,
    ``unknown_word``; the message says what is wrong and what to send instead), or the model raised on its
    instance (500: ``model_error`` for an acrobat error, ``internal_error`` for any other). Picklable, so
    it reaches a Ray handle's caller as itself."""

    def __init__(self, status: int, kind: str, message: str):
        self.status = status
        self.kind = kind
        super().__init__(message)

    def __reduce__(self) -> tuple[type, tuple[int, str, str]]:
        return type(self), (self.status, self.kind, str(self))

    @classmethod
    def from_model(cls, exc: Exception) -> RequestError:
        """The 500 of a request whose instance made the model (or the server) raise ``exc``."""
        if isinstance(exc, AcrobatError):
            return cls(500, "model_error", f"the model failed on this request: {exc}")
        return cls(500, "internal_error", f"the server failed on this request: {type(exc).__name__}: {exc}")

    def body(self) -> dict[str, Any]:
        """The JSON error body: ``{"error": kind, "message": ...}``."""
        return {"error": self.kind, "message": str(self)}


@dataclass
class Servable:
    """An acrobat program with the shared parameters it runs with and its request format.

    ``program(instance, *params)`` is one request's answer; ``program.run(instances, *params)`` a batch's.
    ``input`` says what a request holds (a tree, or a sentence as tokens; a ``"tokens"`` model also takes
    a tree and reads its words left to right). ``vocab`` maps words to ids; a word outside it is rejected
    unless it is ``"<unk>"`` itself. Requests over ``max_words`` words or ``max_bytes`` bytes are rejected.
    ``warmup(n, seed)`` makes the replica's warm-up instances (default: synthetic SST-like trees or
    sentences within the vocabulary, :meth:`synthetic`); the program must run on all of them.
    """

    name: str
    program: Program
    params: tuple[Any, ...]
    input: InputFormat
    vocab: Vocab
    description: str = ""
    max_words: int = MAX_WORDS
    max_bytes: int = MAX_BYTES
    example: str = "(3 (2 It) (4 (2 is) (2 good)))"
    warmup: Callable[[int, int], list[Any]] | None = None

    def decode(self, body: bytes) -> Any:
        """The instance a request body holds.

        Raises:
            RequestError: 413 body over ``max_bytes`` or over ``max_words`` words; 400 not JSON, not an
                object with the one field ``tree`` (or, for a ``"tokens"`` model, ``tokens``), or a
                malformed tree (the message gives the column); 422 a word outside the vocabulary.
        """
        if len(body) > self.max_bytes:
            raise RequestError(413, "too_large", f"request body of {len(body)} bytes is over the limit of "
                               f"{self.max_bytes} bytes: send one instance per request")
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RequestError(400, "bad_json", f"request body is not JSON ({exc}); send {self.usage()}") from None
        fields = ("tree",) if self.input == "tree" else ("tokens", "tree")
        if not isinstance(data, dict) or len(data) != 1 or next(iter(data)) not in fields:
            got = f"an object with {sorted(data)}" if isinstance(data, dict) else type(data).__name__
            raise RequestError(400, "bad_request", f"expected {self.usage()}, got {got}")
        if "tree" in data:
            tree = self._tree(data["tree"])
            return tree if self.input == "tree" else tree.tokens()
        return self._tokens(data["tokens"])

    def usage(self) -> str:
        """What a request body looks like, for error messages and ``GET``."""
        tree = f'{{"tree": "{self.example}"}}'
        return tree if self.input == "tree" else f'{{"tokens": ["It", "is", "good"]}} or {tree}'

    def validate(self, instance: Any) -> None:
        """Check an instance given directly (the Python handle): its type, size and word ids.

        Raises:
            RequestError: 400 not a Tree (``"tree"``) or a list of ints (``"tokens"``); 413 over
                ``max_words`` words; 422 a word id outside ``0 .. len(vocab) - 1``.
        """
        if self.input == "tree":
            if not isinstance(instance, Tree):
                raise RequestError(400, "bad_request", f"{self.name} takes a Tree, got {type(instance).__name__}")
            ids = instance.tokens()
        else:
            if not isinstance(instance, list) or not all(isinstance(i, int) for i in instance):
                raise RequestError(400, "bad_request", f"{self.name} takes a list of word ids (ints)")
            ids = instance
        self._check_length(len(ids))
        bad = next((i for i in ids if not 0 <= i < len(self.vocab)), None)
        if bad is not None:
            raise RequestError(422, "unknown_word", f"word id {bad} is outside the vocabulary (0 .. "
                               f"{len(self.vocab) - 1}); id 0 is {UNK!r}")

    def synthetic(self, n: int, seed: int = 0) -> list[Any]:
        """``n`` warm-up instances: ``warmup(n, seed)``, or synthetic SST-like ones with word ids in the
        vocabulary."""
        if self.warmup is not None:
            return self.warmup(n, seed)
        trees = synthetic_trees(n, seed=seed, vocab_size=len(self.vocab))
        return trees if self.input == "tree" else [t.tokens() for t in trees]

    def _tree(self, text: Any) -> Tree:
        if not isinstance(text, str):
            raise RequestError(400, "bad_request", f'"tree" must be a string, e.g. "{self.example}"')
        try:
            tree = parse_tree(text, filename="<request>")
        except DataError as exc:
            raise RequestError(400, "malformed_tree", f"{exc} (a tree is written {self.example})") from None
        leaves = tree.leaves()
        self._check_length(len(leaves))
        for i, leaf in enumerate(leaves):
            leaf.word_id = self._word_id(leaf.word, i)  # type: ignore[arg-type]
        return tree

    def _tokens(self, tokens: Any) -> list[int]:
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise RequestError(400, "bad_request", '"tokens" must be a list of words (strings)')
        if not tokens:
            raise RequestError(400, "bad_request", '"tokens" is empty: send at least one word')
        self._check_length(len(tokens))
        return [self._word_id(t, i) for i, t in enumerate(tokens)]

    def _check_length(self, words: int) -> None:
        if words > self.max_words:
            raise RequestError(413, "too_large", f"{words} words is over the limit of {self.max_words} "
                               "words per request")

    def _word_id(self, word: str, position: int) -> int:
        if word not in self.vocab:
            raise RequestError(422, "unknown_word", f"unknown word {word!r} (word {position + 1}): not in "
                               f"{self.name}'s vocabulary of {len(self.vocab)} words (words are case "
                               f"sensitive); send {UNK!r} for a word outside it")
        return self.vocab.id(word)


def to_json(result: Any) -> Any:
    """A program result as values ``orjson`` writes (``OPT_SERIALIZE_NUMPY``): tensors as numpy arrays (nested
    lists in JSON; a float32 is written as its shortest repr, which reads back to the same float32;
    NaN and infinities as null, JSON having neither), bfloat16 tensors as float lists, tuples as lists.

    Raises:
        TypeError: a value that is not a tensor, number, string, None, or a list/tuple/dict of them.
    """
    if isinstance(result, torch.Tensor):
        return result.tolist() if result.dtype == torch.bfloat16 else result.numpy(force=True)
    if isinstance(result, (list, tuple)):
        return [to_json(r) for r in result]
    if isinstance(result, dict):
        return {str(k): to_json(v) for k, v in result.items()}
    if result is None or isinstance(result, (bool, int, float, str)):
        return result
    raise TypeError(f"cannot send a {type(result).__name__} as JSON: return tensors, numbers or "
                    "lists/tuples/dicts of them")


def json_bytes(body: Any) -> bytes:
    """``body`` (with :func:`to_json` results in it) as JSON bytes (orjson: numpy arrays as nested lists).

    Raises:
        ModuleNotFoundError: orjson is missing (it comes with the ``serve`` extra).
    """
    import orjson  # the serve extra's: imported here so the CLI runs without it

    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


SERVABLE_MODELS = ("treelstm", "mvrnn", "birnn", "stackrnn")
"""The bundled models that read SST text, so a request can carry their instance."""


@dataclass(frozen=True)
class PaperModel:
    """The recipe of a bundled SST model's :class:`Servable`: calling it builds one (in the replica).

    Weights come from ``seed`` (as ``acrobat run`` makes them), the vocabulary from ``data``
    (``acrobat.data.load_dataset``: an SST folder or file, default ``../shared/data/sst`` if present,
    else the synthetic vocabulary). ``hidden`` overrides the size's hidden width (tests use small ones).

    Raises (when called):
        ValueError: a model that does not read SST text (the message lists those that do), or a bad size.
        FileNotFoundError: ``data`` names nothing.
    """

    name: str = "treelstm"
    data: str | None = None
    size: str = "small"
    seed: int = 0
    hidden: int | None = None
    max_words: int = MAX_WORDS

    def __call__(self) -> Servable:
        if self.name not in SERVABLE_MODELS:
            raise ValueError(f"{self.name!r} cannot be served from text requests; serve one of "
                             f"{', '.join(SERVABLE_MODELS)}")
        spec = get_model(self.name)
        ds = load_dataset(self.data, limit=0)
        hidden = self.hidden or spec.hidden(self.size)
        params = spec.make_params(len(ds.vocab), hidden, self.seed).eval()
        source = "SST" if ds.source == "sst" else "synthetic"
        return Servable(self.name, spec.program, (params,), "tree" if self.name in ("treelstm", "mvrnn") else "tokens",
                        ds.vocab, f"{spec.description}; hidden {hidden}, seed {self.seed}, {source} vocabulary of "
                        f"{len(ds.vocab)} words", max_words=self.max_words)


ServableFactory = Callable[[], Servable]
"""A picklable zero-argument callable that builds a Servable (a :class:`PaperModel`, or a module-level
function of the user's): each replica calls it once."""
