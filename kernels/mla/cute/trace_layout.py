"""The timeline probe's record layout, shared by the kernel side (``_cute_probe``) and the runner (``_cute_trace``).

Plain constants: a version imports this through its kernel, so it must import nothing else (the
trust check follows a version's sibling imports, and the runner imports the harness).

Per CTA, int32 SM-clock words: a header (per warpgroup: consumer start, Q landed, loop end,
epilogue end; then WG0's global-timer ns low words at its start and end), TRACE_EVENTS per (warpgroup, pair) for the first TRACE_PAIRS pairs, then 2 per page
(first / last slot free) for the producer's first TRACE_PAGES pages.
"""

TRACE_HDR, TRACE_PAIRS, TRACE_EVENTS, TRACE_PAGES = 10, 32, 10, 64
TRACE_PROD = TRACE_HDR + 2 * TRACE_PAIRS * TRACE_EVENTS  # the first producer word
TRACE_PER_CTA = TRACE_PROD + 2 * TRACE_PAGES
