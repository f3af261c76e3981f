"""The config of a test system's task with two sizes, N items in d dimensions, shared by the tests that register a
system of their own: each names only how large N may be and how many parameters its model has."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recallkit.empirics.config import check_model, positive_int

__all__ = ["SizeNdConfig"]


@dataclass(frozen=True)
class SizeNdConfig:
    """A ``linear`` model of N items in d dimensions; a subclass sets ``MAX_N`` and ``param_count``."""

    model: str
    N: int
    d: int
    MODELS: ClassVar[tuple[str, ...]] = ("linear",)
    MAX_N: ClassVar[int] = 1000

    def __post_init__(self) -> None:
        check_model(self)
        object.__setattr__(self, "N", positive_int(self.N, "N", self.MAX_N))
        object.__setattr__(self, "d", positive_int(self.d, "d", 1000))

    @property
    def param_count(self) -> int:
        raise NotImplementedError

    trainable_params = property(lambda self: self.param_count)
    n_train = property(lambda self: self.N)

    def sizes(self) -> dict[str, int]:
        return {"N": self.N, "d": self.d}
