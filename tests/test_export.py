"""recommended.yaml: complete, round-trips, re-runs, points to the reaching checkpoint; the exported policy acts
as the trained one did."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
import yaml

from sweep.backends.replay import replay_trial
from sweep.contract import TrialConfig
from sweep.ledger import LedgerView, LedgerWriter, Row, read_rows
from sweep.params import trial_params
from sweep.report import export, policy
from tests.helpers import run_in_process, run_module
from tests.replay_table import write_table


def replay_run(tmp_path: Path) -> Path:
    """Two replayed trials written to a run folder (no Ray needed)."""
    table = write_table(tmp_path / "table.json")
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        for trial, (n, h) in enumerate([(128, 16), (64, 8)]):
            cfg = TrialConfig(
                backend="replay",
                profile="recorded",
                num_envs=n,
                num_steps_per_env=h,
                cap_s=1e6,
                backend_options={"table": str(table)},
            )
            replay_trial(
                cfg,
                lambda r: w.append(r) or "continue",
                run_id="x",
                trial=trial,
                price_usd_per_hour=3.6,
                price_label="test",
            )
    return run_dir


def test_yaml_has_the_sections_and_round_trips(tmp_path: Path) -> None:
    path = export.write(replay_run(tmp_path))
    doc = yaml.safe_load(path.read_text())
    for key in ("task", "knobs", "perf_flags", "agent", "versions", "evidence", "trial"):
        assert key in doc, key
    assert doc["knobs"] == {"num_envs": 64, "num_steps_per_env": 8, "num_mini_batches": 4}
    assert doc["agent"]["num_steps_per_env"] == 8 and doc["agent"]["algorithm"]["class_name"] == "PPO"
    assert doc["evidence"]["trial"] == 1 and doc["evidence"]["held_out_success"] >= 0.9
    payback = doc["evidence"]["payback"]  # no baseline ran: the study's spend, no payback, and why
    assert payback["study_usd"] > 0 and payback["note"].startswith("no baseline comparison: the baseline was not run")
    figures = ("study_in_baseline_runs", "saving_per_run_usd", "runs_to_pay_back")
    assert [payback[k] for k in figures] == [None, None, None]
    assert doc["versions"]["rsl-rl-lib"] == "5.5.1"
    assert TrialConfig(**doc["trial"]).validate().num_envs == 64  # the trial section is a complete config
    assert yaml.safe_load(yaml.safe_dump(doc)) == doc


def test_the_agent_section_carries_the_flags_that_act_through_it() -> None:
    stock = export.implied_agent_config(TrialConfig(num_envs=64, num_steps_per_env=8))
    assert stock["check_for_nan"] is True and stock["algorithm"]["class_name"] == "PPO"
    fast = export.implied_agent_config(
        TrialConfig(num_envs=64, num_steps_per_env=8, flags={"fast_finite_check": True, "bf16_update": True})
    )
    assert fast["check_for_nan"] is False and fast["algorithm"]["use_mixed_precision"] is True
    assert fast["algorithm"]["class_name"] == "sweep.perf.ppo:FastPPO"
    assert fast["algorithm"]["perf_flags"]["fast_finite_check"] is True


def test_a_folder_without_its_study_reads_the_config_back_from_the_ledger_mode_included() -> None:
    cfg = TrialConfig(num_envs=64, num_steps_per_env=8, mode="stock", seed=3, flags={"fused_optimizer": True})
    back = export._config_from_params(Row.of({"trial": 0, "state": "reached", "params": trial_params(cfg), "seed": 3}))
    assert back.mode == "stock" and back.seed == 3 and trial_params(back) == trial_params(cfg)


def test_no_yaml_when_nothing_reached(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        w.append(
            Row.of(
                {
                    "trial": 0,
                    "state": "failed",
                    "billable_s": 1.0,
                    "price_usd_per_hour": 1.0,
                    "params": {},
                    "phases_s": {},
                    "env_steps": 0,
                    "reason": "x",
                }
            )
        )
    assert export.write(run_dir) is None


def trained_batch(alg) -> tuple[torch.Tensor, torch.Tensor]:
    """(observations of the trial's last rollout, [n, obs_dim]; the trained actor's deterministic actions)."""
    obs = alg.storage.observations.flatten(0, 1)
    actor = alg.get_policy().eval()
    with torch.inference_mode():
        return obs["policy"].clone(), actor(obs).clone()


def test_recommended_points_to_the_checkpoint_that_reached_the_target(reached_run) -> None:
    run_dir, _ = reached_run
    doc = yaml.safe_load(export.write(run_dir).read_text())
    end = LedgerView(read_rows(run_dir / "ledger.jsonl")).last[3]
    assert end.state == "reached" and end.checkpoint == "trials/0003/checkpoint.pt"
    ckpt = doc["checkpoint"]
    assert ckpt["path"] == end.checkpoint and (run_dir / ckpt["path"]).is_file()
    assert ckpt["held_out_success"] == end.success >= 0.05
    assert ckpt["success_ci95"] == [end.success_lo, end.success_hi] and ckpt["iteration"] == end.iteration
    meta = json.loads((run_dir / "trials" / "0003" / "checkpoint.json").read_text())
    assert meta["reached"] and meta["trial"] == 3
    for key in ("iteration", "env_steps", "success", "success_lo", "success_hi"):  # the row it belongs to
        assert meta[key] == getattr(end, key), key


def test_the_exported_torchscript_acts_as_the_trained_policy(reached_run) -> None:
    run_dir, alg = reached_run
    policy.main([str(run_dir)])
    obs, expected = trained_batch(alg)
    scripted = torch.jit.load(str(run_dir / "exported" / "policy.pt"))
    with torch.inference_mode():
        actions = scripted(obs)
        raw = alg.get_policy().mlp(obs)  # the same MLP without the normalizer
    assert actions.shape == expected.shape and actions.shape[0] == obs.shape[0] > 1
    torch.testing.assert_close(actions, expected, rtol=0, atol=1e-6)
    assert not torch.allclose(raw, expected, atol=1e-3)  # the normalizer matters: leaving it out would be caught


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime is not installed")
def test_the_exported_onnx_acts_as_the_trained_policy(reached_run) -> None:
    import onnxruntime

    run_dir, alg = reached_run
    path = run_dir / "exported" / "policy.onnx"
    if not path.exists():
        policy.main([str(run_dir)])
    obs, expected = trained_batch(alg)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (actions,) = session.run(["actions"], {"obs": obs.numpy()})
    torch.testing.assert_close(torch.from_numpy(actions), expected, rtol=1e-5, atol=1e-5)
    assert not path.with_name("policy.onnx.data").exists()  # one self-contained file


def test_without_the_onnx_packages_torchscript_is_written_and_one_line_says_why(
    reached_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(reached_run[0], run_dir, ignore=shutil.ignore_patterns("exported"))
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # importing it now raises ImportError
    assert policy.main([str(run_dir)]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "onnxscript" in err[0] and "pip install -e '.[onnx]'" in err[0], err
    assert (run_dir / "exported" / "policy.pt").is_file() and not (run_dir / "exported" / "policy.onnx").exists()


def one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_exporting_a_run_where_no_trial_reached_is_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with LedgerWriter(run_dir / "ledger.jsonl") as w:
        w.append(Row.of({"trial": 0, "state": "capped", "billable_s": 1.0, "price_usd_per_hour": 1.0, "params": {},
                         "phases_s": {}, "env_steps": 0, "reason": "x"}))  # fmt: skip
    assert "no trial reached the target" in one_error_line(run_module("sweep.export", str(run_dir), cwd=tmp_path))
    nowhere = run_in_process(policy.main, str(tmp_path / "nowhere"), cwd=tmp_path)  # the real process once, above
    assert "no ledger.jsonl" in one_error_line(nowhere)


def test_exporting_a_run_whose_checkpoint_is_missing_is_one_line(reached_run, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(reached_run[0], run_dir, ignore=shutil.ignore_patterns("exported"))
    (run_dir / "trials" / "0003" / "checkpoint.pt").unlink()
    line = one_error_line(run_module("sweep.export", str(run_dir), cwd=tmp_path))
    assert "checkpoint.pt" in line and "missing" in line and "trial 3" in line
    assert not (run_dir / "exported").exists()


def test_a_replayed_winner_has_no_checkpoint_to_export(tmp_path: Path) -> None:
    run_dir = replay_run(tmp_path)
    assert yaml.safe_load(export.write(run_dir).read_text())["checkpoint"] is None
    assert "saved no checkpoint" in one_error_line(run_in_process(policy.main, str(run_dir), cwd=tmp_path))
