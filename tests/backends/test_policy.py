"""rsl-rl's MLP actor as plain tensors: recognized, computing the module's own actions; anything else left alone."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from sweep.backends.policy import MlpPolicy, PolicyShape, mlp_policy, planned


def actor(activation: str = "elu", normalized: bool = True) -> torch.nn.Module:
    from rsl_rl.models import MLPModel

    obs = TensorDict({"policy": torch.zeros(4, 50)}, batch_size=[4])
    distribution = {"class_name": "GaussianDistribution", "init_std": 1.0}
    model = MLPModel(obs, {"actor": ["policy"]}, "actor", 12, [32, 16], activation, normalized, distribution)
    if normalized:  # statistics of its own, as after training
        model.obs_normalizer.update(torch.randn(64, 50) * 3 + 1)
    return model.eval()


@pytest.mark.parametrize(("activation", "normalized"), [("elu", True), ("tanh", False)])
def test_the_actor_as_tensors_computes_its_actions(activation: str, normalized: bool) -> None:
    model = actor(activation, normalized)
    mlp = mlp_policy(model)
    assert isinstance(mlp, MlpPolicy) and mlp.activation == activation
    assert mlp.shape(50) == PolicyShape((32, 16), activation, 50)
    obs = torch.randn(8, 50) * 2
    with torch.inference_mode():
        assert torch.allclose(mlp(obs), model(TensorDict({"policy": obs}, batch_size=[8])), atol=1e-6)


def test_anything_but_a_plain_mlp_actor_is_left_to_python() -> None:
    assert mlp_policy(torch.nn.Identity()) is None
    assert mlp_policy(actor("selu")) is None  # an activation the env's loop does not apply
    odd = actor()
    odd.obs_groups = ["policy", "extra"]
    assert mlp_policy(odd) is None


def test_a_plans_panel_shape_compiles_its_policy_loop_and_no_other_shape_does() -> None:
    plan = {"panel": 256, "policy": {"hidden": [128, 128, 128], "activation": "elu", "steps": 50}}
    assert planned(plan, 256) == PolicyShape((128, 128, 128), "elu", 50)
    assert planned(plan, 4096) is None
    assert planned({"panel": 256}, 256) is None  # an older plan: the panel's step, as a training env's


def test_a_copy_keeps_the_weights_it_was_taken_with_while_the_module_trains() -> None:
    model = actor()
    snapshot = mlp_policy(model).copy()
    obs = torch.randn(8, 50)
    with torch.inference_mode():
        before = mlp_policy(model)(obs)
    with torch.no_grad():  # an optimizer step and new observation statistics, in place
        model.mlp[0].weight.add_(1.0)
        model.obs_normalizer._mean.add_(1.0)
    with torch.inference_mode():
        assert torch.equal(snapshot(obs), before)
        assert not torch.allclose(mlp_policy(model)(obs), before)
