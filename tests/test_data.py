"""Tests of acrobat.data: the SST parser and loader, vocabs, synthetic trees, datasets."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat.data import (
    Dataset,
    Tree,
    Vocab,
    find_sst_dir,
    load_dataset,
    load_trees,
    parse_tree,
    sst_vocab,
    synthetic_trees,
    synthetic_vocab,
)
from acrobat.data import dataset as dataset_module
from acrobat.data import sst
from acrobat.data.sst import format_tree
from acrobat.errors import DataError

EXAMPLE = "(3 (2 It) (4 (2 's) (2 good)))"
GOOD = "(2 (2 a) (3 b))"
REAL_SST = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "sst"


def nodes(tree: Tree) -> list[Tree]:
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if not node.is_leaf:
            stack += [node.left, node.right]
    return out


def assert_strictly_binary(tree: Tree) -> None:
    for node in nodes(tree):
        assert (node.left is None) == (node.right is None)
        assert 0 <= node.label <= 4
        if node.is_leaf:
            assert node.word and node.word_id >= 0
        else:
            assert node.word is None and node.word_id == -1
    assert len(nodes(tree)) == 2 * len(tree.leaves()) - 1


# --- parsing ---------------------------------------------------------------


def test_parse_example_structure() -> None:
    vocab = Vocab.build(["It", "'s", "good"])
    tree = parse_tree(EXAMPLE, vocab)
    assert tree.label == 3 and tree.word is None and tree.word_id == -1
    assert (tree.left.label, tree.left.word) == (2, "It")
    assert tree.right.label == 4 and not tree.right.is_leaf
    assert [leaf.word for leaf in tree.leaves()] == ["It", "'s", "good"]
    assert [leaf.label for leaf in tree.leaves()] == [2, 2, 2]
    assert tree.tokens() == [vocab.id("It"), vocab.id("'s"), vocab.id("good")]
    assert tree.size() == 2 * 3 - 1 == len(nodes(tree))
    assert tree.height() == 2
    assert_strictly_binary(tree)


def test_parse_without_vocab_gives_word_id_zero() -> None:
    assert parse_tree(EXAMPLE).tokens() == [0, 0, 0]


@pytest.mark.parametrize("word", ["-LRB-", "'s", "fully-written", "1\\/2", "8\xa01\\/2", "é"])
def test_words_may_hold_any_non_space_non_paren_character(word: str) -> None:
    tree = parse_tree(f"(1 (2 {word}) (3 x))")
    assert tree.left.word == word


def test_spacing_and_line_end_are_free() -> None:
    tree = parse_tree("  (3(2 It)\t(4 (2 's)(2  good) ) )  \r\n")
    assert format_tree(tree) == EXAMPLE


@pytest.mark.parametrize("shape", ["right", "left"])
def test_deep_trees_parse_without_recursion(shape: str) -> None:
    depth = 1000
    if shape == "right":
        line = "(2 (2 w) " * depth + "(2 w)" + ")" * depth
    else:
        line = "(2 " * depth + "(2 w)" + " (2 w))" * depth
    tree = parse_tree(line)
    assert tree.height() == depth
    assert len(tree.leaves()) == depth + 1
    assert format_tree(tree) == line  # formats without recursion too


@pytest.mark.parametrize("word", [None, "", "two words", "a(b", "tab\there"])
def test_format_tree_rejects_a_leaf_without_an_sst_word(word) -> None:
    with pytest.raises(ValueError, match="not an SST word"):
        format_tree(Tree(1, left=Tree(2, word="ok", word_id=1), right=Tree(2, word=word, word_id=2)))


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_format_tree_round_trips(seed: int) -> None:
    vocab = synthetic_vocab(500)
    for tree in synthetic_trees(4, seed=seed, vocab_size=500):
        again = parse_tree(format_tree(tree), vocab)
        assert format_tree(again) == format_tree(tree)
        assert again.tokens() == tree.tokens()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="() 012345ab\t", max_size=40).map(lambda t: (t, False)) | st.integers(0, 2**32 - 1).map(
    lambda s: (format_tree(synthetic_trees(1, seed=s, vocab_size=50)[0]), True)))
def test_fast_path_agrees_with_the_error_reporting_parser(case: tuple[str, bool]) -> None:
    """parse_tree's fast path takes every SST line and gives the tree the full parser gives; where it gives
    up (anything unusual, an error included) parse_tree runs the full parser, which reports the error."""
    text, sst_line = case
    vocab = synthetic_vocab(50)
    fast = sst._parse_well_formed(text, vocab)
    assert fast is not None or not sst_line
    if fast is not None:
        parser = sst._Parser(vocab, "<t>", 1)
        for match in sst._TOKEN.finditer(text):
            parser.token(match.group(), match.start() + 1)
        slow = parser.end()  # raises DataError if the fast path took a malformed line
        assert format_tree(fast) == format_tree(slow) and fast.tokens() == slow.tokens()


# --- errors: file:line:col of the offending character ------------------------

BAD_LINES = [
    # (line, 1-based column, what the message says)
    ("(3 (2 It) (4 (2 's) (2 good))", 1, "missing ')'"),
    ("(3 (2 a) (2 (2 b) (2 c)", 10, "missing ')'"),
    ("(2 a))", 6, "extra ')'"),
    (")", 1, "extra ')'"),
    ("(x a)", 2, "expected an integer label 0-4"),
    ("((2 a) (2 b))", 2, "expected an integer label 0-4"),
    ("(2.5 a)", 2, "expected an integer label 0-4"),
    ("(7 a)", 2, "label 7 outside 0-4"),
    ("(2 (-1 a) (2 b))", 5, "label -1 outside 0-4"),
    ("(2 (2 a) (2 b) (2 c))", 16, "strictly binary"),
    ("(2 (2 (2 a) (2 b)))", 19, "one subtree"),
    ("(2 )", 4, "leaf with no word"),
    ("(2 (2 a) (1))", 12, "leaf with no word"),
    ("()", 2, "empty tree"),
    ("(2 (2 a) ())", 11, "empty tree"),
    ("(2 a) b", 7, "trailing text 'b'"),
    ("(2 a) (2 b)", 7, "trailing text '('"),
    ("(2 a b)", 6, "second word 'b'"),
    ("(2 (2 a) b)", 10, "got the word 'b'"),
    ("(2 a (2 b))", 6, "expected ')' after the word 'a'"),
    ("a (2 b)", 1, "expected '(' to start a tree"),
    ("", 1, "empty line"),
    (" \t ", 1, "empty line"),
]


@pytest.mark.parametrize(("bad", "col", "message"), BAD_LINES)
def test_bad_line_in_file_names_file_line_and_column(tmp_path: Path, bad: str, col: int, message: str) -> None:
    path = tmp_path / "trees.txt"
    path.write_text(f"{GOOD}\n{EXAMPLE}\n{bad}\n{GOOD}\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_trees(path)
    err = info.value
    assert str(err).startswith(f"{path}:3:{col}: ")
    assert message in str(err)
    assert (err.filename, err.line, err.col) == (str(path), 3, col)


def test_parse_tree_reports_given_filename_and_line() -> None:
    with pytest.raises(DataError, match=r"^x\.txt:7:2: expected an integer label"):
        parse_tree("(a b)", filename="x.txt", lineno=7)


def test_trailing_blank_lines_are_ignored_and_crlf_accepted(tmp_path: Path) -> None:
    path = tmp_path / "trees.txt"
    path.write_bytes(f"{GOOD}\r\n{EXAMPLE}\r\n\r\n\n".encode())
    assert [format_tree(t) for t in load_trees(path)] == [GOOD, EXAMPLE]


def test_load_trees_limit(tmp_path: Path) -> None:
    path = tmp_path / "trees.txt"
    path.write_text(f"{GOOD}\n{EXAMPLE}\n(bad\n", encoding="utf-8")
    assert [format_tree(t) for t in load_trees(path, limit=2)] == [GOOD, EXAMPLE]
    assert load_trees(path, limit=0) == []
    with pytest.raises(ValueError):
        load_trees(path, limit=-1)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_trees(tmp_path / "nope.txt")


def test_sst_vocab_holds_every_word(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(f"{EXAMPLE}\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("(2 (2 good) (2 -LRB-))\n", encoding="utf-8")
    vocab = sst_vocab([tmp_path / "a.txt", tmp_path / "b.txt"])
    assert vocab == Vocab.build(["It", "'s", "good", "-LRB-"])


# --- vocab -------------------------------------------------------------------


def test_vocab_build_is_sorted_with_unk_zero() -> None:
    vocab = Vocab.build(["b", "a", "c", "a", "<unk>"])
    assert len(vocab) == 4
    assert [vocab.word(i) for i in range(4)] == ["<unk>", "a", "b", "c"]
    assert [vocab.id(w) for w in ["<unk>", "a", "b", "c", "zzz"]] == [0, 1, 2, 3, 0]
    assert "a" in vocab and "zzz" not in vocab
    assert vocab == Vocab.build(["c", "b", "a"])
    assert vocab != Vocab(["c", "b", "a"])


def test_vocab_keeps_constructor_order_and_rejects_bad_input() -> None:
    vocab = Vocab(["z", "y"])
    assert (vocab.id("z"), vocab.id("y")) == (1, 2)
    with pytest.raises(ValueError):
        Vocab(["a", "a"])
    with pytest.raises(ValueError):
        Vocab(["<unk>"])
    for bad_id in (-1, 3):
        with pytest.raises(IndexError):
            vocab.word(bad_id)


# --- synthetic trees ---------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic() -> list[Tree]:
    return synthetic_trees(5000, seed=0)


def test_synthetic_lengths_are_calibrated_to_sst(synthetic: list[Tree]) -> None:
    lengths = [len(tree.leaves()) for tree in synthetic]
    assert 18.0 <= statistics.mean(lengths) <= 20.0
    assert 17 <= statistics.median(lengths) <= 19
    assert 45 <= max(lengths) <= 52
    assert min(lengths) >= 1


def test_synthetic_heights_are_sst_like(synthetic: list[Tree]) -> None:
    heights = [tree.height() for tree in synthetic]
    at_19 = [tree.height() for tree in synthetic if len(tree.leaves()) == 19]
    assert 8.5 <= statistics.mean(heights) <= 11.0
    assert 8.0 <= statistics.mean(at_19) <= 11.0
    assert max(heights) <= 51


def test_synthetic_trees_are_strictly_binary_with_zipf_words(synthetic: list[Tree]) -> None:
    vocab = synthetic_vocab()
    for tree in synthetic:
        assert_strictly_binary(tree)
    leaves = [leaf for tree in synthetic for leaf in tree.leaves()]
    assert all(1 <= leaf.word_id < 16000 and vocab.id(leaf.word) == leaf.word_id for leaf in leaves)
    counts = Counter(leaf.word_id for leaf in leaves)
    assert 0.08 < counts[1] / len(leaves) < 0.12  # Zipf: P(1) = 1 / H(15999) ~ 0.097
    assert counts[1] > counts[2] > counts[10] > counts[100]
    labels = Counter(node.label for tree in synthetic[:500] for node in nodes(tree))
    assert set(labels) == {0, 1, 2, 3, 4}


def test_synthetic_trees_are_deterministic_per_seed(synthetic: list[Tree]) -> None:
    first = [format_tree(t) for t in synthetic[:50]]
    assert [format_tree(t) for t in synthetic_trees(50, seed=0)] == first
    assert [format_tree(t) for t in synthetic_trees(50, seed=1)] != first


def test_synthetic_vocab_maps_w_i_to_i() -> None:
    vocab = synthetic_vocab(100)
    assert len(vocab) == 100
    assert all(vocab.id(f"w{i}") == i for i in range(1, 100))
    assert vocab.word(0) == "<unk>" and vocab.id("w100") == 0
    assert max(t for tree in synthetic_trees(50, vocab_size=100) for t in tree.tokens()) <= 99


def test_synthetic_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        synthetic_trees(-1)
    with pytest.raises(ValueError):
        synthetic_vocab(1)
    assert synthetic_trees(0) == []


# --- datasets ----------------------------------------------------------------


@pytest.fixture()
def sst_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "sst"
    folder.mkdir()
    (folder / "train.txt").write_text(f"{EXAMPLE}\n(1 (2 bad) (0 film))\n", encoding="utf-8")
    (folder / "dev.txt").write_text(f"{GOOD}\n(2 (2 a) (2 dull))\n(4 (2 new) (2 words))\n", encoding="utf-8")
    (folder / "test.txt").write_text("(2 (2 unseen) (2 a))\n", encoding="utf-8")
    return folder


def test_load_dataset_from_folder(sst_folder: Path) -> None:
    dev = load_dataset(sst_folder, split="dev")
    assert isinstance(dev, Dataset) and dev.source == "sst"
    assert [format_tree(t) for t in dev.trees][:1] == [GOOD]
    assert dev.vocab == Vocab.build("It 's good bad film a b dull new words".split())
    assert dev.description == f"SST dev ({sst_folder / 'dev.txt'}), 3 trees, vocab 11"
    train = load_dataset(str(sst_folder), split="train", limit=1)
    assert len(train.trees) == 1 and train.vocab == dev.vocab
    test = load_dataset(sst_folder, split="test")
    assert test.trees[0].tokens() == [0, dev.vocab.id("a")]
    assert load_dataset(sst_folder / "dev.txt").vocab == dev.vocab


def test_load_dataset_missing_paths_are_named(sst_folder: Path) -> None:
    with pytest.raises(FileNotFoundError, match="valid.txt"):
        load_dataset(sst_folder, split="valid")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_dataset(sst_folder / "nowhere")


def test_load_dataset_falls_back_to_synthetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(dataset_module.SST_DIR_ENV, str(tmp_path / "nowhere"))
    monkeypatch.setattr(dataset_module, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    assert find_sst_dir() is None
    data = load_dataset()
    assert data.source == "synthetic" and len(data.trees) == 1101
    assert data.description == (
        "synthetic SST-like trees (seed 0, SST folder not found), 1101 trees, vocab 16000"
    )
    assert data.vocab == synthetic_vocab()
    assert [format_tree(t) for t in data.trees[:20]] == [format_tree(t) for t in synthetic_trees(20, seed=0)]
    assert len(load_dataset(limit=7).trees) == 7


def test_find_sst_dir_order(sst_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    beside_repo = tmp_path / "shared" / "data" / "sst"
    beside_repo.mkdir(parents=True)
    (beside_repo / "dev.txt").write_text(f"{GOOD}\n", encoding="utf-8")
    monkeypatch.setattr(dataset_module, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.chdir(sst_folder)
    monkeypatch.delenv(dataset_module.SST_DIR_ENV, raising=False)
    assert find_sst_dir() == beside_repo.resolve()
    monkeypatch.setenv(dataset_module.SST_DIR_ENV, str(sst_folder))
    assert find_sst_dir() == sst_folder
    assert load_dataset().description.startswith(f"SST dev ({sst_folder / 'dev.txt'}), 3 trees")


# --- the real SST data, when present ------------------------------------------


@pytest.fixture(scope="module")
def real_sst() -> Path:
    if not (REAL_SST / "dev.txt").is_file() or not (REAL_SST / "train.txt").is_file():
        pytest.skip(f"SST data not found at {REAL_SST}")
    return REAL_SST


def test_real_sst_dev_parses_strictly_binary(real_sst: Path) -> None:
    data = load_dataset(real_sst, split="dev")
    assert data.source == "sst" and len(data.trees) == 1101
    for tree in data.trees:
        assert_strictly_binary(tree)
    assert all(token != 0 for tree in data.trees for token in tree.tokens())


def test_real_sst_train_length_stats(real_sst: Path) -> None:
    lengths = [len(tree.leaves()) for tree in load_trees(real_sst / "train.txt")]
    assert len(lengths) == 8544
    assert round(statistics.mean(lengths), 1) == 19.1
    assert statistics.median(lengths) == 18
    assert max(lengths) == 52
