"""A trained policy as plain tensors, so that a simulator can run it on its own device without Python per step.

A held-out pass steps the policy and the simulator once per control step from Python. For the embedded MJX task on a
GPU the dispatch of each step costs a large share of a 256-episode pass beside the same simulation inside one device
loop (docs/decisions/0007-pass-in-the-simulator-loop.md): so an env that can run a policy itself
(``TaskEnv.policy_steps``) gets it as an :class:`MlpPolicy` instead. Only rsl-rl's plain MLP actor (``MLPModel``:
optional empirical observation normalization, linear layers with one activation between them, a Gaussian head whose
deterministic output is the MLP's) is recognized; anything else gives None and is stepped from Python as before.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

#: Activations an env's own loop can apply exactly as torch does (rsl-rl's names).
ACTIVATIONS = {"elu": torch.nn.ELU, "relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid}


@dataclass(frozen=True)
class PolicyShape:
    """What a compiled policy loop depends on besides the env: hidden layer widths, the activation and the control
    steps per call (the env adds its own observation and action widths)."""

    hidden: tuple[int, ...]
    activation: str
    steps: int


def planned(plan: dict, num_envs: int) -> PolicyShape | None:
    """The policy loop that a compile plan's shape of ``num_envs`` envs is for: the plan's ``policy`` when the shape
    is its held-out panel (``panel`` envs), else None (a training env's shape)."""
    p = plan.get("policy")
    if not p or num_envs != plan.get("panel"):
        return None
    return PolicyShape(tuple(int(w) for w in p["hidden"]), str(p["activation"]), int(p["steps"]))


@dataclass(frozen=True)
class MlpPolicy:
    """A deterministic MLP policy: ``actions = mlp((obs - mean) / (std + eps))``, ``activation`` after every layer
    but the last. Tensors are the module's own (no copy), on its device; ``layers`` are (weight (out, in), bias)."""

    mean: torch.Tensor
    std: torch.Tensor
    eps: float
    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    activation: str

    def shape(self, steps: int) -> PolicyShape:
        """The shape of a loop of ``steps`` control steps of this policy."""
        return PolicyShape(tuple(int(w.shape[0]) for w, _ in self.layers[:-1]), self.activation, steps)

    def copy(self) -> MlpPolicy:
        """The same policy on tensors of its own: what a pass run beside training evaluates while the module's
        tensors go on being trained."""
        layers = tuple((w.clone(), b.clone()) for w, b in self.layers)
        return replace(self, mean=self.mean.clone(), std=self.std.clone(), layers=layers)

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """The actions, computed from the tensors alone (what an env's own loop must reproduce)."""
        x = (obs - self.mean) / (self.std + self.eps)
        act = ACTIVATIONS[self.activation]()
        for i, (weight, bias) in enumerate(self.layers):
            x = torch.nn.functional.linear(x, weight, bias)
            if i < len(self.layers) - 1:
                x = act(x)
        return x


def mlp_policy(policy: torch.nn.Module) -> MlpPolicy | None:
    """``policy`` as an :class:`MlpPolicy` when it is rsl-rl's plain MLP actor reading the 'policy' observations;
    None otherwise."""
    mlp = getattr(policy, "mlp", None)
    if getattr(policy, "obs_groups", None) != ["policy"] or not isinstance(mlp, torch.nn.Sequential):
        return None
    head = getattr(policy, "distribution", None)
    if head is not None and type(head).__name__ != "GaussianDistribution":  # its deterministic output is the mean
        return None
    linear, between = list(mlp)[0::2], list(mlp)[1::2]
    name = next((n for n, cls in ACTIVATIONS.items() if between and type(between[0]) is cls), None)
    if (
        len(mlp) % 2 == 0
        or not all(type(m) is torch.nn.Linear and m.bias is not None for m in linear)
        or (between and (name is None or not all(type(m) is ACTIVATIONS[name] for m in between)))
        or any(isinstance(m, torch.nn.ELU) and m.alpha != 1.0 for m in between)
    ):
        return None
    norm, width, device = getattr(policy, "obs_normalizer", None), linear[0].in_features, linear[0].weight.device
    if isinstance(norm, torch.nn.Identity):
        mean, std, eps = torch.zeros(width, device=device), torch.ones(width, device=device), 0.0
    elif hasattr(norm, "_mean") and hasattr(norm, "_std") and isinstance(getattr(norm, "eps", None), float):
        mean, std, eps = norm._mean.reshape(-1), norm._std.reshape(-1), norm.eps
    else:
        return None
    layers = tuple((m.weight.detach(), m.bias.detach()) for m in linear)
    return MlpPolicy(mean.detach(), std.detach(), eps, layers, name or "elu")
