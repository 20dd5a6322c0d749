"""``python -m sweep.export reports/<run_id>``: the winning policy as TorchScript and ONNX
(:mod:`sweep.report.policy`)."""

from sweep.cli import run_main
from sweep.report.policy import main

if __name__ == "__main__":
    run_main(main)
