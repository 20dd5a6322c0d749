#!/usr/bin/env bash
# A second environment for the Isaac Lab tests on a CPU-only machine: Isaac Lab 3.0.0 kit-less (Newton physics,
# MuJoCo-Warp solver) beside CPU torch 2.13 and this package. Usage: .ci/isaaclab-cpu-env.sh VENV
#
# Isaac Lab 3.0 asks for Python 3.12 and torch 2.11 (CUDA builds only on PyPI, several GB); on CPU it runs on the
# project's Python with CPU torch 2.13, so its wheel and the simulator wheels go in with --no-deps
# --ignore-requires-python, and their small pure-Python needs are named here. mujoco stays at 3.12 (Newton's pin):
# the constraint keeps this package's mujoco-mjx range from pulling 3.17. mujoco-usd-converter (for the tests'
# stand-in robot) asks for mujoco 3.16 but converts with 3.12.
set -euo pipefail
venv=${1:?usage: $0 VENV}
cd "$(dirname "$0")/.."
python3 -m venv "$venv"
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0
echo "mujoco==3.12.0" > "$venv/constraints.txt"
python -m pip install -q --no-deps --ignore-requires-python isaaclab==3.0.0 warp-lang==1.17.0 newton==1.6.1 \
  mujoco==3.12.0 mujoco-warp==3.12.0 usd-exchange==3.0.1 newton-usd-schemas==0.6.0 mujoco-usd-converter==0.8.0
python -m pip install -q -c "$venv/constraints.txt" gymnasium==1.4.0 hydra-core==1.3.8 prettytable trimesh \
  gitpython glfw absl-py 'etils[epath]' pyopengl psutil lazy_loader numpy-stl "tinyobjloader==2.0.0rc13"
python -m pip install -q -c "$venv/constraints.txt" -e '.[dev]'
python - <<'PY'
from importlib.metadata import version
print("isaaclab env:", ", ".join(f"{n} {version(n)}" for n in ("isaaclab", "newton", "mujoco", "torch", "rsl-rl-lib")))
PY
