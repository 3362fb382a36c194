"""A run's trial inputs: built once per trial config and shared by every version, shrunk when they do not fit,
and the re-check's fresh inputs.  The one owner of all three (the session holds one :class:`TrialInputs`,
:mod:`pytest_kforge.bench` asks it, and it asks nothing back).

Random values are drawn on the host before a shared GPU's lock (:meth:`TrialInputs.host_draw`), so the
exclusive section only copies them; a shrink for memory inside the section changes the params, and then the
section draws its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .correctness import run_once
from .spec import inputs_to

if TYPE_CHECKING:  # pragma: no cover
    from .registry import Version
    from .spec import KernelSpec, TrialConfig

__all__ = ["TrialInputs", "HostInputs", "Prepared", "RECHECK_SEED_OFFSET"]

#: the re-check's fresh inputs use the run's seed plus this (different values, same reproducibility)
RECHECK_SEED_OFFSET = 7919


@dataclasses.dataclass
class HostInputs:
    """A trial's inputs drawn on the host outside the GPU lock, for ``params``: ``trial`` (None when this
    process already holds them on the device) and the re-check's ``fresh`` ones."""

    params: dict[str, Any]
    trial: dict[str, Any] | None
    fresh: dict[str, Any]

    def for_params(self, params: Mapping[str, Any]) -> HostInputs | None:
        return self if dict(params) == self.params else None


@dataclasses.dataclass
class Prepared:
    """What one call of a version needs: the config really used (shrunk or not), inputs, outputs, and the
    call contract's problems (empty when the first call was fine)."""

    trial: TrialConfig
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    problems: list[str]


def _is_oom(exc: BaseException) -> bool:
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(exc, oom)


class TrialInputs:
    """The session-scoped input cache of one kernel on one device, keyed by trial id."""

    def __init__(self, spec: KernelSpec, *, seed: int, device: str,
                 empty_cache: Callable[[], None] | None = None) -> None:
        self.spec = spec
        self.seed = seed
        self.device = device
        self._empty_cache = empty_cache
        self._cache: dict[str, tuple[TrialConfig, dict[str, Any]]] = {}

    @property
    def recheck_seed(self) -> int:
        """The seed of the re-check's fresh inputs (drawn on the host before the GPU section, or inside it)."""
        return self.seed + RECHECK_SEED_OFFSET

    def in_use(self, trial: TrialConfig) -> TrialConfig:
        """The config ``trial`` runs as: a shrink an earlier version needed is remembered."""
        return self._cache.get(trial.id, (trial, None))[0]

    def host_draw(self, trial: TrialConfig) -> HostInputs:
        """Draw ``trial``'s inputs (unless already on the device) and the re-check's on the host."""
        used = self.in_use(trial)
        mine = None if used.id in self._cache else self.spec.make_inputs(used.params, seed=self.seed, device="cpu")
        return HostInputs(dict(used.params), mine,
                          self.spec.make_inputs(used.params, seed=self.recheck_seed, device="cpu"))

    def fresh(self, params: Mapping[str, Any], host: HostInputs | None) -> dict[str, Any]:
        """The re-check's inputs for ``params`` on the device (from ``host`` when it drew them)."""
        made = host.for_params(params) if host is not None else None
        if made is not None:
            return inputs_to(made.fresh, self.device)
        return self.spec.make_inputs(dict(params), seed=self.recheck_seed, device=self.device)

    def _device_inputs(self, trial: TrialConfig, host: HostInputs | None) -> tuple[TrialConfig, dict[str, Any]]:
        if trial.id not in self._cache:
            made = host.for_params(trial.params) if host is not None else None
            inputs = (inputs_to(made.trial, self.device) if made is not None and made.trial is not None
                      else self.spec.make_inputs(trial.params, seed=self.seed, device=self.device))
            self._cache[trial.id] = (trial, inputs)
        return self._cache[trial.id]

    def prepare(self, version: Version, trial: TrialConfig, host: HostInputs | None = None) -> Prepared:
        """Inputs and fresh outputs of one call of ``version`` on ``trial``, called once to check its contract.

        Out of GPU memory, the spec's ``shrink_param`` is halved (the note says so) until it fits; the shrunk
        config and its inputs are then what later versions get for ``trial``.
        """
        current = trial  # the cache answers for trial.id with the shrunk config when an earlier version shrank it
        while True:
            try:
                used, inputs = self._device_inputs(current, host)
                outputs = self.spec.alloc_outputs(used.params, device=self.device)
                problems = run_once(version, inputs, outputs)
                if used.id != trial.id:
                    self._cache[trial.id] = (used, inputs)
                return Prepared(used, inputs, outputs, problems)
            except Exception as exc:  # noqa: BLE001 - only out-of-memory is handled, the rest re-raised
                key = self.spec.shrink_param
                if not _is_oom(exc) or not key or int(current.params[key]) <= 1:
                    raise
                self._cache.pop(current.id, None)
                self._cache.pop(trial.id, None)
                self._free()
                old = int(current.params[key])
                note = f"{key} halved from {int(trial.params[key])} to {old // 2}: out of GPU memory"
                current = current.with_params(note=note, **{key: old // 2})

    def _free(self) -> None:
        if self._empty_cache is not None:
            self._empty_cache()
            return
        import torch

        torch.cuda.empty_cache()
