"""`acrobat serve` without starting Ray: --help answers, a port in use is a clear error (the command serving
over HTTP and stopping on Ctrl-C is tested in test_serve.py, beside the other Ray Serve tests)."""

from __future__ import annotations

import pytest

from acrobat.cli import main


def test_help_answers(capsys):
    with pytest.raises(SystemExit) as info:
        main(["serve", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--max-batch-size" in out and "--batch-wait-ms" in out and "--num-replicas" in out and "Ctrl-C" in out


def test_bad_port_is_a_clear_error(capsys):
    pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install -e '.[serve]')")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert main(["serve", "treelstm", "--port", str(s.getsockname()[1])]) == 2
    assert "in use" in capsys.readouterr().err
