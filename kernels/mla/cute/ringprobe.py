"""Ring probes: v28_cute's CTA with the math taken out or cut down, to see what sets its pair period.

Not versions: they compute nothing right and their output is not checked.  The producer, the
two-page ring of nine 64 x 64 TMA blocks per page, the grid and the split pairs are v28_cute's, so
the timeline probe (``_cute_trace --kind sm90_seesaw_pair_ring_<key>_trace``, keys in ``PROBES``)
reports the pair period of what is left, on every SM at once (or on a few, with ``--b``):

* ``stream``: both consumer warpgroups give every block back as soon as it landed, so up to two
  pages are in flight -- the most this ring can move per SM (``streampf``: plus L2 prefetch; ``streammc``: its
  KV chunks multicast to both row blocks;
  ``stream3`` / ``stream1``: three barrier slots per page / one);
* ``serial``: page p is given back only once page p + 1 has fully landed, so one page is in flight
  at a time -- its pair period is twice the release-to-landing latency of one page (``serial3``:
  three slots per page);
* ``sonly``: the ring and the two S GEMMs only;
* ``nosoftmax`` / ``finite`` / ``scaled`` / ``constp``: the whole pair loop with the softmax's
  arithmetic and P's data varied (raw S / constant / S x 2^-10 / real softmax then constant P);
* ``solo``: v35_cute with WG1's S_B held back until WG0's page-A softmax is done (the softmax with
  no wgmma beside it; the output stays correct).

Run 11 (devlog): stream 3092 cycles per spec pair, serial 5295, sonly 5363, finite 4665,
nosoftmax 8079, against v28_cute's 6444.  Run 12: constp 6392 and scaled 8251 against v28_cute's
6442 (the softmax's arithmetic, not P's data, is the ~1700-cycle gap); stream3 1794, stream1 2118,
serial3 3996 -- the nine-slot ring's rate was its per-slot barrier handshake (v33_cute).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import warpgroup

from kforge_kernels.mla.cute.seesaw_pair import MlaSplitSm90SeesawPairC3Early, MlaSplitSm90SeesawPairTmaO
from kforge_kernels.mla.cute.sm90_parts import BLOCK_M, PAGE, WG


class MlaRingProbeStream(MlaSplitSm90SeesawPairTmaO):
    """v28_cute's producer and ring; the consumers only wait for each block and give it back."""

    computes_output = False  # the trace runner reads the timeline only

    ring_mode = "stream"

    @cute.jit
    def _seesaw_consumer(self, qk_mma, pv_mma, rs_mmas, tidx, wg, m_block, bi, split, t, p_begin, p_end, n_iter,
                         q_pipe, kv_pipe, sQ, sKV, sV, sRed, mOp, mLp, mOut, mLse, mSem, scale_log2):
        c = wg - 1
        ctid = tidx % WG
        self._probe_begin(q_pipe, mSem, ctid, c)
        n_pairs = (n_iter + 1) // 2
        for k in cutlass.range(n_pairs, unroll=1):
            ph = k % 2
            has_b = p_begin + 2 * k + 1 < p_end
            self._ev(mSem, ctid, c, k, 0)
            if cutlass.const_expr(self.ring_mode == "stream"):
                self._pass_through(kv_pipe, 0, ph)
                self._ev(mSem, ctid, c, k, 1)  # page A landed (and given back)
                if has_b:
                    self._pass_through(kv_pipe, 1, ph)
                self._ev(mSem, ctid, c, k, 2)  # page B landed
            else:
                # one page in flight: the previous page goes back only once this one has landed
                self._wait_blocks(kv_pipe, 0, ph, self._blocks())
                self._ev(mSem, ctid, c, k, 1)  # page A landed
                if k > 0:
                    self._release_blocks(kv_pipe, 1, 1 - ph, self._blocks())
                if has_b:
                    self._wait_blocks(kv_pipe, 1, ph, self._blocks())
                self._ev(mSem, ctid, c, k, 2)  # page B landed
                self._release(kv_pipe, 0, ph)
        self._probe_end(mSem, ctid, c)

    @cute.jit
    def _pass_through(self, kv_pipe, stage: cutlass.Constexpr, ph):
        """Give each block of the page in ``stage`` back as soon as it landed."""
        for j in cutlass.range_constexpr(self.kv_chunks):
            kv_pipe.consumer_wait(self._chunk(stage, j, ph))
            kv_pipe.consumer_release(self._chunk(stage, j, ph))

    @cute.jit
    def _probe_begin(self, q_pipe, mSem, ctid, c):
        """The probe header's start words, then wait for Q (the producer loads it as in v28_cute)."""
        self._consumer_begin(q_pipe, mSem, ctid, c)

    @cute.jit
    def _probe_end(self, mSem, ctid, c):
        """The header's end words: loop end = epilogue end (there is none), and WG0's global timer."""
        self._hdr(mSem, ctid, 4 + c)
        self._hdr(mSem, ctid, 6 + c)
        if c == 0:
            self._hdr(mSem, ctid, 9, True)


class MlaRingProbeStreamPrefetch(MlaRingProbeStream):
    """``stream`` with row block 0's producer prefetching pages 4 ahead into L2 (v13_cute's mechanism).

    Decode's ring alone moved only 24.2 B/cycle per SM (pages from DRAM, ~3.1 TB/s) against spec's
    47.7: this says whether more bytes in flight raise decode's data floor (59.6 us).
    """

    l2_prefetch_pages = 4


class MlaRingProbeStreamMulticast(MlaRingProbeStream):
    """``stream`` with the two row blocks of a split in one cluster, each KV chunk multicast to both (v67_cute's ring).

    With the pair that makes a cluster of 4 CTAs.  Against ``stream`` on the same grid (``--b`` and ``--splits`` small
    enough that every cluster is resident at once, ``tools/cluster_occupancy.py``; ``--b`` alone keeps the planned
    split count, 8 at b = 24, several waves) this says whether halving the L2 -> SM bytes raises what the ring moves
    per SM: if the ring's rate is set by the L2 -> SM path, it rises; if by each CTA's own turnover, it stays.
    """

    cluster_rows = 2


class MlaRingProbeSerial(MlaRingProbeStream):
    """The ring probe with one page in flight at a time (release-to-landing latency)."""

    ring_mode = "serial"


class MlaRingProbeStream3(MlaRingProbeStream):
    """``stream`` with each page loaded as three 64 x 192 TMA boxes (three barriers) instead of nine 64 x 64.

    The producer needs ~105-140 cycles per box (run 11), about the ring's whole per-box budget at
    47.7 B/cycle per SM: if its issue sets the ring's rate, three boxes per page move faster.
    """

    kv_chunks = 3


class MlaRingProbeStream1(MlaRingProbeStream):
    """``stream`` with one barrier per page (``kv_chunks = 1``): one acquire, nine TMA issues back to back."""

    kv_chunks = 1


class MlaRingProbeSerial3(MlaRingProbeStream3):
    """``serial`` with three boxes per page: one page's release-to-landing latency at a third of the issues."""

    ring_mode = "serial"


class MlaRingProbeSOnly(MlaRingProbeStream):
    """The ring and the two S GEMMs of a pair (WG0 S_A, WG1 S_B, as in v28_cute), nothing else.

    Tensor work 2304 cycles per pair.  Run 11: 5363 cycles per spec pair against the ring alone's
    3092, the pages landing at 27.5 B/cycle per SM instead of 47.7.  A likely reason (not measured
    apart): at m64n64k16 with both operands in shared memory the S GEMMs read 128 B per cycle, the
    port the TMA writes land through.
    """

    @cute.jit
    def _seesaw_consumer(self, qk_mma, pv_mma, rs_mmas, tidx, wg, m_block, bi, split, t, p_begin, p_end, n_iter,
                         q_pipe, kv_pipe, sQ, sKV, sV, sRed, mOp, mLp, mOut, mLse, mSem, scale_log2):
        c = wg - 1
        ctid = tidx % WG
        thr_qk = qk_mma.get_slice(ctid)
        tSrQ = qk_mma.make_fragment_A(thr_qk.partition_A(sQ))
        tSrK = qk_mma.make_fragment_B(thr_qk.partition_B(sKV))
        s_shape = thr_qk.partition_shape_C((BLOCK_M, PAGE))
        self._probe_begin(q_pipe, mSem, ctid, c)
        n_pairs = (n_iter + 1) // 2
        sink = cute.make_rmem_tensor(1, cutlass.Float32)
        sink[0] = 0.0
        for k in cutlass.range(n_pairs, unroll=1):
            ph = k % 2
            has_b = p_begin + 2 * k + 1 < p_end
            self._ev(mSem, ctid, c, k, 0)
            acc_S = cute.make_rmem_tensor(s_shape, cutlass.Float32)
            acc_S.fill(0.0)
            if c == 0:
                self._qk(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, 0, ph)
                warpgroup.wait_group(0)
                self._release(kv_pipe, 0, ph)
                self._ev(mSem, ctid, c, k, 2)  # S_A done
                if has_b:
                    self._wait_blocks(kv_pipe, 1, ph, self._blocks())
                    self._release(kv_pipe, 1, ph)
            else:
                self._wait_blocks(kv_pipe, 0, ph, self._blocks())
                self._release(kv_pipe, 0, ph)
                if has_b:
                    self._qk(kv_pipe, qk_mma, acc_S, tSrQ, tSrK, 1, ph)
                    warpgroup.wait_group(0)
                    self._release(kv_pipe, 1, ph)
                self._ev(mSem, ctid, c, k, 2)  # S_B done
            sink[0] = sink[0] + acc_S[0]  # keep the GEMMs' results live
        rec = self._record(mSem)
        if sink[0] == 12345.0:
            rec[0] = 0  # (never, in practice: a use of the sums the compiler cannot drop)
        self._probe_end(mSem, ctid, c)


class MlaRingProbeNoSoftmax(MlaSplitSm90SeesawPairTmaO):
    """v28_cute's whole pair loop with the page softmax's arithmetic left out: S goes to P as it is.

    Against v28_cute's probe this says what the two softmaxes' chain costs per pair once every
    GEMM, barrier, store and release stays where it is.  The maxima stay -inf, so every max
    adoption multiplies O by 0 and O stays finite.  Run 11 measured this kind at 8079 cycles per
    spec pair -- slower than v28_cute's 6444 -- and ``MlaRingProbeNoSoftmaxFinite`` (P a constant)
    at 4665: the GEMMs' speed depends on P's data, which ``MlaRingProbeNoSoftmaxScaled`` separates
    from the softmax's arithmetic.
    """

    computes_output = False  # the trace runner reads the timeline only

    #: what P is made of instead of the softmax: "raw" S, a "constant" 2^-7, or S "scaled" by 2^-10
    p_from_s = "raw"

    @cute.jit
    def _page_softmax(self, acc_S, tScS_mn, p, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale):
        if cutlass.const_expr(self.p_from_s == "constant"):
            acc_S.fill(0.0078125)
        if cutlass.const_expr(self.p_from_s == "scaled"):
            acc_S.store(acc_S.load() * 0.0009765625)
        for r in cutlass.range_constexpr(cute.size(scale)):
            scale[r] = 1.0


class MlaRingProbeNoSoftmaxFinite(MlaRingProbeNoSoftmax):
    """``MlaRingProbeNoSoftmax`` with P set to 2^-7 everywhere: no softmax arithmetic *and* constant P data."""

    p_from_s = "constant"


class MlaRingProbeNoSoftmaxScaled(MlaRingProbeNoSoftmax):
    """No softmax arithmetic, but P = S * 2^-10: random mantissas like a real P, small values (32 multiplies).

    Between ``MlaRingProbeNoSoftmax`` (raw S as P) and ``MlaRingProbeNoSoftmaxFinite`` (constant P)
    this tells whether the pair's cost follows the softmax's instructions or the P V GEMMs' operand
    data (run 11 left that open).
    """

    p_from_s = "scaled"


class MlaRingProbeConstP(MlaSplitSm90SeesawPairTmaO):
    """The real page softmax (its exponentials still feed the row sums), then P overwritten by 2^-7.

    With ``MlaRingProbeNoSoftmaxScaled`` (no softmax, realistic P), ``MlaRingProbeNoSoftmaxFinite`` (neither)
    and v28_cute (both) this makes a 2 x 2: softmax arithmetic on / off x P data realistic / constant.
    """

    computes_output = False  # the trace runner reads the timeline only

    @cute.jit
    def _page_softmax(self, acc_S, tScS_mn, p, first_masked_pos, m_block, scale_log2, m_run, row_sum, scale):
        MlaSplitSm90SeesawPairTmaO._page_softmax(self, acc_S, tScS_mn, p, first_masked_pos, m_block, scale_log2,
                                                 m_run, row_sum, scale)
        acc_S.fill(0.0078125)


class MlaRingProbeSoloSoftmax(MlaSplitSm90SeesawPairC3Early):
    """v35_cute with WG1's S_B held back until WG0's page-A softmax arithmetic is done (``solo_softmax_probe``).

    The softmax runs 3-4x its MUFU and issue count, and WG0's (beside S_B) is slower than WG1's (beside
    the P V GEMMs): with no wgmma running beside it, WG0's e2 -> e8 span says whether the other
    warpgroup's GEMM is what slows it.  The output stays correct; only the schedule is worse.
    """

    solo_softmax_probe = True


#: the probe kinds ``sm90_seesaw_pair_ring_<key>`` (``_cute_kinds``)
PROBES = {"stream": MlaRingProbeStream, "streampf": MlaRingProbeStreamPrefetch, "streammc": MlaRingProbeStreamMulticast,
          "serial": MlaRingProbeSerial, "stream3": MlaRingProbeStream3, "stream1": MlaRingProbeStream1,
          "serial3": MlaRingProbeSerial3, "sonly": MlaRingProbeSOnly, "nosoftmax": MlaRingProbeNoSoftmax,
          "finite": MlaRingProbeNoSoftmaxFinite, "scaled": MlaRingProbeNoSoftmaxScaled, "constp": MlaRingProbeConstP,
          "solo": MlaRingProbeSoloSoftmax}
