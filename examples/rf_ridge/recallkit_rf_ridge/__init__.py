"""Random-feature ridge regression as a recallkit system: its plug-in hooks (registration only: no torch here)."""
from pathlib import Path

from recallkit.registry import SystemInfo, Task, hookimpl

__all__ = ["recallkit_system", "recallkit_tasks", "recallkit_trainers"]


@hookimpl
def recallkit_system() -> SystemInfo:
    return SystemInfo(name="rf_ridge", title="Random-feature ridge regression: test error ~ p^-a + n^-b",
                      root=Path(__file__).resolve().parent)


@hookimpl
def recallkit_tasks() -> tuple[Task, ...]:
    return (Task("rf_ridge", config=f"{__name__}.config:RFRidgeConfig", problem=f"{__name__}.task:RFRidge",
                 trainers=("ridge",), run_metrics=("test_error", "train_error")),)


@hookimpl
def recallkit_trainers() -> tuple[str, ...]:
    return (f"{__name__}.trainer:RIDGE",)
