"""Random-feature ridge regression, registered as a recallkit system (registration only: no torch here)."""
from pathlib import Path

from recallkit.registry import System, Task

__all__ = ["SYSTEM"]

SYSTEM = System(
    name="rf_ridge",
    title="Random-feature ridge regression: test error ~ p^-a + n^-b",
    root=Path(__file__).resolve().parent,
    tasks=(Task("rf_ridge", config=f"{__name__}.config:RFRidgeConfig", problem=f"{__name__}.task:RFRidge",
                trainers=("ridge",), run_metrics=("test_error", "train_error")),),
    trainers=(f"{__name__}.trainer:RIDGE",),
)
