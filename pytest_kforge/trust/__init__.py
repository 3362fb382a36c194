"""Trust: running untrusted kernel versions safely and catching the ways they cheat.

* :mod:`.sandbox` runs a command in its own process group with a wall-clock limit and
  classifies hangs, crashes and CUDA faults, then probes that the GPU still works.
* :mod:`.paths` decides where an agent may write (``kernels/<kernel>/`` and ``docs/``).
* :mod:`.static` reads a version's source (AST) for forbidden calls, imports and caches.
* :mod:`.runtime` guards one call of a version: reference/attention entry points raise,
  side-stream work, input mutation, returned-tensor identity, and the roofline floor.
* :mod:`.plugin` is a pytest11 plugin (``--kforge-trust strict|warn|off``) running the static check.

Submodules are imported on demand so that importing this package stays cheap.
"""

from __future__ import annotations

__all__ = ["sandbox", "paths", "static", "runtime", "plugin"]
