"""The soak (benchmarks/soak.py) in its CI size: device and host memory stay flat over a
few hundred training steps. The full 10,000-step run is `python benchmarks/soak.py`."""

import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[3] / "benchmarks" / "soak.py"


def test_soak_smoke_keeps_memory_flat():
    result = subprocess.run([sys.executable, str(SOAK), "--steps", "300", "--warmup", "50",
                             "--every", "25"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "memory flat" in result.stdout
