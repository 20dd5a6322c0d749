"""A stand-in asset root for Isaac Lab's ANYmal-D velocity tasks, for machines that cannot reach NVIDIA's assets.

No robot ships in any Isaac Lab wheel: the task loads ``anymal_d.usd`` and a ground plane from an asset root. This
module writes a root with the same relative paths (``ISAACSIM_ASSET_ROOT=<root>``):

- the robot: a collision-only quadruped MJCF with ANYmal's body and joint names (``base``, ``LF_HIP`` ...,
  ``LF_HAA`` ..., feet as welded ``XX_FOOT`` bodies so the task's regexes match), converted to USD by
  ``mujoco-usd-converter`` and flattened so that every rigid body is a sibling under one root prim, the layout
  Isaac Lab's articulation loader expects;
- the ground plane: one Xform with a collision plane child, as ``spawn_ground_plane`` expects;
- the actuator "net": a TorchScript module with the interface of ANYmal's LSTM actuator net (an ``lstm`` member
  whose weights give the hidden size; ``forward(x, (h, c)) -> (torque, (h, c))``) that computes a PD torque,
  40 N m/rad x position error - 5 N m s/rad x velocity, the gains of Isaac Lab's DC-motor ANYdrive model. So the
  task runs with its own actuator config, and an exported override line runs unchanged in Isaac Lab's trainer.

Geometry and masses are round numbers of ANYmal's size (about 45 kg, 0.6 m long, legs 0.285 + 0.32 m): results
with it are results on a stand-in, not on ANYmal. Needs ``pxr`` (shipped with Isaac Lab's ``usd-exchange``) and
the ``mujoco_usd_converter`` command; run ``python -m tests.backends.isaaclab.standin <root>`` to write one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROBOT = Path("Isaac/IsaacLab/Robots/ANYbotics/ANYmal-D/anymal_d.usd")
#: ANYmal-C has ANYmal-D's body and joint names and actuator net: the same stand-in serves the contrib task
#: ``IsaacContrib-Velocity-Flat-AnymalC`` (whose physics defaults to PhysX, unlike the core tasks).
ROBOT_C = Path("Isaac/IsaacLab/Robots/ANYbotics/ANYmal-C/anymal_c.usd")
GROUND = Path("Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda")
ACTUATOR_NET = Path("Isaac/IsaacLab/ActuatorNets/ANYbotics/anydrive_3_lstm_jit.pt")
THIGH_M, SHANK_M = 0.285, 0.32  # leg segment lengths
#: leg name -> (x, y) of its hip in the base frame, m
HIPS = {"LF": (0.30, 0.10), "RF": (0.30, -0.10), "LH": (-0.30, 0.10), "RH": (-0.30, -0.10)}


def _leg(name: str, x: float, y: float) -> str:
    side = 1.0 if y > 0 else -1.0
    return f"""
      <body name="{name}_HIP" pos="{x} {y} 0">
        <inertial mass="2.8" pos="0 {0.05 * side} 0" diaginertia="0.005 0.005 0.005"/>
        <joint name="{name}_HAA" axis="1 0 0" range="-0.72 0.72"/>
        <geom class="col" type="cylinder" size="0.05 0.05" pos="0 {0.05 * side} 0" quat="1 1 0 0"/>
        <body name="{name}_THIGH" pos="0 {0.1 * side} 0">
          <inertial mass="3.0" pos="0 0 {-THIGH_M / 2}" diaginertia="0.03 0.03 0.004"/>
          <joint name="{name}_HFE" axis="0 1 0" range="-9.4 9.4"/>
          <geom class="col" type="capsule" size="0.04" fromto="0 0 0 0 0 {-THIGH_M + 0.05}"/>
          <body name="{name}_SHANK" pos="0 0 {-THIGH_M}">
            <inertial mass="0.6" pos="0 0 {-SHANK_M / 2}" diaginertia="0.01 0.01 0.001"/>
            <joint name="{name}_KFE" axis="0 1 0" range="-9.4 9.4"/>
            <geom class="col" type="capsule" size="0.02" fromto="0 0 -0.03 0 0 {-SHANK_M + 0.03}"/>
            <body name="{name}_FOOT" pos="0 0 {-SHANK_M}">
              <inertial mass="0.05" pos="0 0 0" diaginertia="1e-5 1e-5 1e-5"/>
              <geom class="col" type="sphere" size="0.03" friction="0.8 0.02 0.01"/>
            </body>
          </body>
        </body>
      </body>"""


def quadruped_mjcf() -> str:
    """The stand-in robot as MJCF text (base 20 kg; standing height about 0.6 m at ANYmal's default pose)."""
    legs = "".join(_leg(name, x, y) for name, (x, y) in HIPS.items())
    return f"""<mujoco model="anymal">
  <compiler angle="radian" autolimits="true"/>
  <default>
    <joint damping="1" frictionloss="0.1"/>
    <default class="col"><geom group="3"/></default>
  </default>
  <worldbody>
    <body name="base" pos="0 0 0.62">
      <freejoint/>
      <inertial mass="20" pos="0 0 0" diaginertia="0.6 0.6 0.2"/>
      <geom class="col" type="box" size="0.3 0.12 0.09"/>{legs}
    </body>
  </worldbody>
  <contact>
    {"".join(f'<exclude body1="base" body2="{n}_THIGH"/>' for n in HIPS)}
  </contact>
</mujoco>
"""


def flatten_bodies(src: Path, dst: Path, root_name: str = "anymal") -> None:
    """Copy the converter's USD with every rigid body (and the physics scope) re-parented under ``/root_name``.

    The converter nests bodies as in MJCF; Isaac Lab's articulation finds links as siblings. Each body keeps its
    world pose, and relationships (joints' body0/body1, ...) are rewritten to the new paths.
    """
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.Open(str(src))
    layer = stage.GetRootLayer()
    bodies = [p.GetPath() for p in stage.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)]
    moved = {path: Sdf.Path(f"/{root_name}/{path.name}") for path in bodies}
    physics = stage.GetDefaultPrim().GetPath().AppendChild("Physics")
    if stage.GetPrimAtPath(physics):
        moved[physics] = Sdf.Path(f"/{root_name}/Physics")

    out = Sdf.Layer.CreateNew(str(dst))
    for key in ("upAxis", "metersPerUnit", "kilogramsPerUnit"):
        if layer.pseudoRoot.GetInfo(key) is not None:
            out.pseudoRoot.SetInfo(key, layer.pseudoRoot.GetInfo(key))
    Sdf.PrimSpec(out.pseudoRoot, root_name, Sdf.SpecifierDef, "Xform")
    out.defaultPrim = root_name
    xforms = UsdGeom.XformCache()
    for old, new in moved.items():
        Sdf.CopySpec(layer, old, out, new)
        spec = out.GetPrimAtPath(new)
        for child in list(spec.nameChildren):  # nested bodies are copied on their own
            if old.AppendChild(child.name) in moved:
                del spec.nameChildren[child.name]
        if old in bodies:
            pose = Gf.Matrix4d(xforms.GetLocalToWorldTransform(stage.GetPrimAtPath(old))).RemoveScaleShear()
            spec.attributes["xformOp:translate"].default = Gf.Vec3d(pose.ExtractTranslation())
            orient = spec.attributes["xformOp:orient"]
            quat = pose.ExtractRotationQuat()
            orient.default = Gf.Quatf(quat) if orient.typeName == Sdf.ValueTypeNames.Quatf else Gf.Quatd(quat)

    def remap(path: Sdf.Path) -> Sdf.Path:
        owner = max((o for o in moved if path.HasPrefix(o)), key=lambda o: o.pathElementCount, default=None)
        return path if owner is None else path.ReplacePrefix(owner, moved[owner])

    def retarget(spec: Sdf.PrimSpec, old: Sdf.Path, new: Sdf.Path) -> None:
        for rel in spec.relationships:
            for items in (rel.targetPathList.explicitItems, rel.targetPathList.prependedItems):
                targets = [t.ReplacePrefix(new, old) if t.HasPrefix(new) else t for t in items]
                if targets:
                    items.clear()
                    for target in targets:
                        items.append(remap(target))
        for child in spec.nameChildren:
            retarget(child, old, new)

    for old, new in moved.items():
        retarget(out.GetPrimAtPath(new), old, new)
    out.Save()


def write_ground(path: Path) -> None:
    """A 100 m x 100 m collision plane (z up, metres) under ``/GroundPlane``."""
    from pxr import Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, "/GroundPlane")
    stage.SetDefaultPrim(root.GetPrim())
    plane = UsdGeom.Plane.Define(stage, "/GroundPlane/CollisionPlane")
    plane.CreateAxisAttr("Z")
    plane.CreateWidthAttr(100.0)
    plane.CreateLengthAttr(100.0)
    plane.CreatePurposeAttr(UsdGeom.Tokens.guide)
    UsdPhysics.CollisionAPI.Apply(plane.GetPrim())
    stage.GetRootLayer().Save()


def write_actuator_net(path: Path, kp: float = 40.0, kd: float = 5.0) -> None:
    """Save the PD stand-in of ANYdrive's LSTM actuator net as TorchScript (see the module docstring)."""
    import torch

    class PDNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(2, 8, 1, batch_first=True)  # Isaac Lab reads its shapes only
            self.kp, self.kd = kp, kd

        def forward(
            self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
        ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
            return self.kp * x[:, 0, 0] - self.kd * x[:, 0, 1], state

    torch.jit.save(torch.jit.script(PDNet()), str(path))


def converter_command() -> str:
    """The ``mujoco_usd_converter`` executable next to this Python, else on PATH."""
    here = Path(sys.executable).with_name("mujoco_usd_converter")
    found = str(here) if here.exists() else shutil.which("mujoco_usd_converter")
    if found is None:
        raise RuntimeError("mujoco_usd_converter not found: pip install --no-deps mujoco-usd-converter==0.8.0")
    return found


def write_asset_root(root: Path) -> Path:
    """Write the stand-in robot (as ANYmal-D and ANYmal-C), ground plane and actuator net under ``root`` (Isaac Lab's
    paths); returns ``root``."""
    for relative in (ROBOT, ROBOT_C, GROUND, ACTUATOR_NET):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mjcf = Path(tmp) / "anymal.xml"
        mjcf.write_text(quadruped_mjcf())
        conv = Path(tmp) / "usd"
        flags = ["--no-layer-structure", "--no-physics-scene"]
        subprocess.run([converter_command(), *flags, str(mjcf), str(conv)], check=True, capture_output=True)
        (usd,) = conv.glob("*.usd*")
        flatten_bodies(usd, root / ROBOT)
    shutil.copyfile(root / ROBOT, root / ROBOT_C)
    write_ground(root / GROUND)
    write_actuator_net(root / ACTUATOR_NET)
    return root


if __name__ == "__main__":
    print(write_asset_root(Path(sys.argv[1])))
