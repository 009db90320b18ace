"""acrobat.serve without Ray: request decoding and its errors, JSON results, options, the load test's verdicts."""

from __future__ import annotations

import json

import orjson
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from acrobat.data import synthetic_trees
from acrobat.data.sst import format_tree
from acrobat.serve.servable import PaperModel, RequestError, json_bytes, to_json

SMALL = PaperModel("treelstm", hidden=8, max_words=60)


@pytest.fixture(scope="module")
def servable():
    return SMALL()


def body(obj) -> bytes:
    return json.dumps(obj).encode()


def trees_in(vocab, n: int, seed: int):
    """Synthetic trees whose words are ``vocab``'s (SST's when ../shared is there, else the synthetic one)."""
    trees = synthetic_trees(n, seed=seed, vocab_size=len(vocab))
    for tree in trees:
        for leaf in tree.leaves():
            leaf.word = vocab.word(leaf.word_id)
    return trees


def test_decode_gives_the_instance_parse_tree_gives(servable):
    for tree in trees_in(servable.vocab, 20, seed=3):
        got = servable.decode(body({"tree": format_tree(tree)}))
        assert format_tree(got) == format_tree(tree) and got.tokens() == tree.tokens()


def test_sentence_models_take_tokens_or_a_tree():
    s = PaperModel("birnn", hidden=8)()
    tree = trees_in(s.vocab, 1, seed=0)[0]
    words = [leaf.word for leaf in tree.leaves()]
    assert s.decode(body({"tokens": words})) == tree.tokens() == s.decode(body({"tree": format_tree(tree)}))
    with pytest.raises(RequestError, match="empty") as info:
        s.decode(body({"tokens": []}))
    assert info.value.status == 400


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="() 0123456789abw\t", max_size=60))
def test_any_text_is_a_tree_or_a_4xx(servable, text):
    """Whatever a client sends as a tree, decode returns a valid instance or raises a 4xx RequestError."""
    try:
        tree = servable.decode(body({"tree": text}))
    except RequestError as exc:
        assert 400 <= exc.status < 500 and exc.kind in {"malformed_tree", "unknown_word", "too_large"}
        assert json.loads(json_bytes(exc.body()))["message"]
        return
    servable.validate(tree)


@pytest.mark.parametrize("raw,status,kind", [
    (b"\xff\xfe", 400, "bad_json"),
    (b"[1, 2]", 400, "bad_request"),
    (body({"tree": 5}), 400, "bad_request"),
    (body({"tokens": ["w1"]}), 400, "bad_request"),  # a tree model takes trees only
    (body({"tree": "(2 w1)", "extra": 1}), 400, "bad_request"),
    (body({"tree": "(9 w1)"}), 400, "malformed_tree"),
])
def test_malformed_requests(servable, raw, status, kind):
    with pytest.raises(RequestError) as info:
        servable.decode(raw)
    assert (info.value.status, info.value.kind) == (status, kind)


def test_validate_checks_handle_instances(servable):
    with pytest.raises(RequestError, match="outside the vocabulary"):
        tree = synthetic_trees(1, seed=0, vocab_size=len(servable.vocab))[0]
        tree.leaves()[0].word_id = len(servable.vocab)
        servable.validate(tree)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(width=32, min_value=-2.0 ** 100, max_value=2.0 ** 100), min_size=1, max_size=40))
def test_results_read_back_exactly(values):
    """A float32 result written as JSON reads back to the same float32 values."""
    t = torch.tensor(values, dtype=torch.float32)
    back = orjson.loads(json_bytes({"result": to_json((t, [t * 2]))}))["result"]
    assert torch.equal(torch.tensor(back[0], dtype=torch.float32), t)
    assert torch.equal(torch.tensor(back[1][0], dtype=torch.float32), t * 2)


def test_non_finite_values_are_null():
    """JSON has no NaN or Infinity: they are written as null."""
    back = orjson.loads(json_bytes({"r": to_json(torch.tensor([1.0, float("nan"), float("inf")]))}))["r"]
    assert back == [1.0, None, None]


def test_to_json_rejects_other_objects():
    with pytest.raises(TypeError, match="cannot send"):
        to_json(object())


def test_model_errors_are_500s_that_pickle():
    import pickle

    from acrobat.errors import InstanceError

    err = RequestError.from_model(InstanceError("instance 0: boom", 0))
    again = pickle.loads(pickle.dumps(err))
    assert (again.status, again.kind, str(again)) == (500, "model_error", str(err))
    assert RequestError.from_model(KeyError("x")).kind == "internal_error"


def test_paper_model_rejects_generated_models():
    with pytest.raises(ValueError, match="cannot be served"):
        PaperModel("drnn")()


def _step(server: str, rate: float, p99: float, ok: bool = True):
    from acrobat.serve.load import Step

    latencies = sorted([p99 / 2] * 98 + [p99] * 2)
    return Step(server, rate, 100, 100 if ok else 99, 0 if ok else 1, 0, 1.0, latencies, [1.0] * 100, [2.0] * 100,
                batch_sizes={1: 10, 3: 5, 17: 2}, cpu={g: 0.1 for g in ("replica:per-instance", "replica:acrobat",
                                                                         "ingress", "ray", "client")})


def test_held_rates_and_the_gap_to_refine():
    from acrobat.serve.load import LoadReport, LoadSettings, _next_gap
    from acrobat.serve.load_report import headline, markdown

    steps = [_step("per-instance", 50, 20), _step("per-instance", 100, 80), _step("per-instance", 200, 900),
             _step("acrobat", 50, 20), _step("acrobat", 100, 30), _step("acrobat", 200, 45, ok=False),
             _step("acrobat", 400, 49)]
    assert [s.held for s in steps] == [True, False, False, True, True, False, True]
    rep = LoadReport(LoadSettings(), "data", "haproxy", {g: 0.0 for g in steps[0].cpu}, 0.1, steps,
                     {"cpu": "cpu", "cores": 2}, {"runs": 3, "seconds": 1.0, "tuned": True},
                     {"runs": 9, "compiles": 0})
    assert (rep.held("per-instance"), rep.held("acrobat")) == (50, 400)
    assert _next_gap(steps, "per-instance") == (50, 100)
    assert _next_gap(steps, "acrobat") is None  # nothing missed above its highest held rate
    assert "8.0x" in headline(rep) and "Capacity" not in headline(rep)
    for server, answered in (("per-instance", 50), ("acrobat", 150)):
        over = _step(server, 0, 4000, ok=False)
        over.ok, over.duration_s, over.closed_loop = answered, 1.0, True
        rep.steps.append(over)
    assert "per-instance answers 50/s, acrobat 150/s (3.0x" in headline(rep)
    table = markdown(rep)
    assert table.count("\n| per-instance |") == 4 and "1:10 2-3:5 16-31:2" in table
    assert "| acrobat | capacity (64 in flight) | 150 |" in table


def test_load_settings_reject_bad_values():
    from acrobat.serve.load import LoadSettings

    with pytest.raises(ValueError, match="rates"):
        LoadSettings(rates=(0,))
    with pytest.raises(ValueError, match="positive"):
        LoadSettings(slo_ms=0)


def test_serve_options_reject_bad_values():
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install -e '.[serve]')")
    from acrobat.serve import ServeOptions

    with pytest.raises(ValueError, match="max_batch_size"):
        ServeOptions(max_batch_size=0)
    with pytest.raises(ValueError, match="batches never fill"):
        ServeOptions(max_batch_size=8, max_ongoing_requests=4)


def test_deploying_more_replicas_than_cpus_is_an_error_not_a_hang():
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install -e '.[serve]')")
    from acrobat.serve import LocalServe, ServeOptions

    server = LocalServe(num_cpus=2)  # not started: the check comes first
    with pytest.raises(ValueError, match="wait for the rest forever"):
        server.deploy({"a": (SMALL, ServeOptions(num_replicas=2)), "b": (SMALL, ServeOptions())})
