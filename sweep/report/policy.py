"""The winning policy, exported: ``python -m sweep.export reports/<run_id>`` writes the checkpoint that
``recommended.yaml`` names (:mod:`sweep.report.export`) to ``exported/`` in the run folder as rsl-rl's play export
does: the actor with its observation normalizer inside, giving the deterministic action (the mean) for a batch of
concatenated observations. ``policy.pt`` is TorchScript; ``policy.onnx`` is written when the ONNX exporter's packages
are installed (the ``onnx`` extra).
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import Any

from sweep import checkpoints
from sweep.errors import ConfigError, MissingExtraError, require
from sweep.ledger import read_rows
from sweep.report.export import recommended

#: Folder of the run folder the exported policy goes to (as Isaac Lab's play script names it).
EXPORT_DIR = "exported"


def load_policy(run_dir: str | Path, doc: dict[str, Any]) -> Any:
    """The winning actor (rsl-rl ``MLPModel`` with its normalizer), rebuilt from its checkpoint, in eval mode, on CPU.

    ``doc`` is the recommended document: its agent config gives the actor's class and layers, the
    checkpoint's ``checkpoint.json`` the observation and action sizes.
    """
    run_dir = Path(run_dir)
    section = doc.get("checkpoint")
    trial = doc["evidence"]["trial"]
    if not section:
        raise ConfigError(
            f"{run_dir}: the winning trial {trial} saved no checkpoint (replayed, or save_checkpoints=false); "
            f"re-run it with: python -m sweep.trial config={run_dir / 'recommended.yaml'} out=<folder>"
        )
    path = run_dir / section["path"]
    if not path.is_file():
        raise ConfigError(
            f"{path}: the checkpoint of the winning trial {trial} is missing; re-run it with: "
            f"python -m sweep.trial config={run_dir / 'recommended.yaml'} out=<folder>, then export that folder"
        )
    meta = checkpoints.read_meta(run_dir, section["path"])
    return load_actor(doc["agent"], path, meta["obs_dim"], meta["num_actions"], where=str(run_dir))


def load_actor(agent: dict[str, Any], path: Path, obs_dim: int, num_actions: int, where: str = "") -> Any:
    """The actor (rsl-rl ``MLPModel`` with its normalizer) of the rsl-rl checkpoint ``path`` (``actor_state_dict``, as
    ``PPO.save()`` writes it: a trial's checkpoint or rsl-rl's own ``model_<iteration>.pt``), in eval mode, on CPU.

    ``agent``: the rsl-rl agent config it trained with (its actor's class and layers, the observation groups);
    ``obs_dim`` / ``num_actions``: the actor's input and output sizes; ``where`` names the source in an error."""
    import torch
    from rsl_rl.utils import resolve_class
    from tensordict import TensorDict

    actor_class, actor_cfg = resolve_class(dict(agent["actor"]))
    group = agent["obs_groups"]["actor"]
    if len(group) != 1:  # the checkpoint records the concatenated size only
        raise ConfigError(f"{where}: agent.obs_groups.actor: export supports one observation group (got {group})")
    obs = TensorDict({group[0]: torch.zeros(1, obs_dim)}, batch_size=[1])
    actor = actor_class(obs, agent["obs_groups"], "actor", num_actions, **actor_cfg)
    state = torch.load(path, map_location="cpu", weights_only=True)
    actor.load_state_dict(state["actor_state_dict"])
    return actor.eval()


def export_torchscript(actor: Any, path: Path) -> Path:
    """Script the actor as rsl-rl's exporter does (normalizer, MLP, deterministic output) and save it."""
    import torch

    module = actor.as_jit().to("cpu").eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # deprecated in torch, yet what rsl-rl's and Isaac Lab's play scripts write
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(module).save(str(path))
    return path


def export_onnx(actor: Any, path: Path) -> Path:
    """The same module as ONNX (input ``obs`` [batch, obs_dim] -> ``actions`` [batch, num_actions], opset 18)."""
    import contextlib
    import io

    import torch

    for module in ("onnx", "onnxscript"):  # what torch's ONNX exporter needs
        require(module, "onnx")
    model = actor.as_onnx(verbose=False).to("cpu").eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    batch = torch.export.Dim("batch")
    onnx_log = logging.getLogger("torch.onnx")
    level = onnx_log.level
    # The exporter prints its progress and warns about torchvision ops an MLP never uses.
    onnx_log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            torch.onnx.export(
                model,
                model.get_dummy_inputs(),
                str(path),
                export_params=True,
                opset_version=18,
                input_names=model.input_names,
                output_names=model.output_names,
                dynamic_shapes=({0: batch},),
                dynamo=True,
                external_data=False,  # one self-contained file (the weights are a few hundred KB)
                verbose=False,
            )
    finally:
        onnx_log.setLevel(level)
    return path


def export_policy(run_dir: str | Path) -> tuple[dict[str, Any], list[Path]]:
    """Write the winner's policy into ``<run_dir>/exported/``; returns (the recommended document, files written).

    Bad input (no ledger, no trial reached the target, the checkpoint missing) raises ConfigError;
    a missing ONNX package skips ``policy.onnx`` with one line on stderr.
    """
    run_dir = Path(run_dir)
    if not (run_dir / "ledger.jsonl").is_file():
        raise ConfigError(f"{run_dir}: no ledger.jsonl here; give a run folder written by sweep.run or sweep.trial")
    doc = recommended(run_dir, read_rows(run_dir / "ledger.jsonl"))
    if doc is None:
        raise ConfigError(f"{run_dir}: no trial reached the target, so there is no policy to export")
    actor = load_policy(run_dir, doc)
    out = run_dir / EXPORT_DIR
    written = [export_torchscript(actor, out / "policy.pt")]
    try:
        written.append(export_onnx(actor, out / "policy.onnx"))
    except MissingExtraError as exc:
        print(f"sweep.export: policy.onnx skipped: {exc}", file=sys.stderr)
    return doc, written


def main(argv: list[str]) -> int:
    """``python -m sweep.export reports/<run_id>``: the winning policy as TorchScript (and ONNX)."""
    if len(argv) != 1:
        raise ConfigError("usage: python -m sweep.export reports/<run_id>")
    doc, written = export_policy(argv[0])
    ckpt = doc["checkpoint"]
    lo, hi = ckpt["success_ci95"]
    print(
        f"{ckpt['path']} (trial {ckpt['trial']}, iteration {ckpt['iteration']}): held-out success "
        f"{ckpt['held_out_success']:.3f} (95% CI {lo:.3f}-{hi:.3f}, {doc['evidence']['eval_episodes']} episodes)"
    )
    for path in written:
        print(path)
    return 0
