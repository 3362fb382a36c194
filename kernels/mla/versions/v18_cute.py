"""v18_cute: v12_cute with each warpgroup's own P V taken from registers (rs-wgmma).

In v12_cute a warpgroup writes its page's P to shared memory, fences, waits on a warpgroup
barrier (its P V reads rows the other three warps wrote), and only then issues its own P V --
about 200 cycles of store + barrier on the critical path twice per pair, plus 8 KB of shared
memory reads per P V.  Here the own P V uses the bf16 copy of the softmax output in registers
(the m64n64 accumulator and the m64k16 A fragment give each thread the same elements in the same
order); P still goes to shared memory for the other warpgroup, without the warpgroup barrier.
Schedule otherwise identical to v12_cute (one change; v15_cute bundled it with a new schedule).

Prediction (before the H200 run): spec 951 -> 920-940 us, decode 81 -> 78-80 us.
"""

from __future__ import annotations

from kforge_kernels.mla.cute.host import SEESAW_CONFIG, OWNP_FEATURES, version_functions

LANGUAGE = "cute-dsl"
PARENT = "v12_cute"
DESCRIPTION = "v12_cute with the own page's P V as an rs-wgmma (P from registers)"
FEATURES = OWNP_FEATURES
CONFIG = dict(SEESAW_CONFIG)
supports, prepare, run = version_functions("v18_cute", "sm90_seesaw_ownp", CONFIG)
