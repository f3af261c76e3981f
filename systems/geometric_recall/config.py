"""Run config of the fact-bijections task (keys ``N`` subjects = attributes, ``R`` relations, ``d``, ``m`` [4*d])."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recallkit.empirics.config import MAX_D, MAX_M, MAX_N, MAX_R, check_model, positive_int

@dataclass(frozen=True)
class FactBijectionsConfig:
    """Geometric recall: R random bijections pi_r on N subjects; query (s, r) -> pi_r(s)."""

    model: str
    N: int
    R: int
    d: int
    m: int | None = None
    # learned: every table trained. frozen-subjects: E_s fixed random (U, E_r, MLP trained).
    # frozen: E_s and U fixed random on the sphere (E_r and the MLP trained): the paper's
    # "frozen random embeddings" control.
    MODELS: ClassVar[tuple[str, ...]] = ("learned", "frozen-subjects", "frozen")

    def __post_init__(self) -> None:
        check_model(self)
        for key, limit in (("N", MAX_N), ("R", MAX_R), ("d", MAX_D)):
            object.__setattr__(self, key, positive_int(getattr(self, key), key, limit))
        object.__setattr__(self, "m", positive_int(4 * self.d if self.m is None else self.m, "m", MAX_M))

    @property
    def learned_entity_tables(self) -> int:
        """How many of the two per-entity tables (subjects E_s, attributes U, N x d each) are trained."""
        return {"learned": 2, "frozen-subjects": 1, "frozen": 0}[self.model]

    @property
    def param_count(self) -> int:
        """Trainable parameters: every learned per-entity table (E_s for learned, U for learned and
        frozen-subjects), E_r, W1, b1, W2."""
        return self.learned_entity_tables * self.N * self.d + self.R * self.d + 2 * self.m * self.d + self.m

    trainable_params = param_count

    @property
    def n_train(self) -> int:
        return self.N * self.R

    def sizes(self) -> dict[str, int]:
        return {"N": self.N, "R": self.R, "d": self.d, "m": self.m}

    def bytes_per_model(self, trainer_config) -> int:
        """Rough size of one model's largest training activations (floats x 4 bytes x autograd copies)."""
        n = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
        per_item = self.N * 3 + self.m * 3 + self.d * 4
        data = self.n_train * 2 + self.N * self.d * 8 + self.m * self.d * 8
        return 4 * (n * per_item + data)
