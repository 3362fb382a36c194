"""Side-by-side benchmarks of kernel versions against outside implementations ("peers").

``benchmarks.peers`` holds the peers (each with the same call contract as a version);
``python -m benchmarks.compare`` times versions and peers on the same inputs with the same timer.
"""
