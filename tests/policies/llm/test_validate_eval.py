"""`schemashift validate` on an `eval --out` folder: its episodes re-grade and its `eval.json`
agrees with them; a temperature edited into `eval.json` (a setting recorded but never applied)
is the difference."""

from __future__ import annotations

import json
from pathlib import Path

from openai_server import OpenAIServer
from test_api_policy import oracle_reply

from schemashift.cli import main


def test_an_evaluation_folder_is_verified_and_a_tampered_temperature_is_not(tmp_path: Path, capsys) -> None:
    out = tmp_path / "eval"
    with OpenAIServer(oracle_reply) as server:
        args = [
            "eval",
            "--policy",
            "openai:m",
            "--base-url",
            server.base_url,
            "--scenarios",
            "E1_onboard_new_hire",
        ]
        assert main([*args, "--seeds", "0-1", "--out", str(out), "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["validate", str(out)]) == 0
    assert "settings of eval.json agree" in capsys.readouterr().out
    # a folder above it (the workflow's results/) checks the evaluation's pin beside its set
    assert main(["validate", str(tmp_path)]) == 0
    assert "settings of eval/eval.json agree" in capsys.readouterr().out

    original = (out / "eval.json").read_text()
    pin = json.loads(original)
    generation = json.loads(pin["invocation"]["generation_config"])
    assert generation["temperature"] == 0.0
    pin["invocation"]["generation_config"] = json.dumps({**generation, "temperature": 0.7}, sort_keys=True)
    (out / "eval.json").write_text(json.dumps(pin))
    assert main(["validate", str(out)]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith(f"difference: {out / 'eval.json'}: generation_config ")
    assert '"temperature": 0.7' in printed and '\\"temperature\\": 0.0' in printed

    pin = json.loads(original)
    pin["invocation"]["seeds"] = [0, 1, 2]
    (out / "eval.json").write_text(json.dumps(pin))
    assert main(["validate", str(tmp_path)]) == 1
    assert "declare 3 cells, the records hold 2" in capsys.readouterr().out
